// What every command and both executables share (cli/command.h); no LibTorch.
#include <cstdlib>
#include <iostream>

#include "cli/command.h"

namespace framegate {

int ReportError(const Status& status) {
  std::cerr << "framegate: error: " << status.message() << "\n";
  return kExitHarnessError;
}

void AddThreadsOption(CLI::App* app, int* threads) {
  app->add_option("--threads", *threads, "LibTorch CPU threads (default 0: every core this process may use)")
      ->check(CLI::NonNegativeNumber);
}

void AddGoldenDirOption(CLI::App* app, std::string* dir) {
  const char* env = std::getenv("FRAMEGATE_GOLDEN_DIR");
  *dir = env != nullptr && *env != '\0' ? env : FRAMEGATE_DEFAULT_GOLDEN_DIR;
  app->add_option("--golden-dir", *dir,
                  "Golden store folder (default: $FRAMEGATE_GOLDEN_DIR, "
                  "else the repository's golden/)")
      ->capture_default_str();
}

void SetUpTopLevelApp(CLI::App& app) {
  app.description(
      "framegate: proves a video diffusion pipeline still produces the right "
      "frames when the device or the precision changes.");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(FRAMEGATE_VERSION_STRING));
}

CLI::App* FindCommand(CLI::App& app, const std::string& name) {
  const std::vector<CLI::App*> found =
      app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  // CLI11 reports an unknown command as "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-' && FindCommand(app, argv[1]) == nullptr) {
    std::cerr << "framegate: error: unknown command '" << argv[1] << "' (see 'framegate --help')\n";
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
  return -1;
}

}  // namespace framegate
