// The ops that do not promote their operands: a real run raises unless the operands at
// these inputs have input 0's dtype, whichever way they differ, a 0-dim tensor included
// (torch 1.13: "expected dtype c10::Half for `weight` but got dtype float", "index_add_():
// self (Half) and source (Float) must have the same scalar type"). The FP16 emulation
// raises where the would-be dtypes differ (pipelines/package_observer.cc).
#pragma once

#include <string>

namespace framegate {

// The inputs of `op` that must have input 0's dtype, as a bit mask (bit i: input i); 0
// for an op that promotes or is not listed. The in-place form ("aten::lerp_") is the same.
inline unsigned SameDtypeInputs(std::string op) {
  if (!op.empty() && op.back() == '_') op.pop_back();
  if (op == "aten::lerp") return 1u << 1 | 1u << 2;  // end, weight
  if (op == "aten::index_add" || op == "aten::index_copy" || op == "aten::scatter" ||
      op == "aten::scatter_add") {
    return 1u << 3;  // (self, dim, index, source)
  }
  if (op == "aten::masked_scatter" || op == "aten::index_put" || op == "aten::put") {
    return 1u << 2;  // (self, mask / indices / index, source / values)
  }
  if (op == "aten::grid_sampler" || op == "aten::dot" || op == "aten::vdot") return 1u << 1;
  return 0;
}

}  // namespace framegate
