#include "store/series_analysis.h"

#include <cmath>

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(SeriesAnalysisTest, NoiseSigmaIgnoresASingleStep) {
  // Alternating +-0.01 noise with one jump of 5: the median first difference is 0.02.
  std::vector<double> x = {1.0, 1.02, 1.0, 1.02, 6.0, 6.02, 6.0, 6.02, 6.0};
  EXPECT_NEAR(NoiseSigma(x), 0.02 / (0.6745 * std::sqrt(2.0)), 1e-9);
  EXPECT_EQ(NoiseSigma({1.0, 2.0}), 0.0);
}

TEST(SeriesAnalysisTest, TrailingStreakMeasuresTheSustainedChange) {
  ViolationRule rule;
  rule.relative = 0.05;
  const std::vector<double> jump = {1, 1, 1, 1, 1, 1, 1.2, 1.2, 1.2};
  Streak s = TrailingStreak(jump, rule);
  EXPECT_EQ(s.length, 3);
  EXPECT_DOUBLE_EQ(s.reference, 1.0);
  EXPECT_EQ(TrailingStreak({1, 1, 1, 1.02, 1.03}, rule).length, 0);  // below 5%
  EXPECT_EQ(TrailingStreak({1, 1, 1, 1.2, 1.0}, rule).length, 0);    // it came back
  EXPECT_EQ(TrailingViolations(jump, 0, 1.0, rule), 3);
  EXPECT_EQ(TrailingViolations(jump, 8, 1.0, rule), 1);
}

TEST(SeriesAnalysisTest, ViolationThresholdTakesTheLargestOfItsParts) {
  ViolationRule rule{0.05, 0.5, 0.3};
  EXPECT_DOUBLE_EQ(rule.Threshold(100), 5.0);  // relative
  EXPECT_DOUBLE_EQ(rule.Threshold(1), 0.9);    // 3 sigma
  rule.sigma = 0;
  EXPECT_DOUBLE_EQ(rule.Threshold(1), 0.5);  // absolute
  EXPECT_TRUE(rule.Violates(1.6, 1));
  EXPECT_FALSE(rule.Violates(0.0, 1));  // better is never a violation
}

TEST(SeriesAnalysisTest, StepChangesFindsEachLevelShift) {
  const std::vector<double> x = {1, 1.001, 0.999, 1, 1.03, 1.031, 1.029, 1.06, 1.061, 1.059};
  EXPECT_EQ(StepChanges(x, 0.002), (std::vector<int>{4, 7}));
  EXPECT_TRUE(StepChanges(x, 0.05).empty());  // steps within the noise
  // Each side of a step has min_segment points or more: with 3, a 2-run change can only
  // be placed one run early; with 7 points needed it is no step at all.
  EXPECT_EQ(StepChanges({1, 1, 1, 1, 2, 2}, 0.01, 5, 2), (std::vector<int>{4}));
  EXPECT_EQ(StepChanges({1, 1, 1, 1, 2, 2}, 0.01, 5, 3), (std::vector<int>{3}));
  EXPECT_TRUE(StepChanges({1, 1, 1, 1, 2, 2}, 0.01, 5, 4).empty());
}

TEST(SeriesAnalysisTest, NewestShiftNeedsTheConfirmationNightsAndIgnoresOneNightOutliers) {
  ShiftRule rule;  // 4 nights before, 2 after, every after night 1 sigma out
  const std::vector<double> quiet = {1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.01};
  std::vector<double> step = quiet;
  step.insert(step.end(), {1.2, 1.21});
  const Shift s = NewestShift(step, 0.02, rule);
  ASSERT_TRUE(s.found());
  EXPECT_EQ(s.start, 8);
  EXPECT_NEAR(s.after - s.before, 0.205, 1e-9);
  EXPECT_LT(s.p, 1e-6);
  std::vector<double> one_night = quiet;
  one_night.push_back(1.5);  // not confirmed yet
  EXPECT_FALSE(NewestShift(one_night, 0.02, rule).found());
  std::vector<double> outlier = quiet;
  outlier.insert(outlier.end(), {1.5, 1.0});  // came back: never a shift
  EXPECT_FALSE(NewestShift(outlier, 0.02, rule).found());
  rule.floor = 0.3;  // smaller than the floor: not a shift however quiet the series
  EXPECT_FALSE(NewestShift(step, 0.02, rule).found());
  // A noiseless series that moved past the floor: p = 0.
  rule.floor = 0.01;
  const Shift exact = NewestShift({2, 2, 2, 2, 2, 3, 3}, 0, rule);
  ASSERT_TRUE(exact.found());
  EXPECT_EQ(exact.p, 0);
}

TEST(SeriesAnalysisTest, BenjaminiHochbergAdjustsForEveryTest) {
  // p-values of 3 candidates among 100 tests: q = p m / rank, made monotone.
  const std::vector<double> q = BenjaminiHochberg({0.001, 0.0001, 0.04}, 100);
  EXPECT_NEAR(q[1], 0.01, 1e-12);  // rank 1
  EXPECT_NEAR(q[0], 0.05, 1e-12);  // rank 2: 0.001 x 100 / 2
  EXPECT_NEAR(q[2], 1.0, 1e-12);   // rank 3: capped at 1
  EXPECT_TRUE(BenjaminiHochberg({}, 10).empty());
}

}  // namespace
}  // namespace framegate
