#include "checks/tolerance.h"

#include <cmath>
#include <limits>
#include <map>

#include <gtest/gtest.h>

#include "harness/cell_status.h"

namespace framegate {
namespace {

ComparisonMetrics Metrics(double min_psnr, double max_abs) {
  ComparisonMetrics m;
  m.video.min_psnr = min_psnr;
  m.video.mean_ssim = m.video.min_ssim = 0.999;
  m.video.max_abs = max_abs;
  m.latent_cosine = 1.0;
  return m;
}

TEST(ToleranceTest, FirstViolationNamesMetricValueAndBound) {
  StatusOr<std::vector<ToleranceProfile>> p =
      ParseToleranceProfiles("[profile.x]\nmin_psnr = 30.0\nmax_abs = 0.1\nmax_fp64_ratio = 2.0\n", "t.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const ToleranceProfile& x = p->at(0);
  EXPECT_FALSE(FirstViolation(x, Metrics(35, 0.05)));  // fp64 bound skipped: no ratio
  auto v = FirstViolation(x, Metrics(23.4, 0.5));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->Reason(), "min_psnr 23.4 < 30");
  v = FirstViolation(x, Metrics(35, 0.5));
  EXPECT_EQ(v->Reason(), "max_abs 0.5 > 0.1");
  v = FirstViolation(x, Metrics(NAN, 0.05));
  EXPECT_EQ(v->Reason(), "min_psnr nan (not a number)");
  EXPECT_FALSE(FirstViolation(x, Metrics(INFINITY, 0)));  // identical frames pass
  ComparisonMetrics with_ratio = Metrics(35, 0.05);
  with_ratio.fp64_error_ratio = 3.0;
  EXPECT_EQ(FirstViolation(x, with_ratio)->Reason(), "fp64_error_ratio 3 > 2");
}

// Frames smaller than SSIM's 11x11 window have no SSIM (NaN): its bounds judge nothing
// there, as a healthy 8x8 model's identical frames once FAILed "min_ssim nan". Measured
// SSIMs that are NaN (NaN frames) still break them.
TEST(ToleranceTest, SsimBoundsSkipFramesSmallerThanTheWindow) {
  StatusOr<std::vector<ToleranceProfile>> p = ParseToleranceProfiles(
      "[profile.x]\nmin_psnr = 30.0\nmin_ssim = 0.9\nmin_mean_ssim = 0.95\n", "t.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ComparisonMetrics small = Metrics(INFINITY, 0);
  small.video.min_ssim = small.video.mean_ssim = NAN;
  EXPECT_EQ(FirstViolation(p->at(0), small)->Reason(), "mean_ssim nan (not a number)");
  small.video.ssim_measured = false;
  EXPECT_FALSE(FirstViolation(p->at(0), small));
  small.video.min_psnr = 20;
  EXPECT_EQ(FirstViolation(p->at(0), small)->Reason(), "min_psnr 20 < 30");
}

// Twice the error: 6.02 dB less PSNR, twice each error maximum, four times each
// similarity's distance from 1 (the square of an error; no floor below 0).
TEST(ToleranceTest, AllowingErrorTimesScalesEveryBoundByTheError) {
  StatusOr<std::vector<ToleranceProfile>> p = ParseToleranceProfiles(
      "[profile.x]\nmin_psnr = 30.0\nmin_ssim = 0.9\nmax_abs = 0.1\nmin_latent_cosine = 0.99\n"
      "max_fp64_ratio = 2.0\nmin_mean_ssim = 0.3\n",
      "t.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const ToleranceProfile wider = AllowingErrorTimes(p->at(0), 2);
  EXPECT_EQ(wider.name, "x x2");
  std::map<std::string, double> bound;
  for (const ToleranceBound& b : wider.bounds) bound[b.metric] = b.bound;
  EXPECT_NEAR(bound["min_psnr"], 30 - 6.0206, 1e-4);
  EXPECT_NEAR(bound["min_ssim"], 0.6, 1e-12);
  EXPECT_NEAR(bound["max_abs"], 0.2, 1e-12);
  EXPECT_NEAR(bound["latent_cosine"], 0.96, 1e-12);
  EXPECT_NEAR(bound["fp64_error_ratio"], 4.0, 1e-12);
  EXPECT_EQ(bound["mean_ssim"], 0.0);
  EXPECT_TRUE(FirstViolation(p->at(0), Metrics(25, 0.15)));
  EXPECT_FALSE(FirstViolation(wider, Metrics(25, 0.15)));
  EXPECT_EQ(FirstViolation(wider, Metrics(23.9, 0.15))->Reason(), "min_psnr 23.9 < 23.9794");
}

// ErrorOf, ValueOfError and ErrorTimes are what AllowingErrorTimes (and a calibrated
// bound) are made of: a value's error, scaled, and back.
TEST(ToleranceTest, ErrorOfAValueIsWhatAllowingErrorTimesScales) {
  StatusOr<std::vector<ToleranceProfile>> p =
      ParseToleranceProfiles("[profile.x]\nmin_psnr = 30.0\nmin_ssim = 0.9\nmax_abs = 0.1\n", "t.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const ToleranceProfile wider = AllowingErrorTimes(p->at(0), 2);
  for (size_t i = 0; i < wider.bounds.size(); ++i) {
    const ToleranceBound& b = p->at(0).bounds[i];
    const double times = b.metric == "min_ssim" ? 4 : 2;  // a similarity's distance: the error squared
    EXPECT_NEAR(ErrorTimes(b, 1.0, 2), times, 1e-12) << b.metric;
    EXPECT_NEAR(ErrorOf(b, wider.bounds[i].bound), times * ErrorOf(b, b.bound), 1e-12) << b.metric;
    EXPECT_NEAR(ValueOfError(b, ErrorOf(b, b.bound)), b.bound, 1e-12) << b.metric;
  }
  EXPECT_EQ(ValueOfError(p->at(0).bounds[0], 0), std::numeric_limits<double>::infinity());  // exact: +inf dB
  EXPECT_EQ(ValueOfError(p->at(0).bounds[1], 1.5), 0.0);  // a similarity's bound is never below 0
  const ComparisonMetrics m = Metrics(25, 0.15);
  EXPECT_DOUBLE_EQ(MetricValue(m, "min_psnr"), 25);
  EXPECT_DOUBLE_EQ(MetricValue(m, "max_abs"), 0.15);
  EXPECT_TRUE(std::isnan(MetricValue(m, "no_such_metric")));
  // Larger is worse on every metric: 20 dB is ten times the error of 40 dB.
  ASSERT_EQ(p->at(0).bounds[0].metric, "min_psnr");
  EXPECT_NEAR(ErrorOf(p->at(0).bounds[0], 20) / ErrorOf(p->at(0).bounds[0], 40), 10, 1e-9);
}

TEST(ToleranceTest, ParseErrorsNameFileLineAndKey) {
  auto r = ParseToleranceProfiles("[profile.x]\nmin_psnr = 30.0\nmin_pnsr = 3.0\n", "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "t.toml:3:12: profile 'x': unknown key 'min_pnsr'");
  r = ParseToleranceProfiles("[profile.x]\nmax_abs = \"big\"\n", "t.toml");
  EXPECT_EQ(r.status().message(), "t.toml:2:11: profile 'x': max_abs must be a number");
}

}  // namespace
}  // namespace framegate
