// framegate: runs a video diffusion pipeline across devices x dtype policies and checks
// every output against FP32 golden frames. `framegate --help` lists the subcommands.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "cli/commands.h"

namespace framegate {

int ReportError(const Status& status) {
  std::cerr << "framegate: error: " << status.message() << "\n";
  return kExitHarnessError;
}

void AddThreadsOption(CLI::App* app, int* threads) {
  app->add_option("--threads", *threads,
                  "LibTorch CPU threads (default 0: every core this process may use)")
      ->check(CLI::NonNegativeNumber);
}

void AddGoldenDirOption(CLI::App* app, std::string* dir) {
  const char* env = std::getenv("FRAMEGATE_GOLDEN_DIR");
  *dir = env != nullptr && *env != '\0' ? env : FRAMEGATE_DEFAULT_GOLDEN_DIR;
  app->add_option("--golden-dir", *dir, "Golden store folder (default: $FRAMEGATE_GOLDEN_DIR, "
                  "else the repository's golden/)")
      ->capture_default_str();
}

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
  CLI::App app{"framegate: proves a video diffusion pipeline still produces the right frames "
               "when the device or the precision changes."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(FRAMEGATE_VERSION_STRING));
  std::vector<Command> commands = {AddAdviseCommand(app), AddAuditCommand(app),  AddCheckCommand(app),
                                   AddGenerateCommand(app), AddGoldenCommand(app),
                                   AddInfoCommand(app),   AddMetricsCommand(app)};
  for (auto add : {AddCompareCommand, AddDbCommand, AddDevicesCommand, AddHistoryCommand,
                   AddListCommand, AddMergeCommand, AddRegressionsCommand, AddReportCommand,
                   AddRunCommand, AddRunCellCommand}) {
    commands.push_back(add(app));
  }
  // CLI11 reports an unknown command as "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(),
                   [&](const Command& c) { return c.app->get_name() == argv[1]; })) {
    std::cerr << "framegate: error: unknown command '" << argv[1]
              << "' (see 'framegate --help')\n";
    return kExitHarnessError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error: the hint goes on the same line.
    std::cerr << "framegate: error: " << e.what()
              << " (see 'framegate --help' or 'framegate COMMAND --help')\n";
    return kExitHarnessError;
  }
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
