// The one convention for a command's file outputs (--json FILE, --junit FILE,
// --bench-json FILE): a path, or "-" for standard output. When an output goes to standard
// output, the command's human-readable text goes to standard error, so that what arrives
// on standard output parses.
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/status.h"

namespace framegate {

// Adds `flag` (e.g. "--json") taking FILE into `*path`; the help says "- for stdout".
CLI::Option* AddOutputFileOption(CLI::App* app, const std::string& flag, std::string* path,
                                 const std::string& what);

// Writes `content` to `path` ("-": standard output, flushed); a file is replaced whole
// (written beside it, then renamed). IoError naming the path when it cannot be written.
Status WriteOutputFile(const std::string& path, const std::string& content);

// Where the text goes: standard error when any of `outputs` is "-", else standard output.
std::ostream& TextStream(std::initializer_list<std::string> outputs);

}  // namespace framegate
