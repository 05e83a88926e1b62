#include "checks/verdict.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

class VerdictTest : public ::testing::Test {
 protected:
  VerdictInputs Finished() {
    VerdictInputs in;
    in.health = &health_;
    in.first_nonfinite = &first_;
    in.metrics = &metrics_;
    in.tolerance = &profile_;
    return in;
  }
  void SetUp() override {
    health_.frames.assign(4, FrameDefect::kNone);
    metrics_.video.min_psnr = 40;
    profile_.bounds = {{"min_psnr", true, 30}};
  }
  FrameHealth health_;
  FirstNonfinite first_;
  ComparisonMetrics metrics_;
  ToleranceProfile profile_;
};

TEST_F(VerdictTest, PassFailAndExpectedFailureFlip) {
  EXPECT_EQ(DecideVerdict(Finished()).status, CellStatus::kPass);
  metrics_.video.min_psnr = 20;
  Verdict v = DecideVerdict(Finished());
  EXPECT_EQ(v.status, CellStatus::kFail);
  EXPECT_EQ(v.reason, "min_psnr 20 < 30");
  VerdictInputs xfail = Finished();
  xfail.expected_to_fail = true;
  EXPECT_EQ(DecideVerdict(xfail).status, CellStatus::kXfail);
  metrics_.video.min_psnr = 40;
  EXPECT_EQ(DecideVerdict(xfail).status, CellStatus::kXpass);
}

// Weights that FP8 storage saturates make a cell FAIL whatever its metrics (the model run
// is not the trained one), after non-finite values and broken frames, with or without a
// golden.
TEST_F(VerdictTest, SaturatedFp8WeightsFailACellWhoseMetricsPass) {
  VerdictInputs in = Finished();
  ASSERT_EQ(DecideVerdict(in).status, CellStatus::kPass);
  in.fp8_out_of_range = "denoiser.proj.weight reaches 821 (6.6% of its values beyond 448)";
  Verdict v = DecideVerdict(in);
  EXPECT_EQ(v.status, CellStatus::kFail);
  EXPECT_EQ(
      v.reason,
      "FP8 storage cannot hold weights: denoiser.proj.weight reaches 821 (6.6% of its values beyond 448)");
  in.metrics = nullptr;
  EXPECT_EQ(DecideVerdict(in).status, CellStatus::kFail);
}

// A cell within its bound whose error a small module makes FAILs naming it, and an
// expected failure it is.
TEST_F(VerdictTest, AnErrorMadeInASmallModuleFailsACellWithinItsBound) {
  VerdictInputs in = Finished();
  ASSERT_EQ(DecideVerdict(in).status, CellStatus::kPass);
  in.made_in_modules = "decoder.blend (0.8% of the weights): kept in FP32, it leaves 0.29 of the error";
  Verdict v = DecideVerdict(in);
  EXPECT_EQ(v.status, CellStatus::kFail);
  EXPECT_EQ(v.reason,
            "error made in decoder.blend (0.8% of the weights): kept in FP32, it leaves 0.29 of the error");
  in.expected_to_fail = true;
  EXPECT_EQ(DecideVerdict(in).status, CellStatus::kXfail);
}

// An FP8-storage policy's compute part fails the cell even where its whole error is
// inside the storage's looser bound; the whole error is reported first.
TEST_F(VerdictTest, TheComputePartFailsACellItsWholeErrorPasses) {
  ComparisonMetrics compute;
  compute.video.min_psnr = 22;
  ToleranceProfile compute_bound;
  compute_bound.bounds = {{"min_psnr", true, 26}};
  VerdictInputs in = Finished();
  in.compute_metrics = &compute;
  in.compute_tolerance = &compute_bound;
  in.compute_reference = "its fp8e4m3 weights computed in FP32";
  Verdict v = DecideVerdict(in);
  EXPECT_EQ(v.status, CellStatus::kFail);
  EXPECT_EQ(v.reason, "compute part: min_psnr 22 < 26 against its fp8e4m3 weights computed in FP32");
  compute.video.min_psnr = 30;
  EXPECT_EQ(DecideVerdict(in).status, CellStatus::kPass);
  metrics_.video.min_psnr = 20;
  EXPECT_EQ(DecideVerdict(in).reason, "min_psnr 20 < 30");
}

