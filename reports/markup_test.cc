#include "reports/markup.h"

#include <gtest/gtest.h>

#include <cmath>

namespace framegate {
namespace {

TEST(MarkupTest, HtmlEscapesEveryMarkupCharacter) {
  EXPECT_EQ(HtmlEscape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(MarkupTest, InvalidUtf8BecomesQuestionMarks) {
  EXPECT_EQ(ValidUtf8("a\xff"
                      "b"),
            "a?b");
  EXPECT_EQ(ValidUtf8("\xc3"), "?");            // truncated sequence
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), "??");       // overlong '/'
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "???");  // surrogate
  EXPECT_EQ(ValidUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(MarkupTest, XmlEscapeDropsForbiddenControlCharacters) {
  EXPECT_EQ(XmlEscape("a\x01\tb\nc\x1f"), "a?\tb\nc?");
}

TEST(MarkupTest, NumberText) {
  EXPECT_EQ(NumberText(41.5), "41.5");
  EXPECT_EQ(NumberText(INFINITY), "inf");
  EXPECT_EQ(NumberText(-INFINITY), "-inf");
  EXPECT_EQ(NumberText(NAN), "nan");
}

}  // namespace
}  // namespace framegate
