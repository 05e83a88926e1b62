#include "pipelines/weight_store.h"

#include <gtest/gtest.h>

#include "pipelines/dtype_audit.h"
#include "pipelines/dtype_policy.h"

namespace framegate {
namespace {

// Under FP8 storage every weight is held as 8-bit codes; with fp8_weights = "linear-conv"
// the reference model's other weights (a bias, a norm's scale: its weights of fewer than 2
// dimensions) are held in the compute dtype, their values the masters rounded to it.
TEST(WeightStoreTest, ALinearConvFp8PolicyHoldsTheOtherWeightsInTheComputeDtype) {
  WeightStore store;
  store.AddNormal("ff.weight", ModuleKind::kOther, {8, 8}, 1.0, 1);
  store.AddConstant("ff.bias", ModuleKind::kOther, {8}, 1e-3);
  DtypePolicy policy = *FindPolicy("fp8e4m3-bf16");
  ASSERT_TRUE(store.Place(policy, c10::Device("cpu")).ok());
  EXPECT_EQ(store.Get("ff.weight").storage, WeightStorage::kFp8E4M3);
  EXPECT_EQ(store.Get("ff.bias").storage, WeightStorage::kFp8E4M3);
  policy.fp8_linear_conv_only = true;
  ASSERT_TRUE(store.Place(policy, c10::Device("cpu")).ok());
  EXPECT_EQ(store.Get("ff.weight").storage, WeightStorage::kFp8E4M3);
  const WeightEntry& bias = store.Get("ff.bias");
  EXPECT_EQ(bias.storage, WeightStorage::kBFloat16);
  EXPECT_FALSE(bias.fp8());
  // 1e-3 is below E4M3's smallest normal (2^-6): its codes would double it (2^-9).
  EXPECT_NEAR(bias.stored.to(at::kFloat)[0].item<float>(), 1e-3, 1e-5);
  // The dtype audit expects what Place stored.
  EXPECT_EQ(ExpectedStoredDtype(policy, ModuleKind::kOther, "ff", /*linear_or_conv_weight=*/true), at::kByte);
  EXPECT_EQ(ExpectedStoredDtype(policy, ModuleKind::kOther, "ff", /*linear_or_conv_weight=*/false),
            at::kBFloat16);
}

}  // namespace
}  // namespace framegate
