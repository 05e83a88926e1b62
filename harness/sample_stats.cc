#include "harness/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace framegate {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double SampleStddev(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  if (values.size() == 1) return 0.0;
  const double mean = Mean(values);
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

}  // namespace framegate
