#include "checks/numeric_probes.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(NumericProbesTest, FirstNonfiniteIsTheFirstObservedStepAndModule) {
  NumericProbes probes;
  probes.Observe("a", 0, at::ones({4}), c10::kHalf);
  probes.Observe("b", 1, at::tensor({1.0f, std::numeric_limits<float>::infinity()}), c10::kHalf);
  probes.Observe("c", 1, at::tensor({std::nanf("")}), c10::kHalf);
  ASSERT_TRUE(probes.first_nonfinite().found);
  EXPECT_EQ(probes.first_nonfinite().step, 1);
  EXPECT_EQ(probes.first_nonfinite().module, "b");
  EXPECT_EQ(probes.first_nonfinite().count.inf, 1);
}

TEST(NumericProbesTest, HeadroomAndOverflowAgainstTheLimitsDtype) {
  NumericProbes probes;
  probes.Observe("wide", 0, at::tensor({1.0f, -60000.0f, 70000.0f, 1e-6f}), c10::kHalf);
  probes.Observe("small", 0, at::tensor({0.5f, 2.0f}), c10::kHalf);
  probes.Observe("zero", 0, at::zeros({3}), c10::kHalf);
  const std::vector<ModuleProbe> least = probes.LeastHeadroom(2);
  ASSERT_EQ(least.size(), 2u);
  EXPECT_EQ(least[0].module, "wide");
  EXPECT_EQ(least[0].dtype, "float16");
  EXPECT_DOUBLE_EQ(least[0].absmax, 70000.0);
  EXPECT_NEAR(least[0].headroom_bits, std::log2(65504.0 / 70000.0), 1e-12);  // negative: overflowed
  EXPECT_DOUBLE_EQ(least[0].overflow_fraction, 0.25);
  EXPECT_DOUBLE_EQ(least[0].underflow_fraction, 0.25);  // 1e-6 < 6.1e-5
  EXPECT_EQ(least[1].module, "small");
  EXPECT_NEAR(least[1].headroom_bits, std::log2(65504.0 / 2.0), 1e-12);
  EXPECT_FALSE(probes.first_nonfinite().found);
}

TEST(NumericProbesTest, WithoutRangesOnlyLocalises) {
  NumericProbes probes(/*ranges=*/false);
  probes.Observe("a", 3, at::tensor({std::nanf("")}), c10::kFloat);
  EXPECT_TRUE(probes.LeastHeadroom(5).empty());
  EXPECT_EQ(probes.first_nonfinite().step, 3);
}

// A -inf attention mask the FP32 run writes too is not where a failure started: the first
// non-finite is the first output with more NaN or Inf than the FP32 run had at that (step,
// module, op, occurrence); when every one was in FP32 too, the first of them.
TEST(NumericProbesTest, NonfiniteValuesTheFp32RunWritesTooAreNotTheFirst) {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor mask = at::tensor({0.0f, -inf});
  NumericProbes fp32(/*ranges=*/false);
  fp32.KeepNonfiniteOutputs();
  fp32.Observe("blocks.0.cross", 0, mask, c10::kFloat, "aten::masked_fill");
  fp32.Observe("blocks.3.ff", 0, at::ones({2}), c10::kFloat, "aten::linear");

  NumericProbes policy(/*ranges=*/false);
  policy.ExcuseNonfiniteOf(&fp32);
  policy.Observe("blocks.0.cross", 0, mask, c10::kHalf, "aten::masked_fill");
  policy.Observe("blocks.3.ff", 0, at::tensor({inf, 1.0f}), c10::kHalf, "aten::linear");
  ASSERT_TRUE(policy.first_nonfinite().found);
  EXPECT_EQ(policy.first_nonfinite().module, "blocks.3.ff");
  EXPECT_EQ(policy.first_nonfinite().op, "aten::linear");

  NumericProbes more_than_fp32(/*ranges=*/false);  // the mask's op now also overflows
  more_than_fp32.ExcuseNonfiniteOf(&fp32);
  more_than_fp32.Observe("blocks.0.cross", 0, at::tensor({inf, -inf}), c10::kHalf, "aten::masked_fill");
  EXPECT_EQ(more_than_fp32.first_nonfinite().module, "blocks.0.cross");

  NumericProbes only_fp32s(/*ranges=*/false);
  only_fp32s.ExcuseNonfiniteOf(&fp32);
  only_fp32s.Observe("blocks.0.cross", 0, mask, c10::kHalf, "aten::masked_fill");
  ASSERT_TRUE(only_fp32s.first_nonfinite().found);
  EXPECT_EQ(only_fp32s.first_nonfinite().module, "blocks.0.cross");
}

}  // namespace
}  // namespace framegate
