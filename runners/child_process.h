// Running a framegate process to completion and reading what it wrote: how `calibrate`
// and `qualify` start their `check` processes.
#pragma once

#include <string>
#include <vector>

namespace framegate {

// Runs `argv` (argv[0] a path) with stdout and stderr into `dir`/stdout and `dir`/stderr;
// its exit code, or -1 when it could not be started or did not exit.
int RunProcess(const std::vector<std::string>& argv, const std::string& dir);

// The text of the file at `path` ("" when it cannot be read).
std::string ReadText(const std::string& path);

// The last line of the file at `path`, without its newline ("" when none).
std::string LastLine(const std::string& path);

}  // namespace framegate
