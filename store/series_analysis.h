// The arithmetic `framegate regressions` applies to one series (a cell's metric or
// latency over runs, oldest first). Every series is oriented so that LARGER IS WORSE
// (latency, rel_l2 as they are; PSNR and SSIM negated). Pure functions, no I/O.
#pragma once

#include <vector>

#include "harness/sample_stats.h"

namespace framegate {

// A point violates a reference when it is worse by more than
// max(relative * |reference|, absolute, 3 * sigma).
struct ViolationRule {
  double relative = 0;
  double absolute = 0;
  double sigma = 0;  // the series' own noise (NoiseSigma)
  double Threshold(double reference) const;
  bool Violates(double value, double reference) const;
};

// Robust run-to-run noise: the median absolute first difference / (0.6745 * sqrt(2)),
// which ignores the few large jumps a step change adds. 0 with fewer than 3 points.
double NoiseSigma(const std::vector<double>& x);

// The trailing run of violations against the level just before it: the largest L such
// that each of the last L points violates reference(L), the median of the (up to)
// `reference_points` points before them. length 0 when the last point does not violate.
struct Streak {
  int length = 0;
  double reference = 0;
};
Streak TrailingStreak(const std::vector<double>& x, const ViolationRule& rule, int reference_points = 5);
// How many points at the end of x[from..] violate a fixed reference, consecutively.
int TrailingViolations(const std::vector<double>& x, int from, double reference, const ViolationRule& rule);

// Step changes in level by binary segmentation: a split of a segment is kept when the
// difference of the two sides' means, divided by sigma * sqrt(1/n1 + 1/n2), is at least
// `min_score` and each side has `min_segment` points or more. Returns the indices where
// a new level starts, ascending. sigma must be > 0 (callers floor it).
std::vector<int> StepChanges(const std::vector<double>& x, double sigma, double min_score = 5,
                             int min_segment = 2);

double Mean(const std::vector<double>& x, int begin, int end);

// The newest level shift of a series, the change point of `regressions` (docs/store.md,
// "The alert rule", has the numbers that chose the constants). A shift starting at
// index s (x[s..n) the new level, "after"; up to `max_before` points before s, "before")
// is a candidate when
//   - before has >= min_before points and after >= confirm points (minimum segment
//     lengths, as Otava's E-divisive uses; `confirm` is the confirmation rule: a change
//     must hold for that many nights);
//   - every after point exceeds median(before) by more than max(point_sigmas x noise,
//     floor), noise = max(sigma, the standard deviation of before): a single night back
//     at the old level ends the shift, so one-night outliers cannot make one;
//   - mean(after) - median(before) > floor.
// Its score is z = (mean(after) - median(before)) / (noise x sqrt(1/na + (pi/2)/nb)), the
// shift in standard errors (the median of nb normal points has variance pi/2 sigma^2/nb);
// p = the one-sided normal tail of z (0 when sigma is 0: a deterministic series moved by
// more than the floor). The candidate with the largest z wins. Orientation: larger is
// worse; call it on -x for improvements.
struct ShiftRule {
  int min_before = 4;
  int max_before = 10;
  int confirm = 2;
  double point_sigmas = 1.5;
  double floor = 0;  // smallest shift that counts, in the series' unit
};
struct Shift {
  int start = -1;                // -1: none
  double before = 0, after = 0;  // median(before), mean(after)
  double z = 0, p = 1;
  bool found() const { return start >= 0; }
};
Shift NewestShift(const std::vector<double>& x, double sigma, const ShiftRule& rule);
// Both directions in one pass: *worse as NewestShift(x), *better as NewestShift(-x)
// (its before/after in the negated orientation).
void NewestShifts(const std::vector<double>& x, double sigma, const ShiftRule& rule, Shift* worse,
                  Shift* better);

// Benjamini-Hochberg adjusted p-values (q-values) of `p`, out of m tests (m >= p.size():
// the tests that found no candidate count with p = 1). Those <= q are the discoveries at
// false discovery rate q.
std::vector<double> BenjaminiHochberg(const std::vector<double>& p, size_t m);
}  // namespace framegate
