#include "pipelines/dtype_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

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

TEST(DtypePolicyTest, AnEntryNamingAWeightKeepsThatWeightAloneInFp32) {
  DtypePolicy p;
  p.fp32_modules = {"denoiser.blocks.*.ff", "decoder.alpha"};
  EXPECT_TRUE(p.KeepsWeightInFp32("denoiser.blocks.1.ff.0.weight"));  // its module's island
  EXPECT_TRUE(p.KeepsWeightInFp32("decoder.alpha"));
  EXPECT_FALSE(p.KeepsWeightInFp32("decoder.beta"));  // the root's other weights are not
  EXPECT_FALSE(p.KeepsWeightInFp32("decoder.alpha2"));
  EXPECT_FALSE(p.InFp32Module("decoder"));  // nor its ops: a weight is no module island
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

// A policy without based_on is judged by the profile its flags imply, or by its
// `tolerance` key; a name that is no profile, or flags no preset has, are refused at parse
// time with the place (issue 22: such policies parsed, then every cell was ERROR).
TEST(DtypePolicyTest, APolicyWithoutBasedOnTakesTheProfileItsFlagsImply) {
  auto profile = [](const std::string& body) {
    StatusOr<PolicySet> set = PresetsAndPoliciesOf("[policy.x]\n" + body, "p.toml");
    if (!set.ok()) return "error: " + set.status().message();
    return FindPolicy("x", *set)->ToleranceProfileName();
  };
  EXPECT_EQ(profile("storage = \"fp8e4m3\"\ncompute = \"bf16\"\n"), "fp8e4m3-bf16");
  EXPECT_EQ(profile("storage = \"fp8e5m2\"\ncompute = \"bf16\"\n"), "fp8e5m2-bf16");
  EXPECT_EQ(profile("storage = \"bf16\"\ncompute = \"bf16\"\nfp32_modules = [\"decoder\"]\n"), "bf16");
  EXPECT_EQ(profile("compute = \"bf16\"\n"), "bf16");
  EXPECT_EQ(profile("storage = \"bf16\"\n"), "bf16");
  EXPECT_EQ(profile("emulate_fp16 = true\n"), "fp16-emulated");
  EXPECT_EQ(profile("emulate_fp16 = true\nfp16_reduced_precision_reduction = true\n"),
            "fp16-emulated-fp16-accum");
  EXPECT_EQ(profile("storage = \"fp16\"\ncompute = \"fp16\"\nfp32_islands = [\"norm\"]\n"), "fp16");
  EXPECT_EQ(profile("allow_tf32 = true\n"), "tf32");
  EXPECT_EQ(profile("fp32_modules = [\"blocks.*\"]\n"), "fp32");
  EXPECT_EQ(profile("compute = \"bf16\"\ntolerance = \"fp8e5m2-bf16\"\n"), "fp8e5m2-bf16");
  EXPECT_EQ(profile("based_on = \"bf16\"\ntolerance = \"fp32\"\n"), "fp32");
  EXPECT_EQ(
      profile("compute = \"bf16\"\ntolerance = \"tight\"\n")
          .rfind("error: p.toml:3:13: policy 'x': tolerance: unknown tolerance profile 'tight' (known: ", 0),
      0u);
  EXPECT_EQ(profile("storage = \"bf16\"\ncompute = \"fp16\"\n"),
            "error: p.toml:1:1: policy 'x': no tolerance profile is implied by storage bf16, compute "
            "fp16; set tolerance = \"PROFILE\" or based_on = \"PRESET\"");
  // The key round-trips through ToToml.
  StatusOr<PolicySet> set =
      PresetsAndPoliciesOf("[policy.x]\ncompute = \"bf16\"\ntolerance = \"fp32\"\n", "p.toml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  const DtypePolicy x = *FindPolicy("x", *set);
  EXPECT_NE(x.ToToml().find("tolerance = \"fp32\"\n"), std::string::npos) << x.ToToml();
  StatusOr<PolicySet> again = PresetsAndPoliciesOf(x.ToToml(), "again.toml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(FindPolicy("x", *again)->ToToml(), x.ToToml());
  EXPECT_EQ(FindPolicy("x", *again)->ToleranceProfileName(), "fp32");
  // Presets keep their own profiles.
  for (const DtypePolicy& p : PresetPolicies()) EXPECT_EQ(p.ToleranceProfileName(), p.name);
}

// `fp8_weights = "linear-conv"`: an FP8 policy whose other parameters (biases, norm
// weights, scalars) stay in the compute dtype; it is judged as its FP8 preset,
// round-trips, and is refused on a storage that is not FP8.
TEST(DtypePolicyTest, Fp8WeightsLinearConvStoresOnlyTheirWeightsInFp8) {
  StatusOr<PolicySet> set = PresetsAndPoliciesOf(
      "[policy.x]\nbased_on = \"fp8e4m3-bf16\"\nfp8_weights = \"linear-conv\"\n", "p.toml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  const DtypePolicy x = *FindPolicy("x", *set);
  EXPECT_TRUE(x.fp8_linear_conv_only);
  EXPECT_EQ(x.ToleranceProfileName(), "fp8e4m3-bf16");
  EXPECT_TRUE(x.StoresInFp8(true));
  EXPECT_FALSE(x.StoresInFp8(false));
  EXPECT_TRUE(FindPolicy("fp8e4m3-bf16")->StoresInFp8(false));
  EXPECT_FALSE(FindPolicy("bf16")->StoresInFp8(true));
  StatusOr<PolicySet> again = PresetsAndPoliciesOf(x.ToToml(), "again.toml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(FindPolicy("x", *again)->ToToml(), x.ToToml());
  EXPECT_NE(x.ToToml().find("fp8_weights = \"linear-conv\"\n"), std::string::npos) << x.ToToml();
  const auto error = [](const std::string& toml) {
    StatusOr<PolicySet> bad = PresetsAndPoliciesOf(toml, "p.toml");
    return bad.ok() ? std::string("ok") : bad.status().message();
  };
  EXPECT_EQ(error("[policy.x]\nbased_on = \"bf16\"\nfp8_weights = \"linear-conv\"\n"),
            "p.toml:1:1: policy 'x': fp8_weights needs storage = \"fp8e4m3\" or \"fp8e5m2\"");
  EXPECT_EQ(error("[policy.x]\nbased_on = \"fp8e5m2-bf16\"\nfp8_weights = \"biases\"\n"),
            "p.toml:3:15: policy 'x': fp8_weights must be one of all, linear-conv");
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

TEST(DtypePolicyTest, PolicyNamesFollowTheNameRule) {
  auto error = [](const std::string& toml) {
    StatusOr<PolicySet> set = PresetsAndPoliciesOf(toml, "p.toml");
    return set.ok() ? std::string("ok") : set.status().message();
  };
  const std::string rule = "' must be 1 to 64 characters of A-Z a-z 0-9 . _ + - (not . or ..)";
  EXPECT_EQ(error("[policy.\"/../../../tmp/victim\"]\nstorage = \"fp32\"\n"),
            "p.toml:1:9: policy name '/../../../tmp/victim" + rule);
  EXPECT_EQ(error("[policy.\"half emu $(touch PWNED)\"]\n"),
            "p.toml:1:9: policy name 'half emu $(touch PWNED)" + rule);
  EXPECT_EQ(error("\n[policy.\".\"]\n"), "p.toml:2:9: policy name '." + rule);
  EXPECT_EQ(error("[policy.\"\"]\n").substr(0, 27), "p.toml:1:9: policy name '' ");
  EXPECT_EQ(error("[policy.\"ok-name_1.5+x\"]\nstorage = \"fp32\"\n"), "ok");
  // The shipped presets are read by the same code: the file is tested.
  EXPECT_EQ(PresetPolicies().size(), 10u);
}

TEST(DtypePolicyTest, FallbackCyclesAreRefusedAtTheFallbackKey) {
  auto error = [](const std::string& toml) {
    StatusOr<PolicySet> set = PresetsAndPoliciesOf(toml, "p.toml");
    return set.ok() ? std::string("ok") : set.status().message();
  };
  const std::string never = " (`run --fallback` would never end)";
  EXPECT_EQ(error("[policy.loop]\nbased_on = \"fp16-emulated\"\nfallback = \"loop\"\n"),
            "p.toml:3:12: policy 'loop': fallback cycle loop -> loop" + never);
  EXPECT_EQ(
      error("[policy.a]\nfallback = \"b\"\n[policy.b]\nfallback = \"c\"\n[policy.c]\nfallback = \"a\"\n"),
      "p.toml:2:12: policy 'a': fallback cycle a -> b -> c -> a" + never);
  // Through a preset: b falls back to a preset whose chain ends (fp16 -> ... -> fp32).
  EXPECT_EQ(error("[policy.a]\nfallback = \"b\"\n[policy.b]\nbased_on = \"fp16\"\n"), "ok");
  // In a set without presets (how policies.toml itself is read) a cycle is refused too.
  StatusOr<PolicySet> presets =
      ParsePolicies("[policy.x]\nfallback = \"y\"\n[policy.y]\nfallback = \"x\"\n", "q.toml");
  ASSERT_FALSE(presets.ok());
  EXPECT_EQ(presets.status().message(), "q.toml:2:12: policy 'x': fallback cycle x -> y -> x" + never);
  // Every preset's chain ends.
  for (const DtypePolicy& p : PresetPolicies()) {
    std::string name = p.name;
    for (int step = 0; step < 20 && !name.empty(); ++step) name = FindPolicy(name)->fallback;
    EXPECT_TRUE(name.empty()) << p.name;
  }
}

// A policy file is parsed once per process: what a run resolved does not change when
// the file changes or vanishes under it.
TEST(DtypePolicyTest, APolicyFileIsReadOncePerProcess) {
  const std::string path = ::testing::TempDir() + "/fg_policies_" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path) << "[policy.mine]\nbased_on = \"bf16\"\n";
  StatusOr<DtypePolicy> first = FindPolicyIn("mine", path);
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::ofstream(path) << "[policy.mine]\nstorage = \"no such dtype\"\n";
  EXPECT_TRUE(FindPolicyIn("mine", path).ok());
  std::remove(path.c_str());
  StatusOr<DtypePolicy> again = FindPolicyIn("mine", path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->based_on, "bf16");
  EXPECT_TRUE(PresetsAndPoliciesOfFile(path).status().code() == Status::Code::kNotFound);  // reads now
  // What a matrix parse remembers is what its cells' lookups find.
  RememberPoliciesOfFile(path, *PresetsAndPoliciesOf("[policy.other]\n", path));
  EXPECT_FALSE(FindPolicyIn("mine", path).ok());
  EXPECT_TRUE(FindPolicyIn("other", path).ok());
}

}  // namespace
}  // namespace framegate
