// A `framegate` subcommand, and the commands that need no LibTorch: the front executable
// (front_main.cc, build/bin/framegate) serves these itself; the pipeline executable
// (main.cc) has them too. Nothing here includes LibTorch. Each Add*Command registers its
// options on the parent app and returns the function that runs it once parsed. Exit codes
// are the same for all: 0 success, 1 a check failed (a test failure), 2 a harness or
// usage error.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/build_info.h"
#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitHarnessError = 2;

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddListCommand(CLI::App& parent);
// `run`: the matrix runner (run_command.cc). Its cells run in the pipeline executable's
// `run-cell` processes (PipelineExecutablePath, command_table.h).
Command AddRunCommand(CLI::App& parent);
// PSNR/SSIM of two videos (.npy or PNG folders); its --threads are std::threads over
// frames (default 0: every core), not LibTorch's (metrics_command.cc).
Command AddMetricsCommand(CLI::App& parent);
Command AddReportCommand(CLI::App& parent);
// The results store's commands (store_commands.cc).
Command AddCompareCommand(CLI::App& parent);
Command AddDbCommand(CLI::App& parent);
Command AddHistoryCommand(CLI::App& parent);
Command AddMergeCommand(CLI::App& parent);
Command AddRegressionsCommand(CLI::App& parent);

// A new run's identity and provenance (id, time, host, versions from `build`) for the
// store.
RunInfo NewRunInfo(const std::string& tags, const std::string& command, const BuildInfo& build);

// Shared by the commands: prints "framegate: error: <message>" to stderr, returns 2.
int ReportError(const Status& status);

// Adds --golden-dir DIR, defaulting to $FRAMEGATE_GOLDEN_DIR or the repository's golden/.
void AddGoldenDirOption(CLI::App* app, std::string* dir);

// Adds --threads N (default 0 = every core this process may use).
void AddThreadsOption(CLI::App* app, int* threads);

// The top-level app of both executables: its description, --version, one command required.
void SetUpTopLevelApp(CLI::App& app);

// The command `name` registered on `app`, hidden ones included; nullptr when none.
CLI::App* FindCommand(CLI::App& app, const std::string& name);

// Parses argv into `app` (its commands registered) and answers --help, --version, an
// unknown command and a usage error as every framegate executable does (one line, exit 2).
// Returns the exit code when the process is done, -1 when a command was parsed.
int ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace framegate
