// Synthetic, fully filled CellResults and RunInfos for the store's tests, its test-only
// writer tool and its benchmark. Deterministic: the same arguments give the same value.
#pragma once

#include <cstdint>
#include <string>

#include "harness/cell_result.h"
#include "harness/run_record.h"

namespace framegate {

struct SyntheticShape {
  int frames = 8;   // per-frame PSNR/SSIM samples
  int steps = 8;    // per-step NaN/Inf counts and step seconds
  int repeats = 5;  // timing repeats
  int probes = 2;   // module probes
};

// Cell `index` on `device`: policy cycles fp32/bf16/fp16-emulated/fp8-e4m3, seed = index.
// `variant` perturbs metrics and timings (a different night); status PASS.
CellResult SyntheticCellResult(int index, const std::string& device, uint64_t variant,
                               const SyntheticShape& shape = {});
// A run "started" at `started_at` on host "host-a", tags "nightly".
RunInfo SyntheticRunInfo(const std::string& run_id, const std::string& started_at);

}  // namespace framegate
