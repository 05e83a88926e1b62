#include "store/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace framegate {
namespace {

// P(U >= u) under H0 for samples of sizes m and n without ties: the number of the
// C(m+n, m) orderings whose U is >= u, from c(m, n, k) = c(m-1, n, k-n) + c(m, n-1, k).
double ExactUpperTail(int m, int n, int u) {
  const int max_u = m * n;
  // counts[i][j][k]: orderings of i x's and j y's with U = k.
  std::vector<std::vector<std::vector<double>>> counts(
      m + 1, std::vector<std::vector<double>>(n + 1, std::vector<double>(max_u + 1, 0.0)));
  for (int i = 0; i <= m; ++i) {
    for (int j = 0; j <= n; ++j) {
      if (i == 0 || j == 0) {
        counts[i][j][0] = 1;
        continue;
      }
      for (int k = 0; k <= i * j; ++k) {
        // The largest value is an x (it beats all j y's) or a y (it adds nothing).
        counts[i][j][k] = (k >= j ? counts[i - 1][j][k - j] : 0.0) + counts[i][j - 1][k];
      }
    }
  }
  double total = 0, tail = 0;
  for (int k = 0; k <= max_u; ++k) {
    total += counts[m][n][k];
    if (k >= u) tail += counts[m][n][k];
  }
  return tail / total;
}

}  // namespace

MannWhitneyResult MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y) {
  MannWhitneyResult result;
  const size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) return result;
  std::vector<std::pair<double, int>> all;  // (value, 0 for x / 1 for y)
  for (double v : x) all.push_back({v, 0});
  for (double v : y) all.push_back({v, 1});
  std::sort(all.begin(), all.end());
  const size_t n = all.size();
  double rank_sum_x = 0, tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1..j
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rank_sum_x += average_rank;
    }
    i = j;
  }
  const double nx = static_cast<double>(n1), ny = static_cast<double>(n2);
  result.u = rank_sum_x - nx * (nx + 1) / 2;
  const double u_max = std::max(result.u, nx * ny - result.u);
  if (n1 <= 8 && n2 <= 8 && tie_term == 0) {
    result.exact = true;
    result.p_value = std::min(1.0, 2 * ExactUpperTail(static_cast<int>(n1), static_cast<int>(n2),
                                                      static_cast<int>(std::lround(u_max))));
    return result;
  }
  const double nn = nx + ny;
  const double variance = nx * ny / 12 * ((nn + 1) - tie_term / (nn * (nn - 1)));
  if (variance <= 0) return result;  // every value ties: no evidence either way
  const double z = (u_max - nx * ny / 2 - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 * normal sf(z)
  return result;
}

}  // namespace framegate
