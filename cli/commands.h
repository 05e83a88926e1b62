// The `framegate` subcommands that run a pipeline (the pipeline executable, main.cc, which
// links LibTorch and also serves every command of cli/command.h). Each Add*Command
// registers its options on the parent app and returns the function that runs it once
// parsed; exit codes as in cli/command.h.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

Command AddAdviseCommand(CLI::App& parent);
Command AddAuditCommand(CLI::App& parent);
Command AddDevicesCommand(CLI::App& parent);
Command AddGenerateCommand(CLI::App& parent);
Command AddCheckCommand(CLI::App& parent);
Command AddGoldenCommand(CLI::App& parent);
Command AddInfoCommand(CLI::App& parent);
Command AddRunCommand(CLI::App& parent);
Command AddRunCellCommand(CLI::App& parent);

// A new run's identity and provenance (id, time, host, versions) for the store.
RunInfo NewRunInfo(const std::string& tags, const std::string& command);

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
// For the commands that run a pipeline in this process. When `device` is a CPU kernel
// path ("cpu:avx2") that this process's ATEN_CPU_CAPABILITY does not pick, re-executes
// this process (/proc/self/exe, `argv`) with it set, before any ATen kernel has run: ATen
// reads it once. Returns Ok when no re-exec is needed; an error when `device` names
// several kernel paths ("cpu:*", a list), a path this CPU lacks, or the exec failed.
Status ExecForCpuKernelPath(const std::string& device, char** argv);

}  // namespace framegate
