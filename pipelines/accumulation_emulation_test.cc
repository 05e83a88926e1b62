#include "pipelines/accumulation_emulation.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pipelines/dtype_policy.h"

namespace framegate {
namespace {

// TF32 by hand on one float: round the 23-bit mantissa to 10 bits, ties to even.
float Tf32ByHand(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const uint32_t dropped = bits & 0x1fffu, kept_lsb = (bits >> 13) & 1u;
  bits &= ~0x1fffu;
  if (dropped > 0x1000u || (dropped == 0x1000u && kept_lsb)) bits += 0x2000u;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

TEST(AccumulationEmulationTest, Tf32RoundsToTenMantissaBitsTiesToEven) {
  const at::Tensor x = at::tensor({1.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1.0f + 1.0f / 4096,
                                   -3.14159265f, 65504.0f, INFINITY, NAN});
  const at::Tensor r = RoundToTf32(x);
  EXPECT_EQ(r[0].item<float>(), 1.0f);
  EXPECT_EQ(r[1].item<float>(), 1.0f);                // a tie: to the even (kept) value
  EXPECT_EQ(r[2].item<float>(), 1.0f + 4.0f / 2048);  // a tie: up to even
  EXPECT_EQ(r[3].item<float>(), 1.0f);                // below half an ulp
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(r[i].item<float>(), Tf32ByHand(x[i].item<float>())) << i;
  EXPECT_TRUE(std::isinf(r[6].item<float>()));
  EXPECT_TRUE(std::isnan(r[7].item<float>()));
}

TEST(AccumulationEmulationTest, Tf32MatmulEqualsRoundedInputsMultipliedInFp64) {
  at::manual_seed(3);
  const at::Tensor a = at::randn({16, 64}), b = at::randn({64, 24});
  AccumulationEmulation tf32;
  tf32.tf32_inputs = true;
  const at::Tensor emulated = EmulatedMatmul(a, b, tf32);
  at::Tensor a64 = a.clone(), b64 = b.clone();
  for (at::Tensor* t : {&a64, &b64}) {
    float* p = t->data_ptr<float>();
    for (int64_t i = 0; i < t->numel(); ++i) p[i] = Tf32ByHand(p[i]);
  }
  const at::Tensor exact = at::matmul(a64.to(at::kDouble), b64.to(at::kDouble));
  // FP32 accumulation of 64 products: well within 1e-5 relative to the row's magnitude.
  EXPECT_LT((emulated.to(at::kDouble) - exact).abs().max().item<double>(), 1e-4);
  // And it is not plain FP32: the inputs lost 13 bits.
  EXPECT_GT((emulated - at::matmul(a, b)).abs().max().item<float>(), 1e-5f);
}

TEST(AccumulationEmulationTest, Fp16AccumulationOverflowsWhereFp32DoesNot) {
  // A dot product of 256 values of 300: 76800 > 65504.
  const at::Tensor a = at::full({1, 256}, 300.0f), b = at::ones({256, 1});
  AccumulationEmulation fp16;
  fp16.reduced_sum = at::kHalf;
  EXPECT_TRUE(std::isinf(EmulatedMatmul(a, b, fp16).item<float>()));
  EXPECT_EQ(EmulatedMatmul(a, b, AccumulationEmulation{}).item<float>(), 76800.0f);
  // Partial sums beyond FP16 that cancel: FP32 gets 0, FP16 blocks of 8 overflow.
  at::Tensor q = at::full({1, 16}, 100.0f), k = at::full({16, 1}, 100.0f);
  k.narrow(0, 8, 8).fill_(-100.0f);
  EXPECT_EQ(at::matmul(q, k).item<float>(), 0.0f);
  EXPECT_FALSE(std::isfinite(EmulatedMatmul(q, k, fp16).item<float>()));
  fp16.block = 16;  // one block: summed exactly, rounded once
  EXPECT_EQ(EmulatedMatmul(q, k, fp16).item<float>(), 0.0f);
}

TEST(AccumulationEmulationTest, PolicyFlagsSelectTheEmulationOnTheCpuOnly) {
  DtypePolicy p;
  p.allow_tf32 = true;
  p.fp16_reduced_precision_reduction = true;
  p.accumulation_block = 32;
  const AccumulationEmulation cpu = AccumulationOf(p, /*on_cpu=*/true);
  EXPECT_TRUE(cpu.tf32_inputs);
  EXPECT_EQ(cpu.reduced_sum, at::kHalf);
  EXPECT_EQ(cpu.block, 32);
  EXPECT_EQ(cpu.Describe(), "tf32 inputs, fp16 accumulation in blocks of 32");
  EXPECT_FALSE(AccumulationOf(p, /*on_cpu=*/false).active());  // CUDA: the real flags
}

// Whether this CPU's kernels sum BF16 products in BF16 is measured, and a BF16 policy
// widens its products exactly there; the widened product is the FP32 one rounded once.
TEST(AccumulationEmulationTest, Bf16ProductsAreWidenedWhereThisCpusKernelsSumInBf16) {
  const at::Tensor row = at::ones({1, 4096}, at::kBFloat16);
  const bool sums_in_bf16 =
      at::mm(row, at::ones({4096, 1}, at::kBFloat16)).item<float>() != 4096.0f ||
      at::conv1d(row.view({1, 1, 4096}), row.view({1, 1, 4096})).item<float>() != 4096.0f;
  EXPECT_EQ(CpuKernelsSumIn(at::kBFloat16), sums_in_bf16);
  EXPECT_FALSE(CpuKernelsSumIn(at::kFloat));
  DtypePolicy bf16;
  bf16.storage = WeightStorage::kBFloat16;
  bf16.compute = at::kBFloat16;
  const AccumulationEmulation cpu = AccumulationOf(bf16, /*on_cpu=*/true);
  EXPECT_EQ(cpu.widened, sums_in_bf16 ? at::kBFloat16 : c10::ScalarType::Undefined);
  EXPECT_FALSE(cpu.active());
  EXPECT_EQ(AccumulationOf(bf16, /*on_cpu=*/false).widened, c10::ScalarType::Undefined);
  bf16.bf16_reduced_precision_reduction = true;  // the policy's own emulation computes in FP32
  EXPECT_EQ(AccumulationOf(bf16, /*on_cpu=*/true).widened, c10::ScalarType::Undefined);

  AccumulationEmulation widened;
  widened.widened = at::kBFloat16;
  EXPECT_EQ(widened.Describe(), "bf16 products summed in FP32 (this CPU's kernels sum them in bf16)");
  EXPECT_TRUE(Widens(widened, {row, row, at::Tensor()}));
  EXPECT_FALSE(Widens(widened, {row, row.to(at::kFloat)}));  // mixed: the op keeps its dtype error
  EXPECT_FALSE(Widens(AccumulationEmulation(), {row, row}));
  EXPECT_EQ(EmulatedMatmul(row, at::ones({4096, 1}, at::kBFloat16), widened).item<float>(), 4096.0f);
}

}  // namespace
}  // namespace framegate
