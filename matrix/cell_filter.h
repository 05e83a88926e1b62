// `--filter EXPR`: which cells of a matrix to keep. EXPR is terms joined by commas, all
// of which must hold:
//   key=value    the cell's key equals value ("fault=" keeps cells without a fault)
//   key!=value   the cell's key differs from value
//   key~text     the cell's key contains text
// Keys: the identity keys (pipeline, device, policy, fault, seed, sampler, steps,
// guidance), plus id, size, xfail (the reason) and requires (comma-free list joined by
// '+'). For pipeline, a plain size ("tiny") equals "reference:tiny". Values are taken
// literally (no quoting, no spaces trimmed inside).
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/status.h"

namespace framegate {

class CellFilter {
 public:
  // InvalidInput ("--filter 'polcy=fp16': unknown key 'polcy' (known: ...)") on bad input.
  static StatusOr<CellFilter> Parse(const std::string& expression);
  bool Matches(const Cell& cell) const;
  std::vector<Cell> Apply(const std::vector<Cell>& cells) const;

 private:
  enum class Op { kEquals, kNotEquals, kContains };
  struct Term {
    std::string key;
    Op op;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace framegate
