// ScratchFolder: the matrix runner's folder for its cells' files
// (<temp dir>/framegate-run-<pid>-XXXXXX). The runner holds a lock on it (flock on the
// folder, closed on exec so cell processes do not inherit it) for as long as it lives;
// the kernel drops the lock when the runner dies, however it dies. A later runner
// removes the framegate-run-* folders whose lock nobody holds, so a killed run leaves
// nothing behind for long and a live run's folder is never touched, whatever process
// ids were reused. No call here throws.
#pragma once

#include <memory>
#include <string>

#include "harness/status.h"

namespace framegate {

class ScratchFolder {
 public:
  // Removes the stale scratch folders in `temp_dir` (RemoveStaleScratchFolders), then
  // makes and locks a new one. IoError "<folder>: cannot create the scratch folder:
  // <reason>" when it cannot.
  static StatusOr<std::unique_ptr<ScratchFolder>> Create(const std::string& temp_dir);

  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  ~ScratchFolder();  // removes the folder and what is in it, then drops the lock

  const std::string& path() const { return path_; }

 private:
  ScratchFolder(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  std::string path_;
  int lock_fd_;
};

// The folder for temporary files: $TMPDIR when set and not empty, else /tmp (as
// std::filesystem::temp_directory_path, without its check that the folder exists: a
// missing one is reported when the scratch folder cannot be made in it).
std::string TempDirectory();

// Removes every framegate-run-* folder of this user in `temp_dir` whose lock no process
// holds; keeps the others and anything that is not a folder (a link is never followed).
// Returns how many it removed.
int RemoveStaleScratchFolders(const std::string& temp_dir);

}  // namespace framegate
