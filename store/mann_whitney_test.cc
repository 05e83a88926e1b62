#include "store/mann_whitney.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

// Expected values from scipy 1.10 (Debian 12's python3-scipy):
//   from scipy.stats import mannwhitneyu
//   r = mannwhitneyu(x, y, alternative="two-sided"); r.statistic, r.pvalue
struct Case {
  const char* name;
  std::vector<double> x, y;
  double u, p;
  bool exact;
};

std::vector<double> Ramp(double start, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + 0.001 * i);
  return v;
}

TEST(MannWhitneyTest, MatchesScipy) {
  const std::vector<Case> cases = {
      {"exact_small", {1, 2, 3, 4}, {5, 6, 7, 8}, 0.0, 0.02857142857142857, true},
      {"exact_mixed",
       {0.51, 0.49, 0.50, 0.53, 0.52},
       {0.55, 0.501, 0.56, 0.54, 0.57, 0.58},
       3.0,
       0.030303030303030304,
       true},
      {"exact_3v3", {1, 2, 3}, {4, 5, 6}, 0.0, 0.1, true},
      {"ties_asymptotic", {1, 2, 2, 3, 3, 3, 4}, {3, 4, 4, 5, 5, 6, 6}, 3.5, 0.0075909321977429, false},
      {"large_asymptotic", Ramp(0.5, 12), Ramp(0.505, 10), 24.5, 0.020755311537192917, false},
      {"identical", {1, 1, 1}, {1, 1, 1}, 4.5, 1.0, false},
  };
  for (const Case& c : cases) {
    const MannWhitneyResult r = MannWhitneyU(c.x, c.y);
    EXPECT_DOUBLE_EQ(r.u, c.u) << c.name;
    EXPECT_NEAR(r.p_value, c.p, 1e-12) << c.name;
    EXPECT_EQ(r.exact, c.exact) << c.name;
  }
}

TEST(MannWhitneyTest, IsSymmetricInItsPValueAndHandlesEmptySamples) {
  const std::vector<double> a = {0.1, 0.4, 0.2, 0.9}, b = {0.3, 0.8, 0.7, 0.6, 0.5};
  EXPECT_DOUBLE_EQ(MannWhitneyU(a, b).p_value, MannWhitneyU(b, a).p_value);
  EXPECT_DOUBLE_EQ(MannWhitneyU(a, b).u + MannWhitneyU(b, a).u, 20.0);
  EXPECT_EQ(MannWhitneyU({}, b).p_value, 1.0);
}

}  // namespace
}  // namespace framegate