TEST_F(VerdictTest, HealthComesBeforeToleranceAndNonfiniteBeforeBroken) {
  health_.defect = FrameDefect::kBlack;
  health_.defect_frames = 4;
  Verdict v = DecideVerdict(Finished());
  EXPECT_EQ(v.status, CellStatus::kBrokenFrames);
  EXPECT_EQ(v.reason, "black: 4 of 4 frames");
  first_ = {true, 3, "blocks.0.spatial_attn.logits", "", {0, 5}};
  health_.step_latents = {{}, {}, {}, {0, 5}};
  health_.first_nonfinite_step = 3;
  v = DecideVerdict(Finished());
  EXPECT_EQ(v.status, CellStatus::kNonfinite);
  EXPECT_EQ(v.reason, "Inf at step 3 in blocks.0.spatial_attn.logits");
}

// An Inf that a probe saw inside a module (--probes) but that a later op absorbed
// (rsqrt(inf) = 0) leaves the latents and frames finite: the verdict is the frames', the
// same with or without probes.
TEST_F(VerdictTest, AProbesInfThatTheRunAbsorbedIsNotNonfinite) {
  first_ = {true, 0, "decoder.mid_norm", "aten::pow", {0, 5}};
  EXPECT_EQ(DecideVerdict(Finished()).status, CellStatus::kPass);
  metrics_.video.min_psnr = 20;
  EXPECT_EQ(DecideVerdict(Finished()).status, CellStatus::kFail);
}

TEST_F(VerdictTest, ErrorUnsupportedAndUnresolved) {
  VerdictInputs in;
  in.run = RunEnd::kError;
  in.error = ClassifyError("mat1 and mat2 must have the same dtype", "time_embed.0");
  Verdict v = DecideVerdict(in);
  EXPECT_EQ(v.status, CellStatus::kError);
  EXPECT_EQ(v.error_class, "dtype_mismatch");
  EXPECT_EQ(v.reason.rfind("dtype_mismatch: mat1 and mat2 must have the same dtype", 0), 0u);
  in.run = RunEnd::kUnsupported;
  in.unsupported = "no fp16 conv on the CPU";
  EXPECT_EQ(DecideVerdict(in).status, CellStatus::kUnsupported);
  VerdictInputs no_golden = Finished();
  no_golden.metrics = nullptr;
  no_golden.unresolved = "no golden";
  EXPECT_EQ(DecideVerdict(no_golden).status, CellStatus::kUnresolved);
}

TEST_F(VerdictTest, LostProcessesAndHarnessErrorsFlipOnceWhenExpectedToFail) {
  VerdictInputs timeout;
  timeout.run = RunEnd::kTimeout;
  timeout.lost = "no result before the timeout";
  Verdict v = DecideVerdict(timeout);
  EXPECT_EQ(v.status, CellStatus::kTimeout);
  EXPECT_EQ(v.reason, "no result before the timeout");
  VerdictInputs crash;
  crash.run = RunEnd::kCrash;
  crash.lost = "killed by SIGSEGV (11)";
  EXPECT_EQ(DecideVerdict(crash).status, CellStatus::kCrash);
  crash.expected_to_fail = true;
  EXPECT_EQ(DecideVerdict(crash).status, CellStatus::kXfail);
  VerdictInputs bad_input;
  bad_input.run = RunEnd::kError;
  bad_input.error.message = "golden/x.safetensors: truncated";
  bad_input.expected_to_fail = true;
  v = DecideVerdict(bad_input);
  EXPECT_EQ(v.status, CellStatus::kXfail);
  EXPECT_EQ(v.error_class, "other");
  VerdictInputs unsupported;
  unsupported.run = RunEnd::kUnsupported;
  unsupported.unsupported = "no GPU";
  unsupported.expected_to_fail = true;
  EXPECT_EQ(DecideVerdict(unsupported).status, CellStatus::kUnsupported);  // not judged: no flip
}

TEST_F(VerdictTest, JudgedResultCarriesTheVerdict) {
  Cell cell;
  cell.policy = "bf16";
  VerdictInputs crash;
  crash.run = RunEnd::kCrash;
  crash.lost = "exited with code 3 without a result";
  const CellResult r = JudgedResult(cell, DecideVerdict(crash));
  EXPECT_EQ(r.status, CellStatus::kCrash);
  EXPECT_EQ(r.reason, "exited with code 3 without a result");
  EXPECT_EQ(r.policy_used, "bf16");
  EXPECT_EQ(r.cell.Id(), cell.Id());
}

}  // namespace
}  // namespace framegate
