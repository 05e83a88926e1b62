#include "pipelines/dtype_policy.h"

#include <gtest/gtest.h>

#include "harness/checks/tolerance.h"

namespace framegate {
namespace {

TEST(DtypePolicyTest, ShippedPresetsParseWithTheirMeaning) {
  for (const char* name : {"fp32", "bf16", "fp16", "fp16-fp32norm", "fp16-emulated",
                           "fp8e4m3-bf16", "fp8e5m2-bf16"}) {
    EXPECT_TRUE(FindPolicy(name).ok()) << name;
  }
  ASSERT_GE(PresetPolicies().size(), 7u);
  const DtypePolicy norm = *FindPolicy("fp16-fp32norm");
  EXPECT_EQ(norm.compute, c10::kHalf);
  EXPECT_TRUE(norm.IsIsland(ModuleKind::kNorm));
  EXPECT_TRUE(norm.IsIsland(ModuleKind::kSoftmax));
  EXPECT_TRUE(norm.IsIsland(ModuleKind::kTimeEmbed));
  EXPECT_FALSE(norm.IsIsland(ModuleKind::kOther));
  EXPECT_EQ(norm.ComputeDtypeFor(ModuleKind::kNorm), c10::kFloat);
  EXPECT_TRUE(FindPolicy("fp16-emulated")->emulate_fp16);
  EXPECT_EQ(FindPolicy("fp8e4m3-bf16")->storage, WeightStorage::kFp8E4M3);
  EXPECT_EQ(FindPolicy("fp8e4m3-bf16")->compute, c10::kBFloat16);
  // The fallback chain fp16 -> fp16-fp32norm -> bf16 -> fp32 is data.
  EXPECT_EQ(FindPolicy("fp16")->fallback, "fp16-fp32norm");
  EXPECT_EQ(FindPolicy("fp16-fp32norm")->fallback, "bf16");
  EXPECT_EQ(FindPolicy("bf16")->fallback, "fp32");
}

TEST(DtypePolicyTest, Fp8WeightsTakeAQuarterOfFp32) {
  EXPECT_EQ(WeightBytes(*FindPolicy("fp8e4m3-bf16"), 1000) * 4, WeightBytes(Fp32Policy(), 1000));
  EXPECT_EQ(WeightBytes(*FindPolicy("bf16"), 1000) * 2, WeightBytes(Fp32Policy(), 1000));
}

TEST(DtypePolicyTest, ErrorsNameTheSourceTheLineAndTheProblem) {
  StatusOr<PolicySet> r = ParsePolicies("[policy.x]\nstorage = \"fp12\"\n", "m.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m.toml:2:"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("storage must be one of"), std::string::npos);
  r = ParsePolicies("[policy.x]\ncolour = 1\n", "m.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key 'colour'"), std::string::npos);
  r = ParsePolicies("[policy.x]\nfallback = \"nope\"\n", "m.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fallback 'nope' is not a policy"), std::string::npos);
  r = ParsePolicies("[policy.x\n", "m.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m.toml:1:"), std::string::npos);
  EXPECT_FALSE(FindPolicy("fp13").ok());
}

TEST(DtypePolicyTest, EveryPresetPolicyHasAShippedToleranceProfile) {
  for (const DtypePolicy& p : PresetPolicies()) {
    EXPECT_TRUE(FindToleranceProfile(p.name).ok()) << p.name;
  }
  EXPECT_EQ(FindToleranceProfile("nope").status().code(), Status::Code::kInvalidInput);
}

}  // namespace
}  // namespace framegate
