#include "pipelines/dtype_policy.h"

#include <gtest/gtest.h>

#include "checks/tolerance.h"

namespace framegate {
namespace {

TEST(DtypePolicyTest, ShippedPresetsParseWithTheirMeaning) {
  for (const char* name :
       {"fp32", "bf16", "fp16", "fp16-fp32norm", "fp16-emulated", "fp8e4m3-bf16", "fp8e5m2-bf16"}) {
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

TEST(DtypePolicyTest, Fp32ModulesMatchAPathOrAnAncestor) {
  DtypePolicy p;
  p.fp32_modules = {"denoiser.blocks.*.ff", "decoder"};
  EXPECT_TRUE(p.InFp32Module("denoiser.blocks.1.ff"));
  EXPECT_TRUE(p.InFp32Module("denoiser.blocks.1.ff.0"));  // inside the island
  EXPECT_TRUE(p.InFp32Module("decoder.conv_out"));
  EXPECT_FALSE(p.InFp32Module("denoiser.blocks.1"));  // the island's parent is not
  EXPECT_FALSE(p.InFp32Module("denoiser.blocks.1.attn"));
  EXPECT_FALSE(p.InFp32Module("decoders"));
  EXPECT_TRUE(p.IsIsland(ModuleKind::kOther, "decoder.up0"));
  EXPECT_EQ(p.ComputeDtypeFor(ModuleKind::kOther, "denoiser.blocks.0.ff.2"), c10::kFloat);
  EXPECT_EQ(ModuleOfWeight("denoiser.blocks.0.ff.0.weight"), "denoiser.blocks.0.ff.0");
}

TEST(DtypePolicyTest, AFileDefinesPoliciesBasedOnAPresetAndTheTableRoundTrips) {
  StatusOr<PolicySet> set = PresetsAndPoliciesOf(
      "name = \"m\"\n[policy.mine]\nbased_on = \"fp16-emulated\"\n"
      "fp32_modules = [\"blocks.*.ff\"]\n",
      "m.toml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  StatusOr<DtypePolicy> mine = FindPolicy("mine", *set);
  ASSERT_TRUE(mine.ok());
  EXPECT_TRUE(mine->emulate_fp16);  // from the preset
  EXPECT_EQ(mine->based_on, "fp16-emulated");
  EXPECT_EQ(mine->ToleranceProfileName(), "fp16-emulated");
  EXPECT_EQ(mine->fp32_modules, std::vector<std::string>{"blocks.*.ff"});
  // What ToToml writes parses back to the same policy.
  StatusOr<PolicySet> again = PresetsAndPoliciesOf(mine->ToToml(), "again.toml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  const DtypePolicy back = *FindPolicy("mine", *again);
  EXPECT_EQ(back.ToToml(), mine->ToToml());
  EXPECT_TRUE(FindPolicy("fp32", *set).ok());  // the presets are there too
}

TEST(DtypePolicyTest, BadPolicyTablesNameTheFileAndThePlace) {
  auto error = [](const std::string& toml) {
    StatusOr<PolicySet> set = PresetsAndPoliciesOf(toml, "p.toml");
    return set.ok() ? std::string("ok") : set.status().message();
  };
  EXPECT_EQ(error("[policy.bf16]\nstorage = \"bf16\"\n"),
            "p.toml:1:1: policy 'bf16' is a preset; give the new policy another name");
  EXPECT_NE(error("[policy.x]\nbased_on = \"fp13\"\n")
                .find("p.toml:2:12: policy 'x': based_on: "
                      "unknown policy 'fp13'"),
            std::string::npos);
  EXPECT_NE(error("[policy.x]\nfp32_modules = []\n").find("p.toml:2:16: policy 'x': fp32_modules"),
            std::string::npos);
  EXPECT_EQ(error("name = \"no policies\"\n"), "ok");
  EXPECT_FALSE(FindPolicyIn("x", "/nonexistent/p.toml").ok());
}

}  // namespace
}  // namespace framegate
