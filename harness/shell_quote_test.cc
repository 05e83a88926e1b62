#include "harness/shell_quote.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace framegate {
namespace {

TEST(ShellQuoteTest, PlainWordsStayAndTheRestIsSingleQuoted) {
  EXPECT_EQ(ShellQuote("fp16-emulated"), "fp16-emulated");
  EXPECT_EQ(ShellQuote("--golden-dir=/a/b"), "--golden-dir=/a/b");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("half emu"), "'half emu'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellCommand({"framegate", "check", "--policy", "a b"}), "framegate check --policy 'a b'");
}

// The quoted line, run by a real /bin/sh, passes each word through literally and runs
// nothing inside it.
TEST(ShellQuoteTest, ShellGetsTheWordsBackAndRunsNothing) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "framegate-shell-quote-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string evil = "half emu $(touch " + (dir / "PWNED").string() + ") `id` 'x' \"y\" ;|&\n\\";
  const std::string line = "printf '%s\\n' " + ShellCommand({evil, "b"});
  FILE* sh = popen(line.c_str(), "r");
  ASSERT_NE(sh, nullptr);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, sh)) out.append(buf, n);
  EXPECT_EQ(pclose(sh), 0);
  EXPECT_EQ(out, evil + "\nb\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "PWNED"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace framegate
