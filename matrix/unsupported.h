// Which cells this host cannot run, decided from the cell and the devices found, without
// running anything (`framegate list` shows them; the runner records them UNSUPPORTED).
//
// A cell is unsupported here when (first reason wins):
//   1. its device is not among the devices found (a CPU kernel path, "cpu:avx512", is
//      found when the CPU has the flags ATen needs for it);
//   2. a requirement (matrix `requires`) is not met:
//        cuda  the cell runs on a GPU (cuda:N)
//        bf16  native BF16 arithmetic: a CPU with avx512_bf16 or amx_bf16, a GPU with
//              compute capability >= 8.0
//        fp16  native FP16 compute: a GPU (capability >= 5.3); never the CPU
//        tf32  a GPU with capability >= 8.0
//        fp8   a GPU with FP8 tensor cores: capability >= 8.9
//   3. its policy computes in FP16 on the CPU and LibTorch has no FP16 convolution/matmul
//      there (before 2.2: harness/torch_version.h; the fp16-emulated policy is the CPU's
//      stand-in). From 2.2 on such a cell runs and is judged by its tolerance.
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

// cuda, bf16, fp16, tf32, fp8: the names `requires` accepts.
const std::vector<std::string>& KnownRequirements();

// "" when the cell can run on one of `found`; otherwise why not, one line. A cell whose
// policy cannot be resolved (its policy file cannot be read or does not define it) is
// not unsupported but wrong: that error comes back as the Status (never as a reason,
// which would count as passing). A loaded matrix has resolved its cells' policies
// already (matrix_spec.h), so this error means the cell did not come from one.
StatusOr<std::string> UnsupportedReason(const Cell& cell, const std::vector<DeviceInfo>& found);

}  // namespace framegate
