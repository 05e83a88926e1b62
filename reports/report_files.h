// Writing report files: whole files replaced atomically, so a reader (a browser, a CI
// artifact upload) never sees half a report file.
#pragma once

#include <string>

#include "harness/status.h"

namespace framegate {

// Writes `content` to `path` through "<path>.tmp" + rename; into an existing path that is
// not a regular file (/dev/null, /dev/stdout, a FIFO) directly, leaving it what it is.
// IoError naming the path.
Status WriteFileAtomically(const std::string& path, const std::string& content);
// Creates `dir` and its parents when missing. IoError naming the folder.
Status CreateDirectories(const std::string& dir);

}  // namespace framegate
