// The `framegate` subcommands. Each Add*Command registers its options on the parent app
// and returns the function that runs it once parsed. Exit codes are the same for all:
// 0 success, 1 a check failed (a test failure), 2 a harness or usage error.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/status.h"

namespace framegate {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitHarnessError = 2;

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddGenerateCommand(CLI::App& parent);
Command AddInfoCommand(CLI::App& parent);

// Shared by the commands: prints "framegate: error: <message>" to stderr, returns 2.
int ReportError(const Status& status);
// Adds --threads N (default 0 = every core this process may use).
void AddThreadsOption(CLI::App* app, int* threads);

}  // namespace framegate
