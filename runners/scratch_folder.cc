#include "runners/scratch_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace framegate {
namespace {

constexpr char kPrefix[] = "framegate-run-";

// The folder `path` opened for its lock (never through a link); -1 when it cannot be.
int OpenFolder(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Whether `path` still names the folder open as `fd` (a folder can be removed and made
// again under the same name between the open and the lock).
bool StillNames(const std::string& path, int fd) {
  struct stat by_path, by_fd;
  return lstat(path.c_str(), &by_path) == 0 && fstat(fd, &by_fd) == 0 && by_path.st_dev == by_fd.st_dev &&
         by_path.st_ino == by_fd.st_ino;
}

// Removes `path` if it is a folder of this user whose lock nobody holds.
bool RemoveIfStale(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return false;
  const int fd = OpenFolder(path);
  if (fd < 0) return false;
  bool removed = false;
  // Held: its runner lives. Taken: its runner died; holding it while removing keeps a
  // runner that is making a folder of the same name from locking this one meanwhile.
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 && StillNames(path, fd)) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    removed = !ec;
  }
  close(fd);
  return removed;
}

}  // namespace

std::string TempDirectory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

int RemoveStaleScratchFolders(const std::string& temp_dir) {
  DIR* dir = opendir(temp_dir.c_str());
  if (dir == nullptr) return 0;
  std::vector<std::string> candidates;
  while (const dirent* entry = readdir(dir)) {
    if (std::strncmp(entry->d_name, kPrefix, sizeof kPrefix - 1) == 0) candidates.push_back(entry->d_name);
  }
  closedir(dir);
  int removed = 0;
  for (const std::string& name : candidates) removed += RemoveIfStale(temp_dir + "/" + name) ? 1 : 0;
  return removed;
}

StatusOr<std::unique_ptr<ScratchFolder>> ScratchFolder::Create(const std::string& temp_dir) {
  RemoveStaleScratchFolders(temp_dir);
  const std::string pattern = temp_dir + "/" + kPrefix + std::to_string(getpid()) + "-XXXXXX";
  const auto cannot = [&](const std::string& path) {
    return Status::IoError(path + ": cannot create the scratch folder: " + std::strerror(errno));
  };
  // Another runner's cleanup may take the new folder between mkdtemp and the lock (it
  // sees it unlocked): then it is gone, and the next try makes another.
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::vector<char> path(pattern.begin(), pattern.end());
    path.push_back('\0');
    if (mkdtemp(path.data()) == nullptr) return cannot(pattern);
    const std::string made(path.data());
    const int fd = OpenFolder(made);
    if (fd < 0) return cannot(made);
    if (flock(fd, LOCK_EX) == 0 && StillNames(made, fd)) {
      return std::unique_ptr<ScratchFolder>(new ScratchFolder(made, fd));
    }
    close(fd);
  }
  errno = EAGAIN;
  return cannot(pattern);
}

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  close(lock_fd_);
}

}  // namespace framegate
