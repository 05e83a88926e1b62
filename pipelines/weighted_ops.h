// The ops that can multiply by a module's weight, in one table: the graph
// instrumentation finds their weight operand, the package observer audits their operands'
// dtypes and emulates how they accumulate, the precision advisor tells an island of the
// op's module from an island of the op alone.
//
// Positions are those of the op's schema: linear and the convolutions take
// (input, weight, bias, ...), matmul/mm/bmm (self, other), addmm and baddbmm
// (self = bias, mat1, mat2, beta, alpha). Not listed: einsum, whose operands come as a
// list; the package observer audits and widens them itself (PackageObserver::EinsumOperand).
#pragma once

#include <string>

namespace framegate {

// How a weighted op sums its products, for the accumulation emulation.
enum class WeightedSum { kLinear, kMatmul, kConvolution };

struct WeightedOp {
  WeightedSum sum;
  int first_operand;   // the input of linear and the convolutions, mat1 of addmm
  int second_operand;  // their weight, mat2 of addmm
  int bias;            // the added tensor; -1: the op has none
  // linear and the convolutions: `second_operand` is the weight even when it reaches the
  // op as a method argument (nn.Conv3d's _conv_forward(input, weight)); the products
  // (mm, addmm, ...) hold a weight only where one operand is read from the module.
  bool positional_weight;
  bool transposed;  // conv_transpose1d/2d/3d

  // 0 for the first operand, 1 for the second, 2 for the bias, -1 for another input.
  int SlotOf(int input_index) const;
};

// The weighted op `op` ("aten::linear", "aten::baddbmm"), or nullptr for any other op.
const WeightedOp* FindWeightedOp(const std::string& op);

}  // namespace framegate
