#include "checks/numeric_probes.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "checks/frame_health.h"

namespace framegate {
namespace {

struct DtypeLimits {
  double max;
  double smallest_normal;
  const char* name;
};

DtypeLimits LimitsOf(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kHalf:
      return {65504.0, 6.103515625e-05, "float16"};
    case c10::kBFloat16:
      return {3.3895313892515355e38, 1.1754943508222875e-38, "bfloat16"};
    case c10::kDouble:
      return {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(), "float64"};
    default:
      return {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), "float32"};
  }
}

// One pass over the values: NaN/Inf counts, the largest finite |value|, and the counts
// beyond the dtype's max and below its smallest normal. A hand-written loop over the
// float32 copy: a chain of tensor reductions costs several passes and allocations per
// module output, which on the tiny model was 3x the cell's own time.
struct RangeScan {
  NonfiniteCount nonfinite;
  double absmax = 0;
  int64_t overflow = 0, underflow = 0;
};
template <typename T>
RangeScan ScanValues(const T* p, int64_t n, const DtypeLimits& lim) {
  const float max = static_cast<float>(std::min<double>(lim.max, std::numeric_limits<float>::max()));
  const float tiny = static_cast<float>(lim.smallest_normal);
  RangeScan r;
  float absmax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(static_cast<float>(p[i]));
    if (!(a <= std::numeric_limits<float>::max())) {
      if (std::isnan(a))
        ++r.nonfinite.nan;
      else
        ++r.nonfinite.inf;
      continue;
    }
    absmax = std::max(absmax, a);
    r.overflow += a > max;
    r.underflow += a < tiny && a > 0;
  }
  r.absmax = absmax;
  return r;
}

// Reads a contiguous CPU tensor of float32, bfloat16 or float16 in place (most module and
// op outputs of a package: no copy); anything else through a float32 copy.
RangeScan Scan(const at::Tensor& value, const DtypeLimits& lim) {
  if (value.device().is_cpu() && value.is_contiguous()) {
    switch (value.scalar_type()) {
      case at::kFloat:
        return ScanValues(value.data_ptr<float>(), value.numel(), lim);
      case at::kBFloat16:
        return ScanValues(value.data_ptr<c10::BFloat16>(), value.numel(), lim);
      case at::kHalf:
        return ScanValues(value.data_ptr<c10::Half>(), value.numel(), lim);
      default:
        break;
    }
  }
  const at::Tensor f = value.detach().to(at::kCPU, at::kFloat).contiguous();
  return ScanValues(f.data_ptr<float>(), f.numel(), lim);
}

}  // namespace

std::string NumericProbes::OutputKey(const std::string& module, int step) {
  const std::string at_step = module + "@" + std::to_string(step);
  return at_step + "#" + std::to_string(occurrences_[at_step]++);
}

void NumericProbes::Observe(const std::string& module, int step, const at::Tensor& value,
                            c10::ScalarType limits, const std::string& op) {
  const DtypeLimits lim = LimitsOf(limits);
  const RangeScan scan = Scan(value, lim);
  bool excused = false;  // as non-finite in the FP32 run: written on purpose
  if (keep_nonfinite_ || fp32_nonfinite_ != nullptr) {
    const std::string at_step = module + "|" + op + "@" + std::to_string(step);
    const std::string key = at_step + "#" + std::to_string(all_occurrences_[at_step]++);
    if (keep_nonfinite_ && scan.nonfinite.any()) nonfinite_by_output_[key] = scan.nonfinite;
    if (scan.nonfinite.any() && fp32_nonfinite_ != nullptr) {
      const auto fp32 = fp32_nonfinite_->nonfinite_by_output_.find(key);
      excused = fp32 != fp32_nonfinite_->nonfinite_by_output_.end() &&
                scan.nonfinite.nan <= fp32->second.nan && scan.nonfinite.inf <= fp32->second.inf;
    }
  }
  if (scan.nonfinite.any() && !first_.found) {
    FirstNonfinite& first = excused ? first_excused_ : first_;
    if (!first.found) first = {true, step, module, op, scan.nonfinite};
  }
  if (op.empty() && (keep_outputs_ || reference_ != nullptr)) {
    const std::string key = OutputKey(module, step);
    const at::Tensor x = value.detach().to(at::kFloat);
    if (keep_outputs_) outputs_[key] = x.clone();
    if (reference_ != nullptr) {
      const auto ref = reference_->outputs_.find(key);
      if (ref != reference_->outputs_.end() && ref->second.sizes() == x.sizes()) {
        ErrorSums& e = errors_by_module_[module];
        e.ref += ref->second.to(at::kDouble).pow(2).sum().item<double>();
        e.diff += (ref->second.to(at::kDouble) - x.to(at::kDouble)).pow(2).sum().item<double>();
      }
    }
  }
  if (!ranges_) return;
  Range& r = ranges_by_module_.try_emplace(module, Range{limits}).first->second;
  r.values += value.numel();
  r.absmax = std::max(r.absmax, scan.absmax);
  r.overflow += scan.overflow + scan.nonfinite.nan + scan.nonfinite.inf;
  r.underflow += scan.underflow;
}

std::vector<ModuleProbe> NumericProbes::LeastHeadroom(size_t n) const {
  std::vector<ModuleProbe> probes = All();
  std::sort(probes.begin(), probes.end(), [](const ModuleProbe& a, const ModuleProbe& b) {
    if (a.headroom_bits != b.headroom_bits) return a.headroom_bits < b.headroom_bits;
    if (a.overflow_fraction != b.overflow_fraction) return a.overflow_fraction > b.overflow_fraction;
    return a.module < b.module;
  });
  if (probes.size() > n) probes.resize(n);
  return probes;
}

std::vector<ModuleProbe> NumericProbes::All() const {
  std::vector<ModuleProbe> probes;
  for (const auto& [module, r] : ranges_by_module_) {
    const DtypeLimits lim = LimitsOf(r.limits);
    ModuleProbe p;
    p.module = module;
    p.dtype = lim.name;
    p.absmax = r.absmax;
    p.overflow_fraction = r.values ? static_cast<double>(r.overflow) / r.values : 0;
    p.underflow_fraction = r.values ? static_cast<double>(r.underflow) / r.values : 0;
    p.headroom_bits = r.absmax > 0 ? std::log2(lim.max / r.absmax) : std::numeric_limits<double>::infinity();
    const auto e = errors_by_module_.find(module);
    if (e != errors_by_module_.end()) {
      // NaN when x went non-finite (diff is NaN): an SQNR cannot be read then.
      p.sqnr_db = e->second.diff == 0 ? std::numeric_limits<double>::infinity()
                                      : 10 * std::log10(e->second.ref / e->second.diff);
    }
    probes.push_back(std::move(p));
  }
  return probes;
}

}  // namespace framegate
