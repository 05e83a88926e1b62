#include "harness/numeric_probes.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/frame_health.h"

namespace framegate {
namespace {

struct DtypeLimits {
  double max;
  double smallest_normal;
  const char* name;
};

DtypeLimits LimitsOf(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kHalf: return {65504.0, 6.103515625e-05, "float16"};
    case c10::kBFloat16: return {3.3895313892515355e38, 1.1754943508222875e-38, "bfloat16"};
    case c10::kDouble:
      return {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(), "float64"};
    default:
      return {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), "float32"};
  }
}

}  // namespace

void NumericProbes::Observe(const std::string& module, int step, const at::Tensor& value,
                            c10::ScalarType limits) {
  const at::Tensor abs = value.detach().abs();
  const double max = abs.max().item<double>();  // NaN or Inf when any value is
  const bool finite = std::isfinite(max);
  NonfiniteCount bad;
  if (!finite) bad = CountNonfinite(abs);
  if (!finite && !first_.found) first_ = {true, step, module, bad};
  if (!ranges_) return;

  const DtypeLimits lim = LimitsOf(limits);
  Range& r = ranges_by_module_.try_emplace(module, Range{limits}).first->second;
  r.values += value.numel();
  const double finite_max =
      finite ? max : abs.masked_fill(at::isfinite(abs).logical_not(), 0).max().item<double>();
  r.absmax = std::max(r.absmax, finite_max);
  r.overflow += bad.nan + bad.inf;
  if (finite_max > lim.max) r.overflow += (abs > lim.max).logical_and(at::isfinite(abs)).sum().item<int64_t>();
  r.underflow += (abs < lim.smallest_normal).logical_and(abs > 0).sum().item<int64_t>();
}

std::vector<ModuleProbe> NumericProbes::LeastHeadroom(size_t n) const {
  std::vector<ModuleProbe> probes;
  for (const auto& [module, r] : ranges_by_module_) {
    const DtypeLimits lim = LimitsOf(r.limits);
    ModuleProbe p;
    p.module = module;
    p.dtype = lim.name;
    p.absmax = r.absmax;
    p.overflow_fraction = r.values ? static_cast<double>(r.overflow) / r.values : 0;
    p.underflow_fraction = r.values ? static_cast<double>(r.underflow) / r.values : 0;
    p.headroom_bits = r.absmax > 0 ? std::log2(lim.max / r.absmax)
                                   : std::numeric_limits<double>::infinity();
    probes.push_back(std::move(p));
  }
  std::sort(probes.begin(), probes.end(), [](const ModuleProbe& a, const ModuleProbe& b) {
    if (a.headroom_bits != b.headroom_bits) return a.headroom_bits < b.headroom_bits;
    if (a.overflow_fraction != b.overflow_fraction) return a.overflow_fraction > b.overflow_fraction;
    return a.module < b.module;
  });
  if (probes.size() > n) probes.resize(n);
  return probes;
}

}  // namespace framegate
