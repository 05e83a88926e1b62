// framegate-pipeline: the executable that links LibTorch and serves every `framegate`
// command. Users call build/bin/framegate (front_main.cc), which serves the commands that
// need no LibTorch itself and execs this one, with the same argv, for the others; `run`
// starts its cell processes from this executable (/proc/self/exe).
#include <vector>

#include "cli/command_table.h"
#include "cli/commands.h"

namespace framegate {
namespace {

// The --device given to the command that was parsed (`golden make`: to its subcommand),
// or "" when none was given.
std::string GivenDevice(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    const CLI::Option* device = sub->get_option_no_throw("--device");
    if (device != nullptr && device->count() > 0) return device->as<std::string>();
    const std::string nested = GivenDevice(*sub);
    if (!nested.empty()) return nested;
  }
  return "";
}

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  using namespace framegate;
  CLI::App app;
  SetUpTopLevelApp(app);
  std::vector<Command> commands;
  for (auto add : {AddAdviseCommand, AddAuditCommand, AddCalibrateCommand, AddCheckCommand, AddCompareCommand,
                   AddDbCommand, AddDevicesCommand, AddGenerateCommand, AddGoldenCommand, AddHistoryCommand,
                   AddInfoCommand, AddListCommand, AddMergeCommand, AddMetricsCommand, AddQualifyCommand,
                   AddRegressionsCommand, AddReportCommand, AddRunCommand, AddRunCellCommand}) {
    commands.push_back(add(app));
  }
  // The one-line descriptions of the commands the front passes here are command_table's.
  for (const PassThroughCommand& c : PassThroughCommands()) {
    if (CLI::App* sub = FindCommand(app, c.name)) sub->description(c.summary);
  }
  const int parsed = ParseCommandLine(app, argc, argv);
  if (parsed >= 0) return parsed;
  // `run` starts a process per cell and sets the kernel path there; the others run the
  // pipeline here, so this process must start with the path's ATEN_CPU_CAPABILITY.
  if (!app.got_subcommand("run") && !app.got_subcommand("run-cell")) {
    const Status exec = ExecForCpuKernelPath(GivenDevice(app), argv);
    if (!exec.ok()) return ReportError(exec);
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kExitHarnessError;
}
