// Opening an input file that framegate reads whole (.npy, PNG): only a regular file, and
// without blocking. A FIFO with no writer would block the open forever, and a FIFO or a
// device (/dev/zero) never ends: both are refused with a Status naming the path.
#pragma once

#include <cstdint>
#include <string>

#include "harness/status.h"

namespace framegate {

// An open read-only descriptor (blocking reads, close-on-exec) and the file's size.
// The caller owns fd and closes it.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
};

// NotFound "<path>: cannot open" when it cannot be opened; InvalidInput "<path>: not a
// regular file (...)" for a FIFO, a device, a socket or a folder. Never blocks.
StatusOr<RegularFile> OpenRegularFile(const std::string& path);

}  // namespace framegate
