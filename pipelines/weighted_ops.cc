#include "pipelines/weighted_ops.h"

#include <unordered_map>

namespace framegate {

int WeightedOp::SlotOf(int input_index) const {
  if (input_index == first_operand) return 0;
  if (input_index == second_operand) return 1;
  if (input_index == bias) return 2;
  return -1;
}

const WeightedOp* FindWeightedOp(const std::string& op) {
  constexpr WeightedOp kLinear{WeightedSum::kLinear, 0, 1, 2, true, false};
  constexpr WeightedOp kConvolution{WeightedSum::kConvolution, 0, 1, 2, true, false};
  constexpr WeightedOp kTransposed{WeightedSum::kConvolution, 0, 1, 2, true, true};
  constexpr WeightedOp kProduct{WeightedSum::kMatmul, 0, 1, -1, false, false};
  constexpr WeightedOp kBiasedProduct{WeightedSum::kMatmul, 1, 2, 0, false, false};
  static const auto* const ops = new std::unordered_map<std::string, WeightedOp>{
      {"aten::linear", kLinear},
      {"aten::conv1d", kConvolution},
      {"aten::conv2d", kConvolution},
      {"aten::conv3d", kConvolution},
      {"aten::_convolution", kConvolution},
      {"aten::conv_transpose1d", kTransposed},
      {"aten::conv_transpose2d", kTransposed},
      {"aten::conv_transpose3d", kTransposed},
      {"aten::matmul", kProduct},
      {"aten::mm", kProduct},
      {"aten::bmm", kProduct},
      {"aten::addmm", kBiasedProduct},
      {"aten::baddbmm", kBiasedProduct},
  };
  const auto found = ops->find(op);
  return found == ops->end() ? nullptr : &found->second;
}

}  // namespace framegate
