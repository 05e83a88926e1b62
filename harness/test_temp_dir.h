// Test support: a fresh folder under the system temp folder (TMPDIR, else /tmp), named
// uniquely by mkdtemp (CTest and CI runs go side by side), removed with everything in it
// when the object goes, so a test leaves nothing behind even when an assertion ends it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace framegate {

class TestTempDir {
 public:
  explicit TestTempDir(const std::string& prefix = "fg-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
    path_ = pattern;
  }
  ~TestTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TestTempDir(const TestTempDir&) = delete;
  TestTempDir& operator=(const TestTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace framegate
