#include "harness/number_limits.h"

#include <gtest/gtest.h>

#include <cmath>

namespace framegate {
namespace {

TEST(NumberLimitsTest, IntegersInsideTheirLimits) {
  EXPECT_TRUE(CheckNumber(kStepsLimit, 1).ok());
  EXPECT_TRUE(CheckNumber(kStepsLimit, 10000).ok());
  EXPECT_FALSE(CheckNumber(kStepsLimit, 0).ok());
  EXPECT_EQ(CheckNumber(kStepsLimit, 10001).message(), "steps must be an integer from 1 to 10000");
  EXPECT_EQ(CheckNumber(kSeedLimit, -1).message(), "seed must be an integer >= 0");
  EXPECT_TRUE(CheckNumber(kWarmupLimit, 0).ok());
  EXPECT_FALSE(CheckNumber(kRepeatsLimit, 0).ok());
}

TEST(NumberLimitsTest, RealsRefuseNanAndInfinities) {
  EXPECT_TRUE(CheckNumber(kGuidanceLimit, 1.0).ok());
  EXPECT_TRUE(CheckNumber(kGuidanceLimit, 7.5).ok());
  EXPECT_EQ(CheckNumber(kGuidanceLimit, 1000).message(), "guidance must be a number from 1 to 100");
  EXPECT_FALSE(CheckNumber(kGuidanceLimit, std::nan("")).ok());
  EXPECT_FALSE(CheckNumber(kGuidanceLimit, INFINITY).ok());
  EXPECT_FALSE(CheckNumber(kTimeoutLimit, 0).ok());
  EXPECT_FALSE(CheckNumber(kTimeoutLimit, -INFINITY).ok());
  EXPECT_FALSE(CheckNumber(kTimeoutLimit, std::nan("")).ok());
  EXPECT_TRUE(CheckNumber(kTimeoutLimit, 0.5).ok());
  EXPECT_EQ(CheckNumber(kTimeoutLimit, 1e9).message(),
            "timeout must be a number of seconds > 0 and <= 604800");
}

TEST(NumberLimitsTest, ParsesCommandLineText) {
  EXPECT_EQ(*ParseNumber(kStepsLimit, "12"), 12);
  EXPECT_FALSE(ParseNumber(kStepsLimit, "12x").ok());
  EXPECT_FALSE(ParseNumber(kStepsLimit, "").ok());
  EXPECT_FALSE(ParseNumber(kSeedLimit, "18446744073709551615").ok());  // past int64
  EXPECT_EQ(*ParseNumber(kGuidanceLimit, "7.5"), 7.5);
  for (const char* text : {"nan", "inf", "-inf", "1000", "0.5", "7.5 "})
    EXPECT_FALSE(ParseNumber(kGuidanceLimit, text).ok()) << text;
}

}  // namespace
}  // namespace framegate
