// framegate (build/bin/framegate): the command users call. It does not link LibTorch, so
// that the commands that need none start at once: the results store's (history,
// regressions, compare, merge, db), report, metrics, list and run (in a CPU build: `run`
// starts the pipeline executable's cell workers), --help and --version.
// For every other command (command_table.h) it execs the pipeline executable
// (libexec/framegate/framegate-pipeline, main.cc) with the same argv, before parsing
// anything: that one answers the command's --help, errors, output, exit code and signals.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_table.h"

int main(int argc, char** argv) {
  using namespace framegate;
  if (argc > 1) {
    for (const PassThroughCommand& c : PassThroughCommands()) {
      if (c.name != std::string(argv[1])) continue;
      const std::string pipeline = PipelineExecutablePath();
      execv(pipeline.c_str(), argv);
      return ReportError(
          Status::IoError("cannot run the pipeline executable " + pipeline + ": " + std::strerror(errno)));
    }
  }
  CLI::App app;
  SetUpTopLevelApp(app);
  // --help lists the pipeline's commands, then the results' (this executable's).
  for (const PassThroughCommand& c : PassThroughCommands()) {
    CLI::App* stub = app.add_subcommand(c.name, c.summary);  // never parsed: execed above
    if (*c.summary == '\0') stub->group("");
  }
  std::vector<Command> commands;
  for (auto add : {
         AddCompareCommand, AddDbCommand, AddHistoryCommand,
#if !FRAMEGATE_WITH_CUDA
             AddListCommand, AddRunCommand,
#endif
             AddMergeCommand, AddMetricsCommand, AddRegressionsCommand, AddReportCommand
       }) {
    commands.push_back(add(app));
  }
  const int parsed = ParseCommandLine(app, argc, argv);
  if (parsed >= 0) return parsed;
  for (const Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kExitHarnessError;
}
