#include "pipelines/accumulation_emulation.h"

#include <ATen/ATen.h>

#include "pipelines/dtype_policy.h"

namespace framegate {

std::string AccumulationEmulation::Describe() const {
  std::string text = tf32_inputs ? "tf32 inputs" : "";
  if (reduced_sum != c10::ScalarType::Undefined) {
    text += std::string(text.empty() ? "" : ", ") + DtypeName(reduced_sum) + " accumulation in blocks of " +
            std::to_string(block);
  }
  if (widened != c10::ScalarType::Undefined) {
    text += std::string(text.empty() ? "" : ", ") + DtypeName(widened) +
            " products summed in FP32 (this CPU's kernels sum them in " + DtypeName(widened) + ")";
  }
  return text;
}

std::string AccumulationEmulation::ObservedNote() const {
  const std::string emulated = Describe();
  return emulated.empty() ? "" : "accumulation emulated on the CPU: " + emulated;
}

at::Tensor RoundToTf32(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat) return x;
  // On the bit pattern: add half an ulp of TF32 (0x0fff, plus the kept bit for ties to
  // even) and clear the 13 dropped bits. Inf and NaN keep their pattern.
  const at::Tensor bits = x.contiguous().view(at::kInt);
  const at::Tensor kept_lsb = bits.bitwise_right_shift(13).bitwise_and(1);
  at::Tensor rounded = (bits + kept_lsb + 0x0fff).bitwise_and(~0x1fff);
  const at::Tensor finite = x.isfinite();
  return at::where(finite, rounded.view(at::kFloat), x);
}

namespace {

bool MeasureCpuSumsIn(c10::ScalarType dtype) {
  // 4096 products of 1 x 1: FP32 accumulators give 4096; a running sum in BF16 stops at
  // 256 (FP16: 2048), where adding 1 no longer changes it.
  constexpr int64_t k = 4096;
  try {
    const at::Tensor row = at::ones({1, k}, at::TensorOptions().dtype(dtype));
    const double mm = at::mm(row, at::ones({k, 1}, row.options())).item<double>();
    const double conv = at::conv1d(row.view({1, 1, k}), row.view({1, 1, k})).item<double>();
    return mm != k || conv != k;
  } catch (const c10::Error&) {
    return false;  // no such kernel: such a policy is UNSUPPORTED here, nothing to widen
  }
}

}  // namespace

bool CpuKernelsSumIn(c10::ScalarType dtype) {
  if (dtype == at::kBFloat16) {
    static const bool bf16 = MeasureCpuSumsIn(at::kBFloat16);
    return bf16;
  }
  if (dtype == at::kHalf) {
    static const bool fp16 = MeasureCpuSumsIn(at::kHalf);
    return fp16;
  }
  return false;
}

at::Tensor Float32(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; }

bool Widens(const AccumulationEmulation& emulation, std::initializer_list<at::Tensor> operands) {
  if (emulation.widened == c10::ScalarType::Undefined) return false;
  for (const at::Tensor& t : operands) {
    if (t.defined() && t.scalar_type() != emulation.widened) return false;
  }
  return true;
}

AccumulationEmulation AccumulationOf(const DtypePolicy& policy, bool on_cpu) {
  AccumulationEmulation e;
  if (!on_cpu) return e;
  e.tf32_inputs = policy.allow_tf32;
  if (policy.fp16_reduced_precision_reduction) e.reduced_sum = at::kHalf;
  if (policy.bf16_reduced_precision_reduction) e.reduced_sum = at::kBFloat16;
  e.block = policy.accumulation_block;
  if (!e.active() && !policy.emulate_fp16 && CpuKernelsSumIn(policy.compute)) e.widened = policy.compute;
  return e;
}

at::Tensor EmulatedMatmul(const at::Tensor& a, const at::Tensor& b, const AccumulationEmulation& emulation) {
  const at::Tensor lhs = emulation.tf32_inputs ? RoundToTf32(a.to(at::kFloat)) : a.to(at::kFloat);
  const at::Tensor rhs = emulation.tf32_inputs ? RoundToTf32(b.to(at::kFloat)) : b.to(at::kFloat);
  if (emulation.reduced_sum == c10::ScalarType::Undefined) return at::matmul(lhs, rhs).to(a.scalar_type());
  // The reduction dimension K in blocks: each block's products summed in FP32 (exact for
  // FP16/BF16 inputs), the running sum rounded to the reduced dtype after each block.
  const int64_t k = lhs.size(-1);
  at::Tensor sum;
  for (int64_t start = 0; start < k; start += emulation.block) {
    const int64_t len = std::min(emulation.block, k - start);
    const at::Tensor partial = at::matmul(lhs.narrow(-1, start, len), rhs.narrow(-2, start, len));
    sum = sum.defined() ? sum + partial : partial;
    sum = sum.to(emulation.reduced_sum).to(at::kFloat);
  }
  return sum.to(a.scalar_type());
}

at::Tensor EmulatedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          const AccumulationEmulation& emulation) {
  at::Tensor y = EmulatedMatmul(x, weight.t(), emulation);
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace framegate
