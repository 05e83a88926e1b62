// The `framegate` subcommands. Each Add*Command registers its options on the parent app
// and returns the function that runs it once parsed. Exit codes are the same for all:
// 0 success, 1 a check failed (a test failure), 2 a harness or usage error.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitHarnessError = 2;

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddAdviseCommand(CLI::App& parent);
Command AddAuditCommand(CLI::App& parent);
Command AddDevicesCommand(CLI::App& parent);
Command AddGenerateCommand(CLI::App& parent);
Command AddCheckCommand(CLI::App& parent);
Command AddGoldenCommand(CLI::App& parent);
Command AddInfoCommand(CLI::App& parent);
Command AddMetricsCommand(CLI::App& parent);
Command AddReportCommand(CLI::App& parent);
Command AddRunCommand(CLI::App& parent);
Command AddRunCellCommand(CLI::App& parent);
// The results store's commands (store_commands.cc).
Command AddCompareCommand(CLI::App& parent);
Command AddDbCommand(CLI::App& parent);
Command AddHistoryCommand(CLI::App& parent);
Command AddMergeCommand(CLI::App& parent);
Command AddRegressionsCommand(CLI::App& parent);
Command AddListCommand(CLI::App& parent);

// A new run's identity and provenance (id, time, host, versions) for the store.
RunInfo NewRunInfo(const std::string& tags, const std::string& command);

// Shared by the commands: prints "framegate: error: <message>" to stderr, returns 2.
int ReportError(const Status& status);
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

// Adds --golden-dir DIR, defaulting to $FRAMEGATE_GOLDEN_DIR or the repository's golden/.
void AddGoldenDirOption(CLI::App* app, std::string* dir);

// Adds --threads N (default 0 = every core this process may use).
void AddThreadsOption(CLI::App* app, int* threads);

}  // namespace framegate
