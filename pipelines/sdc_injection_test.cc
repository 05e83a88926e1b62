#include "pipelines/sdc_injection.h"

#include <gtest/gtest.h>

#include <ATen/Functions.h>

#include "pipelines/pipeline_run.h"

namespace framegate {
namespace {

TEST(SdcSpecTest, ParsesADeviceWithAColonAndDefaults) {
  StatusOr<SdcSpec> spec = ParseSdcSpec("cpu:avx512:2");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->device, "cpu:avx512");
  EXPECT_EQ(spec->rate, 2);
  EXPECT_TRUE(spec->persistent);
  EXPECT_EQ(spec->bits, SdcBits::kExponent);
  spec = ParseSdcSpec("cuda:1:0.5:transient:mantissa-low");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->device, "cuda:1");
  EXPECT_FALSE(spec->persistent);
  EXPECT_EQ(spec->bits, SdcBits::kMantissaLow);
  EXPECT_EQ(spec->ToString(), "cuda:1:0.5:transient:mantissa-low");
  spec = ParseSdcSpec("cpu:1:sign");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->device, "cpu");
}

TEST(SdcSpecTest, RejectsWhatIsNotTheGrammarInOneLine) {
  for (const char* bad : {"", "cpu", "3", "cpu:-1", "cpu:1:sometimes", "cpu:1x", "cpu:nan"}) {
    StatusOr<SdcSpec> spec = ParseSdcSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), Status::Code::kInvalidInput);
    EXPECT_NE(spec.status().message().find("--inject-sdc '"), std::string::npos);
    EXPECT_EQ(spec.status().message().find('\n'), std::string::npos);
  }
}

TEST(SdcSpecTest, BitClassesCoverTheDtypesFields) {
  EXPECT_EQ(SdcBitRange(SdcBits::kExponent, 32, 23).low, 23);
  EXPECT_EQ(SdcBitRange(SdcBits::kExponent, 32, 23).high, 30);
  EXPECT_EQ(SdcBitRange(SdcBits::kSign, 16, 7).low, 15);
  EXPECT_EQ(SdcBitRange(SdcBits::kMantissaHigh, 16, 10).low, 5);
  EXPECT_EQ(SdcBitRange(SdcBits::kMantissaLow, 16, 10).high, 4);
  EXPECT_EQ(SdcBitRange(SdcBits::kExponent, 16, 7).low, 7);
}

// The tiny reference pipeline with the injector watching its module outputs.
struct InjectedRun {
  at::Tensor frames;
  std::vector<SdcFlip> flips;
  int64_t outputs = 0;
};
InjectedRun RunTiny(SdcInjector& injector, uint64_t pass_seed, int64_t outputs) {
  PipelineSpec spec;
  spec.size = "tiny";
  spec.policy = *FindPolicy("fp32");
  spec.sampler = SamplerConfig{SamplerKind::kDdim, 2, 4.0};
  if (outputs > 0) injector.Arm(outputs, pass_seed);
  injector.BeginPass();
  const size_t before = injector.flips().size();
  StatusOr<PipelineOutcome> outcome =
      RunPipeline(spec, [&](const ModuleOutput& out) { injector.Observe(out); });
  EXPECT_TRUE(outcome.ok());
  injector.Disarm();
  InjectedRun run{outcome->result.frames, {}, injector.outputs_seen()};
  run.flips.assign(injector.flips().begin() + static_cast<long>(before), injector.flips().end());
  return run;
}

TEST(SdcInjectorTest, FlipsExactlyTheRatePerPassAndTheSameFlipsForTheSameSeed) {
  SdcInjector injector(*ParseSdcSpec("cpu:3:persistent:exponent"));
  const InjectedRun clean = RunTiny(injector, 0, 0);  // counts the outputs
  ASSERT_GT(clean.outputs, 10);
  EXPECT_TRUE(clean.flips.empty());
  const InjectedRun a = RunTiny(injector, 42, clean.outputs);
  const InjectedRun b = RunTiny(injector, 42, clean.outputs);
  const InjectedRun c = RunTiny(injector, 43, clean.outputs);
  ASSERT_EQ(a.flips.size(), 3u);
  EXPECT_TRUE(at::allclose(a.frames, b.frames, 0, 0, /*equal_nan=*/true));  // persistent: the same
  for (size_t i = 0; i < a.flips.size(); ++i) {
    EXPECT_EQ(a.flips[i].module, b.flips[i].module);
    EXPECT_EQ(a.flips[i].bit, b.flips[i].bit);
    EXPECT_GE(a.flips[i].bit, 23);
    EXPECT_LE(a.flips[i].bit, 30);
    EXPECT_NE(a.flips[i].before, a.flips[i].after);
  }
  EXPECT_FALSE(at::allclose(a.frames, clean.frames, 0, 0, true) &&
               at::allclose(c.frames, clean.frames, 0, 0, true));
  ASSERT_EQ(c.flips.size(), 3u);
  EXPECT_FALSE(a.flips[0].module == c.flips[0].module && a.flips[0].element == c.flips[0].element &&
               a.flips[1].module == c.flips[1].module && a.flips[1].element == c.flips[1].element);
}

TEST(SdcInjectorTest, AFractionalRateFlipsInThatShareOfPasses) {
  SdcInjector injector(*ParseSdcSpec("cpu:0.25"));
  int flipped = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    injector.Arm(1000, seed);
    // A pass over 1000 plain outputs.
    injector.BeginPass();
    const size_t before = injector.flips().size();
    const at::Tensor x = at::ones({4});
    for (int k = 0; k < 1000; ++k) injector.Observe({"m", ModuleKind::kOther, 0, x, ""});
    flipped += static_cast<int>(injector.flips().size() - before);
  }
  EXPECT_GT(flipped, 60);  // 100 expected
  EXPECT_LT(flipped, 140);
}

}  // namespace
}  // namespace framegate
