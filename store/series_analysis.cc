#include "store/series_analysis.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

// The median of *v, reordering it (nth_element instead of a full sort).
double MedianInPlace(std::vector<double>* v) {
  const size_t n = v->size(), mid = n / 2;
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(mid), v->end());
  const double upper = (*v)[mid];
  if (n % 2) return upper;
  return 0.5 * (upper + *std::max_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(mid)));
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
  return Median(std::move(diffs)) / (0.6745 * std::sqrt(2.0));
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

void NewestShifts(const std::vector<double>& x, double sigma, const ShiftRule& rule, Shift* worse,
                  Shift* better) {
  *worse = Shift();
  *better = Shift();
  const int n = static_cast<int>(x.size());
  if (n < rule.min_before + rule.confirm) return;
  {
    // Necessary for any candidate (most series stop here): the last `confirm` points are
    // all in every after segment, and a before segment's median (>= 4 points) lies
    // between the second smallest and the second largest of the points before them.
    const auto tail = x.begin() + (n - rule.confirm);
    const auto [tail_low, tail_high] = std::minmax_element(tail, x.end());
    double low1 = INFINITY, low2 = INFINITY, high1 = -INFINITY, high2 = -INFINITY;
    for (auto it = x.begin(); it != tail; ++it) {
      if (*it < low1) {
        low2 = low1;
        low1 = *it;
      } else if (*it < low2) {
        low2 = *it;
      }
      if (*it > high1) {
        high2 = high1;
        high1 = *it;
      } else if (*it > high2) {
        high2 = *it;
      }
    }
    const double quick_bound = std::max(rule.point_sigmas * sigma, rule.floor);
    if (!(*tail_low - low2 > quick_bound) && !(high2 - *tail_high > quick_bound)) return;
  }
  // Suffix minimum, maximum and sum: "every after point above (below)" and mean(after)
  // in O(1) per candidate start.
  std::vector<double> low(static_cast<size_t>(n) + 1, INFINITY), high(low.size(), -INFINITY),
      sum(low.size(), 0);
  for (int i = n - 1; i >= 0; --i) {
    const size_t k = static_cast<size_t>(i);
    low[k] = std::min(low[k + 1], x[k]);
    high[k] = std::max(high[k + 1], x[k]);
    sum[k] = sum[k + 1] + x[k];
  }
  std::vector<double> before;
  for (int start = n - rule.confirm; start >= rule.min_before; --start) {
    const size_t at = static_cast<size_t>(start);
    before.assign(x.begin() + std::max(0, start - rule.max_before), x.begin() + start);
    const double level = MedianInPlace(&before);
    const double quick_bound = std::max(rule.point_sigmas * sigma, rule.floor);  // <= the bound
    const bool up = low[at] - level > quick_bound, down = level - high[at] > quick_bound;
    if (!up && !down) continue;
    // The noise: the larger of the series' robust estimate and the spread of the before
    // segment itself (heavy-tailed load noise that the median difference understates).
    const double noise = std::max(sigma, SampleStddev(before));
    const double bound = std::max(rule.point_sigmas * noise, rule.floor);
    const double na = n - start, nb = static_cast<double>(before.size());
    const double after = sum[at] / na;
    const double se = noise * std::sqrt(1 / na + (M_PI / 2) / nb);
    auto consider = [&](bool all_beyond, double shift, double before_value, double after_value, Shift* best) {
      if (!all_beyond || !(shift > rule.floor)) return;
      const double z = se > 0 ? shift / se : INFINITY;
      if (best->found() && z < best->z) return;  // ties (noiseless series): the longest segment
      *best = {start, before_value, after_value, z, se > 0 ? 0.5 * std::erfc(z / std::sqrt(2.0)) : 0.0};
    };
    consider(low[at] - level > bound, after - level, level, after, worse);
    consider(level - high[at] > bound, level - after, -level, -after, better);
  }
}

Shift NewestShift(const std::vector<double>& x, double sigma, const ShiftRule& rule) {
  Shift worse, better;
  NewestShifts(x, sigma, rule, &worse, &better);
  return worse;
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
