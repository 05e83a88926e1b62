// The options that pick pipeline configs, shared by the commands that take them (run,
// check, generate, golden, audit, advise). No LibTorch: `run` is served by the front
// executable; ToSpec's definition (pipeline_spec.cc) is on the LibTorch side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cell.h"
#include "harness/number_limits.h"
#include "harness/status.h"

namespace framegate {

struct PipelineSpec;  // pipelines/pipeline_run.h

// The options that pick one pipeline config: --size | --model, --policy [--policy-file], --device,
// --seed, --weight-seed, --fault, --steps, --sampler, --guidance.
struct PipelineCliOptions {
  std::string size = "tiny";
  std::string model_dir;
  std::string policy = "fp32";
  std::string policy_file;  // --policy-file: defines policies that are not presets
  std::string device = "cpu";
  std::string fault;
  std::string sampler;
  uint64_t seed = 0;
  uint64_t weight_seed = 0;
  int steps = 0;
  double guidance = 0;
  // One cell per policy of the comma-separated --policy list.
  std::vector<Cell> ToCells() const;
  // Exactly one policy; names resolved (SpecOfCell); InvalidInput naming the bad value.
  StatusOr<PipelineSpec> ToSpec() const;
};
void AddPipelineOptions(CLI::App* app, PipelineCliOptions* options);
// An option's check against a limit of harness/number_limits.h, the bounds a matrix file's
// numbers have too (`--repeats`, `--warmup`, `--timeout`: kRepeatsLimit, ...). NaN and
// infinities fail; the error is LimitText ("--guidance: guidance must be a number from 1
// to 100").
CLI::Validator Within(const IntegerLimit& limit);
CLI::Validator Within(const RealLimit& limit);
// For the commands that run a pipeline in this process. When `device` is a CPU kernel
// path ("cpu:avx2") that this process's ATEN_CPU_CAPABILITY does not pick, re-executes
// this process (/proc/self/exe, `argv`) with it set, before any ATen kernel has run: ATen
// reads it once. Returns Ok when no re-exec is needed; an error when `device` names
// several kernel paths ("cpu:*", a list), a path this CPU lacks, or the exec failed.
Status ExecForCpuKernelPath(const std::string& device, char** argv);

}  // namespace framegate
