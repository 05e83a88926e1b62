#include "store/series_analysis.h"

#include <algorithm>
#include <cmath>

namespace framegate {
namespace {

// Appends the split points of x[begin, end) to `steps`.
void Segment(const std::vector<double>& x, int begin, int end, double sigma, double min_score,
             int min_segment, std::vector<int>* steps) {
  int best = -1;
  double best_score = min_score;
  for (int k = begin + min_segment; k <= end - min_segment; ++k) {
    const double n1 = k - begin, n2 = end - k;
    const double score =
        std::fabs(Mean(x, begin, k) - Mean(x, k, end)) / (sigma * std::sqrt(1 / n1 + 1 / n2));
    if (score >= best_score) {
      best_score = score;
      best = k;
    }
  }
  if (best < 0) return;
  steps->push_back(best);
  Segment(x, begin, best, sigma, min_score, min_segment, steps);
  Segment(x, best, end, sigma, min_score, min_segment, steps);
}

}  // namespace

double ViolationRule::Threshold(double reference) const {
  return std::max({relative * std::fabs(reference), absolute, 3 * sigma});
}

bool ViolationRule::Violates(double value, double reference) const {
  return value - reference > Threshold(reference);
}

double Mean(const std::vector<double>& x, int begin, int end) {
  double sum = 0;
  for (int i = begin; i < end; ++i) sum += x[static_cast<size_t>(i)];
  return end > begin ? sum / (end - begin) : 0;
}

double NoiseSigma(const std::vector<double>& x) {
  if (x.size() < 3) return 0;
  std::vector<double> diffs;
  for (size_t i = 1; i < x.size(); ++i) diffs.push_back(std::fabs(x[i] - x[i - 1]));
  return Median(diffs) / (0.6745 * std::sqrt(2.0));
}

Streak TrailingStreak(const std::vector<double>& x, const ViolationRule& rule, int reference_points) {
  Streak best;
  const int n = static_cast<int>(x.size());
  for (int length = 1; length < n; ++length) {
    const int start = n - length;  // first point of the candidate streak
    const int ref_begin = std::max(0, start - reference_points);
    const double reference = Median(std::vector<double>(x.begin() + ref_begin, x.begin() + start));
    bool all_violate = true;
    for (int i = start; i < n && all_violate; ++i) {
      all_violate = rule.Violates(x[static_cast<size_t>(i)], reference);
    }
    if (!all_violate) {
      // A longer streak would need this reference to move; stop at the first miss of the
      // newest candidate point itself, keep looking when only older points disagree.
      if (!rule.Violates(x[static_cast<size_t>(start)], reference)) break;
      continue;
    }
    best = {length, reference};
  }
  return best;
}

int TrailingViolations(const std::vector<double>& x, int from, double reference, const ViolationRule& rule) {
  int count = 0;
  for (int i = static_cast<int>(x.size()) - 1; i >= from; --i) {
    if (!rule.Violates(x[static_cast<size_t>(i)], reference)) break;
    ++count;
  }
  return count;
}

std::vector<int> StepChanges(const std::vector<double>& x, double sigma, double min_score, int min_segment) {
  std::vector<int> steps;
  if (sigma <= 0) return steps;
  Segment(x, 0, static_cast<int>(x.size()), sigma, min_score, min_segment, &steps);
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace framegate
