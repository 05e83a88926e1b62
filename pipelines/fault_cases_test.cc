// Each fault case reproduces its field report, and the remedy policy makes it go away.
#include "pipelines/fault_cases.h"

#include <gtest/gtest.h>

#include <ATen/Functions.h>

#include "harness/torch_version.h"
#include "pipelines/pipeline_run.h"

namespace framegate {
namespace {

PipelineOutcome RunTiny(const std::string& policy, FaultCase fault, int steps = 0) {
  PipelineSpec spec;
  spec.policy = *FindPolicy(policy);
  spec.fault = fault;
  if (steps > 0) spec.sampler = SamplerConfig{SamplerKind::kDdim, steps, 4.0};
  StatusOr<PipelineOutcome> outcome = RunPipeline(spec);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  return *outcome;
}

bool AllFinite(const PipelineOutcome& o) {
  return at::isfinite(o.result.latents).all().item<bool>() &&
         at::isfinite(o.result.decoded).all().item<bool>();
}

TEST(FaultCaseTest, NamesRoundTrip) {
  ASSERT_EQ(FaultCases().size(), 6u);
  for (const FaultCaseInfo& info : FaultCases()) EXPECT_EQ(ParseFaultCase(info.name), info.fault);
  EXPECT_EQ(ParseFaultCase(""), FaultCase::kNone);
  EXPECT_FALSE(ParseFaultCase("melt-gpu").has_value());
}

TEST(FaultCaseTest, F1TimeEmbedLeftInFp32RaisesDtypeMismatchInTimeEmbed) {
  const PipelineOutcome o = RunTiny("bf16", FaultCase::kTimeEmbedFp32, 1);
  ASSERT_EQ(o.kind, RunEnd::kError);
  EXPECT_EQ(o.error.cls, ErrorClass::kDtypeMismatch);
  EXPECT_NE(o.error.message.find("mat1 and mat2 must have the same dtype"), std::string::npos);
  EXPECT_EQ(o.error.module, "time_embed.0");
  EXPECT_EQ(RunTiny("fp32", FaultCase::kTimeEmbedFp32, 1).kind, RunEnd::kFinished);
}

TEST(FaultCaseTest, F4Fp32InputIntoBf16Conv3dRaisesDtypeMismatchInPatchEmbed) {
  const PipelineOutcome o = RunTiny("bf16", FaultCase::kInputFp32, 1);
  ASSERT_EQ(o.kind, RunEnd::kError);
  EXPECT_EQ(o.error.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(o.error.module, "patch_embed");
}

// A real FP16 run raises F1 and F4 as bf16 does; the FP16 emulation (float32 compute)
// knows the dtypes that run would hold and raises them too.
TEST(FaultCaseTest, F1AndF4RaiseTheirDtypeMismatchUnderFp16Emulation) {
  const PipelineOutcome f1 = RunTiny("fp16-emulated", FaultCase::kTimeEmbedFp32, 1);
  ASSERT_EQ(f1.kind, RunEnd::kError);
  EXPECT_EQ(f1.error.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(f1.error.module, "time_embed.0");
  const PipelineOutcome f4 = RunTiny("fp16-emulated", FaultCase::kInputFp32, 1);
  ASSERT_EQ(f4.kind, RunEnd::kError);
  EXPECT_EQ(f4.error.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(f4.error.module, "patch_embed");
  EXPECT_EQ(RunTiny("fp16-emulated", FaultCase::kNone, 1).kind, RunEnd::kFinished);
}

TEST(FaultCaseTest, F5Fp8WithoutUpcastIsRefusedAsFp8Promotion) {
  const PipelineOutcome o = RunTiny("fp8e4m3-bf16", FaultCase::kFp8NoUpcast, 1);
  ASSERT_EQ(o.kind, RunEnd::kError);
  EXPECT_EQ(o.error.cls, ErrorClass::kFp8Promotion);
  if (kHasNativeFloat8) {
    // LibTorch's own promotion error, word for word (framegate's own names the weight).
    EXPECT_EQ(o.error.message,
              "Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and BFloat16");
  } else {
    EXPECT_EQ(o.error.message.rfind("Promotion for Float8 Types is not supported, attempted to promote "
                                    "Float8_e4m3fn and BFloat16 (weight ",
                                    0),
              0u)
        << o.error.message;
  }
  // The remedy: the same storage with the upcast at use runs.
  EXPECT_EQ(RunTiny("fp8e4m3-bf16", FaultCase::kNone, 1).kind, RunEnd::kFinished);
}

TEST(FaultCaseTest, F2AttentionOverflowIsNonFiniteUnderFp16AndFineInBf16AndFp32) {
  const PipelineOutcome fp16 = RunTiny("fp16-emulated", FaultCase::kAttnOverflow);
  ASSERT_EQ(fp16.kind, RunEnd::kFinished);
  EXPECT_FALSE(AllFinite(fp16));
  for (const char* remedy : {"bf16", "fp32"}) {
    const PipelineOutcome ok = RunTiny(remedy, FaultCase::kAttnOverflow);
    ASSERT_EQ(ok.kind, RunEnd::kFinished) << remedy;
    EXPECT_TRUE(AllFinite(ok)) << remedy;
  }
}

TEST(FaultCaseTest, F2AccumulationIsNonFiniteWithFp16AccumulationOnlyAtTheSameDtypes) {
  // Same storage and compute (FP16 emulated); only the accumulation differs.
  const PipelineOutcome fp16_accumulation =
      RunTiny("fp16-emulated-fp16-accum", FaultCase::kAttnFp16Accumulation);
  ASSERT_EQ(fp16_accumulation.kind, RunEnd::kFinished);
  EXPECT_FALSE(AllFinite(fp16_accumulation));
  for (const char* fine : {"fp16-emulated", "fp32"}) {
    const PipelineOutcome ok = RunTiny(fine, FaultCase::kAttnFp16Accumulation);
    ASSERT_EQ(ok.kind, RunEnd::kFinished) << fine;
    EXPECT_TRUE(AllFinite(ok)) << fine;
  }
  // The healthy model accumulates in FP16 without harm.
  EXPECT_TRUE(AllFinite(RunTiny("fp16-emulated-fp16-accum", FaultCase::kNone)));
}

TEST(FaultCaseTest, F3ActivationOverflowIsNonFiniteUnderFp16AndFineInBf16) {
  const PipelineOutcome fp16 = RunTiny("fp16-emulated", FaultCase::kActivationOverflow);
  ASSERT_EQ(fp16.kind, RunEnd::kFinished);
  EXPECT_FALSE(AllFinite(fp16));
  const PipelineOutcome bf16 = RunTiny("bf16", FaultCase::kActivationOverflow);
  ASSERT_EQ(bf16.kind, RunEnd::kFinished);
  EXPECT_TRUE(AllFinite(bf16));
}

TEST(PolicyRunTest, EveryPresetRunsTinyOrIsUnsupportedNamingTheOp) {
  for (const DtypePolicy& policy : PresetPolicies()) {
    const PipelineOutcome o = RunTiny(policy.name, FaultCase::kNone, 2);
    if (policy.compute == c10::kHalf && !kCpuHasFp16Compute) {
      // LibTorch before 2.2 (1.13) has no FP16 convolution/matmul on the CPU.
      ASSERT_EQ(o.kind, RunEnd::kUnsupported) << policy.name;
      EXPECT_EQ(o.error.cls, ErrorClass::kUnsupportedOp);
      EXPECT_NE(o.unsupported.find("not implemented for 'Half'"), std::string::npos);
      EXPECT_FALSE(o.error.op.empty());
    } else {
      ASSERT_EQ(o.kind, RunEnd::kFinished) << policy.name << ": " << o.error.Reason();
      EXPECT_TRUE(AllFinite(o)) << policy.name;
      EXPECT_EQ(o.result.frames.size(0), 8);
    }
  }
}

TEST(PolicyRunTest, Fp8StoredWeightsTakeAQuarterOfFp32Bytes) {
  const PipelineOutcome fp32 = RunTiny("fp32", FaultCase::kNone, 1);
  const PipelineOutcome fp8 = RunTiny("fp8e4m3-bf16", FaultCase::kNone, 1);
  EXPECT_EQ(fp8.weight_bytes * 4, fp32.weight_bytes);
}

// LibTorch 1.13: the CPU has the math path only. 2.2 on: SDPA's math and flash kernels,
// two real values of the axis whose frames differ (and both stay near FP32's own path).
TEST(PolicyRunTest, TheCpuAttentionBackendsAreThoseThisLibTorchHas) {
  PipelineSpec spec;
  spec.policy = Fp32Policy();
  spec.sampler = SamplerConfig{SamplerKind::kDdim, 2, 4.0};
  StatusOr<PipelineOutcome> plain = RunPipeline(spec);
  ASSERT_TRUE(plain.ok());
  spec.policy.attention_backend = "flash";
  StatusOr<PipelineOutcome> flash = RunPipeline(spec);
  ASSERT_TRUE(flash.ok());
  spec.policy.attention_backend = "math";
  StatusOr<PipelineOutcome> math = RunPipeline(spec);
  ASSERT_TRUE(math.ok());
  ASSERT_EQ(math->kind, RunEnd::kFinished);
  spec.policy.attention_backend = "cudnn";
  StatusOr<PipelineOutcome> cudnn = RunPipeline(spec);
  ASSERT_TRUE(cudnn.ok());
  EXPECT_EQ(cudnn->kind, RunEnd::kUnsupported);
  if (!kCpuHasFlashAttention) {
    EXPECT_EQ(flash->kind, RunEnd::kUnsupported);
    EXPECT_EQ(flash->unsupported,
              "attention backend 'flash': the CPU build has only the math attention path");
    EXPECT_EQ(math->observed, "attention: math (the CPU build's only path)");
    return;
  }
  ASSERT_EQ(flash->kind, RunEnd::kFinished);
  EXPECT_EQ(flash->observed, "attention: flash (SDPA on the CPU)");
  EXPECT_EQ(math->observed, "attention: math (SDPA on the CPU)");
  EXPECT_EQ(cudnn->unsupported,
            "attention backend 'cudnn': the CPU has only the math and flash attention paths");
  const at::Tensor& a = math->result.frames;
  const at::Tensor& b = flash->result.frames;
  EXPECT_FALSE(at::equal(a, b));  // two kernels, two results
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-3);
  EXPECT_LT((a - plain->result.frames).abs().max().item<double>(), 1e-3);
}

TEST(PolicyRunTest, EmulatedAccumulationIsRecordedWithTheCell) {
  PipelineSpec spec;
  spec.policy = *FindPolicy("tf32");
  spec.sampler = SamplerConfig{SamplerKind::kDdim, 1, 4.0};
  StatusOr<PipelineOutcome> tf32 = RunPipeline(spec);
  ASSERT_TRUE(tf32.ok());
  EXPECT_EQ(tf32->observed, "accumulation emulated on the CPU: tf32 inputs");
}

}  // namespace
}  // namespace framegate
