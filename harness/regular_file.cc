#include "harness/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace framegate {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a folder";
  return "not a file";
}

}  // namespace

StatusOr<RegularFile> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO that no one writes returns at once instead of waiting.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::NotFound(path + ": cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = ::fstat(fd, &st) != 0 ? "cannot stat" : KindOf(st.st_mode);
    ::close(fd);
    return Status::InvalidInput(path + ": not a regular file (" + kind + ")");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ::close(fd);
    return Status::IoError(path + ": cannot clear O_NONBLOCK");
  }
  return RegularFile{fd, static_cast<uint64_t>(st.st_size)};
}

}  // namespace framegate
