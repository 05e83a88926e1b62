#include "reports/report_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "harness/test_temp_dir.h"

namespace framegate {
namespace {

// A fresh folder per name; all of them are removed when the tests end.
std::string TempDir(const std::string& name) {
  static const TestTempDir temp("fg-report-files");
  const std::string dir = temp / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(ReportFilesTest, AWriteReplacesARegularFileWhole) {
  const std::string path = TempDir("regular") + "/run.json";
  std::ofstream(path) << "old and longer";
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "new");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// `--json /dev/null` run as root renamed a regular file over /dev/null. A FIFO stands in
// for such a file here: it must stay a FIFO and receive the content. Its read end is open
// (non-blocking) before the write, so the write neither blocks nor races.
TEST(ReportFilesTest, AFileThatIsNotRegularIsWrittenInPlaceNotReplaced) {
  const std::string fifo = TempDir("fifo") + "/out.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_TRUE(WriteFileAtomically(fifo, "{\"cells\": []}").ok());
  char buffer[64] = {};
  const ssize_t got = read(reader, buffer, sizeof buffer - 1);
  close(reader);
  EXPECT_EQ(std::string(buffer, got > 0 ? static_cast<size_t>(got) : 0), "{\"cells\": []}");
  EXPECT_EQ(std::filesystem::status(fifo).type(), std::filesystem::file_type::fifo);
  EXPECT_FALSE(std::filesystem::exists(fifo + ".tmp"));
}

TEST(ReportFilesTest, AFolderIsRefusedNamingIt) {
  const std::string dir = TempDir("folder");
  const Status written = WriteFileAtomically(dir, "x");
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.message(), dir + ": is a folder");
  EXPECT_TRUE(std::filesystem::is_directory(dir));
}

}  // namespace
}  // namespace framegate
