#include "harness/toml_source.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

std::string Repeat(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

// "[a.a.a...]" with `segments` segments.
std::string DottedHeader(int segments) { return "[a" + Repeat(".a", segments - 1) + "]\nx = 1\n"; }

void ExpectTooDeep(const std::string& text, const std::string& place) {
  const StatusOr<toml::table> parsed = ParseTomlText(text, "bomb.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidInput);
  EXPECT_EQ(parsed.status().message().rfind("bomb.toml:" + place + ": nested deeper than 64 levels", 0), 0u)
      << parsed.status().message();
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
}

TEST(TomlSourceTest, ParsesOrdinaryTextAndNamesTheErrorsPlace) {
  const std::string text =
      "# a matrix\n[policy.\"a.b\"]\nfp32_modules = [\"x.y\", 'z.w']\nq = { r.s = [1.5, [2, 3]], t = \"\"\"\n"
      "[[x.y.z]]\"\"\" }\n[[run]]\nseeds = [\n  0, # c.d.e\n  1,\n]\n";
  StatusOr<toml::table> parsed = ParseTomlText(text, "m.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)["policy"]["a.b"]["q"]["r"]["s"][1][0].value<int64_t>(), 2);
  const StatusOr<toml::table> bad = ParseTomlText("a = \n", "m.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("m.toml:1:", 0), 0u) << bad.status().message();
}

TEST(TomlSourceTest, BoundsTheNestingOfEachKind) {
  // 300,000 segments overflowed toml++'s stack (SIGSEGV).
  ExpectTooDeep(DottedHeader(300000), "1:129");
  ExpectTooDeep("[" + Repeat("[", 1) + "a" + Repeat(".a", 100) + "]]\n", "1:128");
  ExpectTooDeep("\n\nx" + Repeat(".x", 100) + " = 1\n", "3:128");
  ExpectTooDeep("x = " + Repeat("[", 100000) + Repeat("]", 100000) + "\n", "1:68");
  ExpectTooDeep("x = " + Repeat("{a = ", 100000) + "1" + Repeat("}", 100000) + "\n", "1:321");
  // The levels add up: a header's tables, then a dotted key, then arrays.
  ExpectTooDeep(DottedHeader(40) + "b" + Repeat(".b", 19) + " = [[[[[1]]]]]\n", "3:47");
}

TEST(TomlSourceTest, AcceptsNestingUpToTheLimit) {
  EXPECT_TRUE(ParseTomlText(DottedHeader(kMaxTomlDepth - 1), "ok.toml").ok());
  EXPECT_TRUE(
      ParseTomlText("x = " + Repeat("[", kMaxTomlDepth - 1) + Repeat("]", kMaxTomlDepth - 1), "ok.toml")
          .ok());
  // Dots in strings, numbers and comments are not levels.
  const std::string dots = Repeat(".", 1000);
  EXPECT_TRUE(ParseTomlText("\"" + dots + "\" = '" + dots + "' # " + dots + "\nf = 1.5\n", "ok.toml").ok());
  // Siblings in an inline table do not add up.
  std::string siblings = "x = {";
  for (int i = 0; i < 100; ++i) siblings += (i ? ", k" : "k") + std::to_string(i) + ".v = 1";
  EXPECT_TRUE(ParseTomlText(siblings + "}\n", "ok.toml").ok());
}

TEST(TomlSourceTest, BoundsTheSize) {
  const StatusOr<toml::table> parsed = ParseTomlText(std::string(kMaxTomlBytes + 1, '#'), "big.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().rfind("big.toml:1:1: ", 0), 0u) << parsed.status().message();
}

}  // namespace
}  // namespace framegate
