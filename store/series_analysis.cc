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

Shift NewestShift(const std::vector<double>& x, double sigma, const ShiftRule& rule) {
  Shift best;
  const int n = static_cast<int>(x.size());
  std::vector<double> before;
  for (int start = n - rule.confirm; start >= rule.min_before; --start) {
    before.assign(x.begin() + std::max(0, start - rule.max_before), x.begin() + start);
    const double level = Median(before);
    const double point_bound =
        std::max(rule.point_sigmas * std::max(sigma, SampleStddev(before)), rule.floor);
    if (!(x[static_cast<size_t>(start)] - level > point_bound)) {
      // This point is not above the old level: no shift can start at or before it while
      // including it, but an older start has another level; keep looking.
      continue;
    }
    bool all_above = true;
    for (int i = start + 1; i < n && all_above; ++i)
      all_above = x[static_cast<size_t>(i)] - level > point_bound;
    if (!all_above) continue;
    const double after = Mean(x, start, n);
    if (!(after - level > rule.floor)) continue;
    const double na = n - start, nb = static_cast<double>(before.size());
    // The noise: the larger of the series' robust estimate and the spread of the before
    // segment itself (heavy-tailed load noise that the median difference understates).
    const double noise = std::max(sigma, SampleStddev(before));
    const double se = noise * std::sqrt(1 / na + (M_PI / 2) / nb);
    const double z = se > 0 ? (after - level) / se : INFINITY;
    if (best.found() && z < best.z) continue;  // ties (noiseless series): the longest segment
    best = {start, level, after, z, se > 0 ? 0.5 * std::erfc(z / std::sqrt(2.0)) : 0.0};
  }
  return best;
}

std::vector<double> BenjaminiHochberg(const std::vector<double>& p, size_t m) {
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  const double tests = static_cast<double>(std::max(m, p.size()));
  std::vector<double> adjusted(p.size(), 1.0);
  double running = 1.0;  // q_(k) = min over j >= k of p_(j) m / j
  for (size_t k = order.size(); k >= 1; --k) {
    running = std::min(running, p[order[k - 1]] * tests / static_cast<double>(k));
    adjusted[order[k - 1]] = running;
  }
  return adjusted;
}

}  // namespace framegate
