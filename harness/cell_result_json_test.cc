#include "harness/cell_result_json.h"

#include <cmath>

#include <gtest/gtest.h>

namespace framegate {
namespace {

CellResult SampleResult() {
  CellResult r;
  r.cell.policy = "fp16-emulated";
  r.cell.seed = 7;
  r.cell.fault = "attn-overflow";
  r.cell.requirements = {"bf16"};
  r.status = CellStatus::kNonfinite;
  r.reason = "NaN at step 2 in blocks.0.spatial_attn.logits";
  ComparisonMetrics m;
  m.video.frames = {{INFINITY, 1.0}, {31.5, 0.98}};
  m.video.min_psnr = 31.5;
  m.video.rel_l2 = 0.01;
  m.latent_cosine = 0.999;
  r.metrics = m;
  r.health.step_latents = {{0, 0}, {3, 1}};
  r.health.first_nonfinite_step = 1;
  r.health.frames = {FrameDefect::kNone, FrameDefect::kNonfinite};
  r.health.defect = FrameDefect::kNonfinite;
  r.health.defect_frames = 1;
  r.first_nonfinite = {true, 1, "blocks.0.spatial_attn.logits", "", {3, 1}};
  r.probes = {{"blocks.0.ff", "float16", 70000, 0.25, 0.0, -0.1}};
  r.timings.generation_seconds = {1.0, 1.1};
  r.repro = "framegate check --policy fp16-emulated";
  r.error_float32_origin = "denoiser.embed:aten::to";
  return r;
}

TEST(CellResultJsonTest, RoundTripsEveryField) {
  const CellResult r = SampleResult();
  const nlohmann::json j = CellResultToJson(r);
  EXPECT_EQ(j["status"], "NONFINITE");
  EXPECT_EQ(j["cell_id"], r.cell.Id());
  EXPECT_TRUE(j["metrics"]["frames"][0]["psnr"].is_null());  // +inf PSNR is null
  StatusOr<CellResult> back = CellResultFromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(CellResultToJson(*back), j);
  EXPECT_TRUE(std::isinf(back->metrics->video.frames[0].psnr));
  EXPECT_EQ(back->first_nonfinite.module, "blocks.0.spatial_attn.logits");
  EXPECT_EQ(back->error_float32_origin, "denoiser.embed:aten::to");
}

TEST(CellResultJsonTest, NanPsnrIsNeverReadBackAsAPerfectScore) {
  CellResult r = SampleResult();
  r.metrics->video.frames[1].psnr = NAN;
  r.metrics->video.rel_l2 = INFINITY;
  const nlohmann::json j = CellResultToJson(r);
  EXPECT_EQ(j["metrics"]["frames"][1]["psnr"], "NaN");
  StatusOr<CellResult> back = CellResultFromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(std::isnan(back->metrics->video.frames[1].psnr));
  EXPECT_TRUE(std::isinf(back->metrics->video.rel_l2));
}

TEST(CellResultJsonTest, MissingKeyAndUnknownStatusAreErrors) {
  nlohmann::json j = CellResultToJson(SampleResult());
  j.erase("health");
  EXPECT_EQ(CellResultFromJson(j).status().code(), Status::Code::kInvalidInput);
  j = CellResultToJson(SampleResult());
  j["status"] = "MAYBE";
  StatusOr<CellResult> r = CellResultFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("MAYBE"), std::string::npos);
}

TEST(CellResultJsonTest, AnAdviceKeepsWhetherItsIslandsAreVerified) {
  Advice a;
  a.status_before = CellStatus::kFail;
  a.status_after = CellStatus::kPass;
  a.islands = {"denoiser.blocks.1.attn:aten::matmul"};
  a.runs = {{{}, CellStatus::kFail, "min_psnr 34 < 46.8"}, {a.islands, CellStatus::kPass, ""}};
  a.runs.back().seed = 1;
  a.note = "the islands pass at seed 0 but do not hold at seed 1: FAIL (min_psnr 34 < 46.8)";
  a.verified = false;
  const Advice back = AdviceFromJson(AdviceToJson(a));
  EXPECT_FALSE(back.verified);
  EXPECT_TRUE(back.found());
  EXPECT_EQ(back.note, a.note);
  EXPECT_EQ(back.runs.back().seed, std::optional<uint64_t>(1));
  // Advice written before `verified` existed has no such key: read as verified.
  nlohmann::json j = AdviceToJson(a);
  j.erase("verified");
  EXPECT_TRUE(AdviceFromJson(j).verified);
}

}  // namespace
}  // namespace framegate
