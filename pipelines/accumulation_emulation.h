// How a GPU's matrix units accumulate, emulated on the CPU (no GPU is lent to this
// project; docs/numerics.md). Selected by a policy's accumulation flags:
//   allow_tf32                        the inputs of matmul, linear, convolution and the
//                                     attention products are rounded to TF32 (10-bit
//                                     mantissa, round to nearest even, as cuBLAS/cuDNN do
//                                     with TF32 tensor cores); the products accumulate in
//                                     FP32.
//   fp16_reduced_precision_reduction  the reduction dimension of matmul, linear and the
//                                     attention products is summed in blocks of
//                                     `accumulation_block` products (exactly, in FP32) and
//                                     the running sum is rounded to FP16 after each block,
//                                     as a tensor-core kernel with FP16 accumulators does
//                                     (an mma.sync m16n8k8 writes its FP16 accumulator
//                                     every 8 products: the default block).
//   bf16_reduced_precision_reduction  the same with a BF16 running sum.
// Convolutions get the TF32 input rounding only (their reduction is not re-blocked).
// Not emulated: the order in which a real kernel visits the blocks (split-K, the
// threadblock tile), which changes the last bits.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace framegate {

struct AccumulationEmulation {
  bool tf32_inputs = false;
  // kHalf or kBFloat16: the dtype of the running sum; Undefined: FP32 accumulation.
  c10::ScalarType reduced_sum = c10::ScalarType::Undefined;
  int64_t block = 8;  // products per block of the reduction

  bool active() const { return tf32_inputs || reduced_sum != c10::ScalarType::Undefined; }
  // "tf32 inputs, fp16 accumulation in blocks of 8", "" when inactive.
  std::string Describe() const;
};

// float32 -> float32 with the 13 low mantissa bits rounded off (to nearest, ties to even):
// the value a TF32 tensor core multiplies. NaN and Inf pass through. Other dtypes: as is.
at::Tensor RoundToTf32(const at::Tensor& x);

// a [..., M, K] @ b [..., K, N] (broadcast like at::matmul) under the emulation: computed
// in float32 and returned in a's dtype.
at::Tensor EmulatedMatmul(const at::Tensor& a, const at::Tensor& b, const AccumulationEmulation& emulation);
// The emulation a policy asks for on `device`: on a CUDA device none (the policy's flags
// set the real cuBLAS/cuDNN switches), on the CPU the flags above.
struct DtypePolicy;
AccumulationEmulation AccumulationOf(const DtypePolicy& policy, bool on_cpu);

// x [..., K] W^T [K, out] + bias under the emulation (the bias is added after the sum).
at::Tensor EmulatedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          const AccumulationEmulation& emulation);

}  // namespace framegate
