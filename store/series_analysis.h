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
}  // namespace framegate
