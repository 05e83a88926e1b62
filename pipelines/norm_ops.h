// The normalisation ops of a TorchScript graph (aten::group_norm, layer_norm, batch_norm,
// instance_norm), for the observers that treat a norm apart: the package observer audits
// the dtypes of its input and affine weight; the module shadow measures how far its
// input's mean stands from its spread (a norm cancels that offset, and the rounding of it
// comes back at full scale).
#pragma once

#include <string>

namespace framegate {

// The input index of the norm `op`'s affine weight; -1 when `op` is not a norm.
inline int NormWeightInput(const std::string& op) {
  if (op == "aten::group_norm" || op == "aten::layer_norm") return 2;
  if (op == "aten::batch_norm" || op == "aten::instance_norm") return 1;
  return -1;
}

}  // namespace framegate
