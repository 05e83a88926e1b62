// ScratchFolder on the real file system: a folder is made and locked, removed when its
// owner goes; a framegate-run-* folder whose lock nobody holds is stale and removed at
// the next Create, a locked one is kept. A lock held through another open file
// description conflicts even within this process, so one process can play both runners.
// The SIGKILLed runner of the real thing: tests/python/test_fault_hunt_runner.py.
#include "runners/scratch_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace framegate {
namespace {

namespace fs = std::filesystem;

class ScratchFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    temp_ = ::testing::TempDir() + "/fg_scratch_" + std::to_string(::getpid());
    fs::remove_all(temp_);
    fs::create_directories(temp_);
  }
  void TearDown() override { fs::remove_all(temp_); }
  std::string temp_;
};

TEST_F(ScratchFolderTest, IsMadeInTheTempDirAndRemovedWithItsOwner) {
  std::string path;
  {
    StatusOr<std::unique_ptr<ScratchFolder>> folder = ScratchFolder::Create(temp_);
    ASSERT_TRUE(folder.ok()) << folder.status().message();
    path = (*folder)->path();
    EXPECT_EQ(fs::path(path).parent_path(), fs::path(temp_));
    EXPECT_EQ(fs::path(path).filename().string().rfind("framegate-run-" + std::to_string(getpid()) + "-", 0),
              0u);
    std::ofstream(path + "/cell.json") << "{}";
    EXPECT_EQ(RemoveStaleScratchFolders(temp_), 0) << "a live runner's folder is not stale";
    EXPECT_TRUE(fs::exists(path + "/cell.json"));
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ScratchFolderTest, StaleFoldersGoLockedOnesAndOthersStay) {
  fs::create_directories(temp_ + "/framegate-run-99999/abc-1");  // a dead runner's
  std::ofstream(temp_ + "/framegate-run-99999/abc-1/result.json") << "{}";
  fs::create_directories(temp_ + "/framegate-run-1-XXXXXX");  // another dead runner's
  fs::create_directories(temp_ + "/other");
  fs::create_directories(temp_ + "/framegate-run-held");  // a live runner's
  const int held = open((temp_ + "/framegate-run-held").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  fs::create_directories(temp_ + "/target");
  fs::create_directory_symlink(temp_ + "/target", temp_ + "/framegate-run-link");
  std::ofstream(temp_ + "/framegate-run-file") << "not a folder";

  StatusOr<std::unique_ptr<ScratchFolder>> folder = ScratchFolder::Create(temp_);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  EXPECT_FALSE(fs::exists(temp_ + "/framegate-run-99999"));
  EXPECT_FALSE(fs::exists(temp_ + "/framegate-run-1-XXXXXX"));
  EXPECT_TRUE(fs::exists(temp_ + "/framegate-run-held"));
  EXPECT_TRUE(fs::exists(temp_ + "/other"));
  EXPECT_TRUE(fs::is_symlink(temp_ + "/framegate-run-link"));
  EXPECT_TRUE(fs::exists(temp_ + "/target"));
  EXPECT_TRUE(fs::exists(temp_ + "/framegate-run-file"));
  close(held);
  EXPECT_EQ(RemoveStaleScratchFolders(temp_), 1) << "released: the held folder is stale now";
  EXPECT_TRUE(fs::exists((*folder)->path()));
}

TEST_F(ScratchFolderTest, AMissingTempDirIsAnErrorNamingTheFolderAndTheReason) {
  StatusOr<std::unique_ptr<ScratchFolder>> folder = ScratchFolder::Create(temp_ + "/missing");
  ASSERT_FALSE(folder.ok());
  const std::string message = folder.status().message();
  EXPECT_EQ(message.rfind(temp_ + "/missing/framegate-run-", 0), 0u) << message;
  EXPECT_NE(message.find(": cannot create the scratch folder: No such file or directory"), std::string::npos)
      << message;
}

TEST(TempDirectoryTest, IsTmpdirElseTmp) {
  const char* saved = std::getenv("TMPDIR");
  const std::string before = saved ? saved : "";
  setenv("TMPDIR", "/some/where", 1);
  EXPECT_EQ(TempDirectory(), "/some/where");
  setenv("TMPDIR", "", 1);
  EXPECT_EQ(TempDirectory(), "/tmp");
  unsetenv("TMPDIR");
  EXPECT_EQ(TempDirectory(), "/tmp");
  if (saved) setenv("TMPDIR", before.c_str(), 1);
}

}  // namespace
}  // namespace framegate
