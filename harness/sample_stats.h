// Summary statistics of samples (timing repeats, metric series). NaN for no samples.
#pragma once

#include <vector>

namespace framegate {

double Median(std::vector<double> values);
double Mean(const std::vector<double>& values);
// With Bessel's correction; 0 for one sample.
double SampleStddev(const std::vector<double>& values);

}  // namespace framegate
