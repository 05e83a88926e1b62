// Running a framegate process to completion and reading what it wrote: how `calibrate`
// and `qualify` start their `check` processes.
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"

namespace framegate {

// Runs `argv` (argv[0] a path) with stdout and stderr into `dir`/stdout and `dir`/stderr;
// its exit code, or -1 when it could not be started or did not exit.
int RunProcess(const std::vector<std::string>& argv, const std::string& dir);

// The text of the file at `path` ("" when it cannot be read).
std::string ReadText(const std::string& path);

// The last line of the file at `path`, without its newline ("" when none).
std::string LastLine(const std::string& path);

// `executable check` of `cell` with `extra_args` after the cell's own, in its own process
// with `scratch` as its folder: the cell's result as that process wrote it. Exit 2 (bad
// input) is InvalidInput with the child's error line; any exit but 0, 1 or 2 is Internal.
StatusOr<CellResult> RunCheckProcess(const std::string& executable, const Cell& cell,
                                     const std::vector<std::string>& extra_args, const std::string& scratch);

}  // namespace framegate
