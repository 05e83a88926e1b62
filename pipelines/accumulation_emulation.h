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
//   widened (set by the device, not by a policy)
//                                     this CPU's LibTorch kernels sum BF16 (or FP16)
//                                     products in BF16 itself (LibTorch 1.13's matmul, bmm
//                                     and convolutions on a CPU without oneDNN's BF16, i.e.
//                                     without AVX-512: 4096 products of 1 sum to 256), which
//                                     no GPU and no AVX-512 CPU does. Matmul, linear and
//                                     convolution of that dtype are then computed in FP32
//                                     from the same reduced values and rounded back: the
//                                     FP32 accumulators of a GPU, so that a verdict does not
//                                     depend on which CPU ran it (docs/numerics.md).
// Not emulated: the order in which a real kernel visits the blocks (split-K, the
// threadblock tile), which changes the last bits.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <initializer_list>
#include <string>

namespace framegate {

struct AccumulationEmulation {
  bool tf32_inputs = false;
  // kHalf or kBFloat16: the dtype of the running sum; Undefined: FP32 accumulation.
  c10::ScalarType reduced_sum = c10::ScalarType::Undefined;
  int64_t block = 8;  // products per block of the reduction
  // kBFloat16 or kHalf: products of this dtype are computed in FP32 and rounded back
  // (see Widens); Undefined: the kernels' own sums are kept. Never set beside the
  // policy's own emulation, which computes its products in FP32 already.
  c10::ScalarType widened = c10::ScalarType::Undefined;

  // Whether the policy's emulation (TF32, reduced sums) is on; `widened` does not count.
  bool active() const { return tf32_inputs || reduced_sum != c10::ScalarType::Undefined; }
  // "tf32 inputs, fp16 accumulation in blocks of 8", "bf16 products summed in FP32 (this
  // CPU's kernels sum them in bf16)"; "" when nothing is emulated.
  std::string Describe() const;
  // The `observed` note of a cell: "accumulation emulated on the CPU: " + Describe(), or
  // "" when nothing is emulated.
  std::string ObservedNote() const;
};

// float32 -> float32 with the 13 low mantissa bits rounded off (to nearest, ties to even):
// the value a TF32 tensor core multiplies. NaN and Inf pass through. Other dtypes: as is.
at::Tensor RoundToTf32(const at::Tensor& x);

// a [..., M, K] @ b [..., K, N] (broadcast like at::matmul) under the emulation: computed
// in float32 and returned in a's dtype.
at::Tensor EmulatedMatmul(const at::Tensor& a, const at::Tensor& b, const AccumulationEmulation& emulation);
// Whether this process's CPU kernels sum `dtype` (kBFloat16, kHalf) products in `dtype`:
// measured once per dtype (a matmul and a convolution of 4096 products of 1). False
// where LibTorch has no such kernel (FP16 on the CPU before 2.2) and for other dtypes.
bool CpuKernelsSumIn(c10::ScalarType dtype);
// Whether a product of `operands` is widened: `emulation` widens a dtype and every
// defined operand has it (operands of mixed dtypes keep the op's own dtype error).
bool Widens(const AccumulationEmulation& emulation, std::initializer_list<at::Tensor> operands);
// `t` in float32; an undefined tensor (no bias) stays undefined.
at::Tensor Float32(const at::Tensor& t);
// The emulation a policy asks for on `device`: on a CUDA device none (the policy's flags
// set the real cuBLAS/cuDNN switches), on the CPU the flags above, or else `widened`
// where the policy computes in a dtype that the CPU's kernels sum in itself.
struct DtypePolicy;
AccumulationEmulation AccumulationOf(const DtypePolicy& policy, bool on_cpu);

// x [..., K] W^T [K, out] + bias under the emulation (the bias is added after the sum).
at::Tensor EmulatedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          const AccumulationEmulation& emulation);

}  // namespace framegate
