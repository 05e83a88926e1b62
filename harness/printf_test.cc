#include "harness/printf.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(PrintfTest, APercentKeepsTwoSignificantDigitsBelowATenth) {
  EXPECT_EQ(PercentText(0.25), "25.0%");
  EXPECT_EQ(PercentText(0.00016), "0.016%");
  EXPECT_EQ(PercentText(0.001), "0.1%");
  EXPECT_EQ(PercentText(0), "0.0%");
}

TEST(PrintfTest, FormatsEveryArgumentAtAnyLength) {
  EXPECT_EQ(Printf("%.3f s, %.2fx the fastest %s device", 5.0, 5.0, "gpu-x"),
            "5.000 s, 5.00x the fastest gpu-x device");
  EXPECT_EQ(Printf("%d%%", 7), "7%");
  EXPECT_EQ(Printf("%s", std::string(1000, 'x').c_str()).size(), 1000u);
  EXPECT_EQ(Printf("%s", ""), "");
}

}  // namespace
}  // namespace framegate
