// The two-sided Mann-Whitney U test, as scipy.stats.mannwhitneyu(x, y,
// alternative="two-sided") computes it (scipy 1.10, method="auto", use_continuity=True):
//   U = U1 = R1 - n1(n1+1)/2 (R1: the sum of x's ranks, ties get their average rank);
//   exact p from U's permutation distribution when both samples have at most 8 values and
//   there are no ties; otherwise the normal approximation with tie correction and a 0.5
//   continuity correction. The p value is 2 * P(U >= max(U1, U2)), capped at 1.
// `compare` judges latency changes with it on the timing repeats of two runs.
#pragma once

#include <vector>

namespace framegate {

struct MannWhitneyResult {
  double u = 0;        // U1, the statistic for x
  double p_value = 1;  // two-sided; 1 when either sample is empty or all values tie
  bool exact = false;  // from the exact distribution, not the normal approximation
};

MannWhitneyResult MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace framegate
