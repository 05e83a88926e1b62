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
  // `op`: "" for the module's own output, else the op inside `module` that produced
  // `value` ("aten::log"); ranges count both under `module`, only module outputs are
  // kept or compared for SQNR.
  void Observe(const std::string& module, int step, const at::Tensor& value, c10::ScalarType limits,
               const std::string& op = "");

  // This run is the reference (the cell's FP32 run): keep a float32 copy of every
  // module output, keyed by (step, module, occurrence in that step).
  void KeepOutputsForSqnr() { keep_outputs_ = true; }
  // Compare every module output with `reference`'s at the same key; each probe then has
  // its sqnr_db. `reference` must outlive the observed run.
  void CompareWith(const NumericProbes* reference) { reference_ = reference; }

  // This run is the cell's FP32 run: keep the NaN/Inf counts of every non-finite output
  // (module or op), keyed by (step, module, op, occurrence in that step).
  void KeepNonfiniteOutputs() { keep_nonfinite_ = true; }
  // A non-finite output whose key held at least as many NaN and Inf in `fp32` is what the
  // model writes on purpose (a -inf attention mask, a causal mask built with full(-inf)):
  // not the first non-finite (unless every one was). `fp32` must outlive the observed run.
  void ExcuseNonfiniteOf(const NumericProbes* fp32) { fp32_nonfinite_ = fp32; }

  const FirstNonfinite& first_nonfinite() const { return first_.found ? first_ : first_excused_; }
  // Whether every non-finite output seen was excused (ExcuseNonfiniteOf), at least one.
  bool OnlyExcusedNonfinite() const { return !first_.found && first_excused_.found; }
  // Up to `n` modules, least headroom first (ties: more overflow first, then by name).
  std::vector<ModuleProbe> LeastHeadroom(size_t n) const;
  // Every module observed, in no particular order.
  std::vector<ModuleProbe> All() const;

 private:
  struct Range {
    c10::ScalarType limits;
    double absmax = 0;
    int64_t values = 0, overflow = 0, underflow = 0;
  };
  struct ErrorSums {
    double ref = 0, diff = 0;  // sums of ref^2 and (ref - x)^2
  };
  std::string OutputKey(const std::string& module, int step);

  bool ranges_;
  FirstNonfinite first_;
  FirstNonfinite first_excused_;  // the first non-finite the FP32 run had too
  std::map<std::string, Range> ranges_by_module_;
  bool keep_outputs_ = false;
  const NumericProbes* reference_ = nullptr;
  std::map<std::string, int> occurrences_;  // "module@step" -> outputs seen
  bool keep_nonfinite_ = false;
  const NumericProbes* fp32_nonfinite_ = nullptr;
  std::map<std::string, int> all_occurrences_;                 // "module|op@step" -> outputs seen
  std::map<std::string, NonfiniteCount> nonfinite_by_output_;  // "module|op@step#k" -> counts
  std::map<std::string, at::Tensor> outputs_;                  // "module@step#k" -> float32 copy
  std::map<std::string, ErrorSums> errors_by_module_;
};

}  // namespace framegate
