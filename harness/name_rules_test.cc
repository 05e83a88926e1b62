#include "harness/name_rules.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(NameRulesTest, AcceptsPlainNames) {
  for (const char* name : {"fp32", "fp16-emulated", "fp8e4m3-bf16", "a", "x.y_z+1", "...", ".hidden"})
    EXPECT_TRUE(CheckName("policy name", name).ok()) << name;
  EXPECT_TRUE(CheckName("tag", std::string(64, 'a')).ok());
}

TEST(NameRulesTest, RefusesNamesThatCouldHurt) {
  for (const char* name : {"", ".", "..", "/../../../tmp/victim", "a/b", "half emu $(touch PWNED)", "a b",
                           "a\nb", "x;y", "caf\xc3\xa9", "q'uote", "back\\slash"}) {
    const Status s = CheckName("policy name", name);
    EXPECT_EQ(s.code(), Status::Code::kInvalidInput) << name;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
  EXPECT_EQ(CheckName("policy name", "half emu $(touch PWNED)").message(),
            "policy name 'half emu $(touch PWNED)' must be 1 to 64 characters of A-Z a-z 0-9 . _ + - "
            "(not . or ..)");
  EXPECT_EQ(CheckName("tag", "a\nb").message().substr(0, 12), "tag 'a\\x0ab'");
}

TEST(NameRulesTest, TooLongNamesAreCutInTheMessage) {
  EXPECT_FALSE(CheckName("tag", std::string(65, 'a')).ok());
  const Status s = CheckName("policy name", std::string(250, 'x'));
  EXPECT_NE(s.message().find(std::string(64, 'x') + "... (250 characters)"), std::string::npos);
  EXPECT_EQ(s.message().find(std::string(65, 'x')), std::string::npos);
}

TEST(NameRulesTest, ListsCheckEachName) {
  EXPECT_TRUE(CheckNameList("tag", "local").ok());
  EXPECT_TRUE(CheckNameList("tag", "nightly,gpu-a100").ok());
  EXPECT_FALSE(CheckNameList("tag", "nightly,,x").ok());
  EXPECT_FALSE(CheckNameList("tag", "a,").ok());
  EXPECT_FALSE(CheckNameList("tag", "").ok());
  EXPECT_EQ(CheckNameList("tag", "ok,../x").message().substr(0, 10), "tag '../x'");
}

}  // namespace
}  // namespace framegate
