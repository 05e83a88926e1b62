// NumericProbes: watches module outputs during a run and keeps, per module, how close its
// values came to the limits of the dtype they are held in; and the first (step, module)
// whose output held a NaN/Inf. This answers "where did the NaN come from?" and "which
// module overflows first if we go lower?". Not thread-safe; one per run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "harness/cell_result.h"

namespace framegate {

class NumericProbes {
 public:
  // With ranges off, only the first non-finite output is kept (the scan is the same
  // single pass; no per-module table is kept).
  explicit NumericProbes(bool ranges = true) : ranges_(ranges) {}

  // `value`: the output of `module` at sampler `step` (-1: decoder). `limits`: the dtype
  // whose max and smallest normal apply (float16 under FP16 emulation, where values are
  // held in float32 but rounded through float16).
  void Observe(const std::string& module, int step, const at::Tensor& value,
               c10::ScalarType limits);

  const FirstNonfinite& first_nonfinite() const { return first_; }
  // Up to `n` modules, least headroom first (ties: more overflow first, then by name).
  std::vector<ModuleProbe> LeastHeadroom(size_t n) const;

 private:
  struct Range {
    c10::ScalarType limits;
    double absmax = 0;
    int64_t values = 0, overflow = 0, underflow = 0;
  };
  bool ranges_;
  FirstNonfinite first_;
  std::map<std::string, Range> ranges_by_module_;
};

}  // namespace framegate
