// End to end through RunCell: each field report's fault case gets its status and
// reason, and a clean policy passes against a golden made in the test.
#include "runners/cell_runner.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "golden/golden_store.h"

namespace framegate {
namespace {

class CellRunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (std::filesystem::temp_directory_path() / ("fg_cell_runner_" + std::to_string(::getpid()))).string());
    PipelineSpec spec = ResolveCell(TinyCell("fp32"))->spec;
    ASSERT_TRUE(GoldenStore(*dir_).Make(spec, "test").ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static Cell TinyCell(const std::string& policy, const std::string& fault = "") {
    Cell cell;
    cell.policy = policy;
    cell.fault = fault;
    cell.steps = 4;
    return cell;
  }
  // Resolves and runs `cell` (InvalidInput for a name that does not resolve).
  static StatusOr<CellResult> Run(const Cell& cell, const CellRunOptions& options) {
    StatusOr<ResolvedCell> resolved = ResolveCell(cell);
    if (!resolved.ok()) return resolved.status();
    return RunCell(*resolved, options);
  }
  static CellResult Check(const Cell& cell) {
    CellRunOptions options;
    options.golden_dir = *dir_;
    StatusOr<CellResult> r = Run(cell, options);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : CellResult{};
  }
  static std::string* dir_;
};
std::string* CellRunnerTest::dir_ = nullptr;

TEST_F(CellRunnerTest, CleanPoliciesPassAndFp32IsExact) {
  const CellResult fp32 = Check(TinyCell("fp32"));
  EXPECT_TRUE(fp32.probes.empty());  // range probes are opt-in
  EXPECT_EQ(fp32.status, CellStatus::kPass) << fp32.reason;
  ASSERT_TRUE(fp32.metrics);
  EXPECT_TRUE(std::isinf(fp32.metrics->video.min_psnr));
  CellRunOptions with_probes;
  with_probes.golden_dir = *dir_;
  with_probes.probes = true;
  const CellResult bf16 = *Run(TinyCell("bf16"), with_probes);
  EXPECT_EQ(bf16.status, CellStatus::kPass) << bf16.reason;
  EXPECT_LT(bf16.metrics->video.min_psnr, 200);  // really compared, not the golden itself
  EXPECT_FALSE(bf16.probes.empty());
  EXPECT_EQ(bf16.probes[0].dtype, "bfloat16");
}

// An FP8-storage policy judged by its profile is judged twice: its whole error by the
// FP8 profile, its compute part (against the same FP8 weights computed in FP32) by bf16's.
TEST_F(CellRunnerTest, AnFp8CellIsJudgedByItsProfileAndItsComputePartByBf16s) {
  const CellResult fp8 = Check(TinyCell("fp8e4m3-bf16"));
  EXPECT_EQ(fp8.status, CellStatus::kPass) << fp8.reason;
  EXPECT_EQ(fp8.judged_by,
            "profile fp8e4m3-bf16; compute part: profile bf16 against its fp8e4m3 weights computed in FP32");
  EXPECT_NE(fp8.observed.find("compute part: min_psnr "), std::string::npos) << fp8.observed;
  Cell explicit_profile = TinyCell("fp8e4m3-bf16");
  explicit_profile.tolerance = "fp8e4m3-bf16";
  EXPECT_EQ(Check(explicit_profile).judged_by, "profile fp8e4m3-bf16 (explicit)");
  EXPECT_EQ(Check(TinyCell("bf16")).judged_by, "profile bf16");
}

TEST_F(CellRunnerTest, Fp64ReferenceRatioIsOneForTheGoldenAndAboveOneForBf16) {
  CellRunOptions options;
  options.golden_dir = *dir_;
  options.fp64_ref = true;
  options.probes = false;
  StatusOr<CellResult> fp32 = Run(TinyCell("fp32"), options);
  ASSERT_TRUE(fp32.ok()) << fp32.status().message();
  ASSERT_TRUE(fp32->metrics && fp32->metrics->fp64_error_ratio);
  EXPECT_DOUBLE_EQ(*fp32->metrics->fp64_error_ratio, 1.0);  // the candidate is the golden
  StatusOr<CellResult> bf16 = Run(TinyCell("bf16"), options);
  ASSERT_TRUE(bf16.ok());
  EXPECT_GT(*bf16->metrics->fp64_error_ratio, 10.0);  // bf16 is far worse than FP32's own error
  EXPECT_TRUE(std::isfinite(*bf16->metrics->fp64_error_ratio));
}

TEST_F(CellRunnerTest, F1AndF4AreDtypeMismatchErrorsNamingTheModule) {
  CellResult r = Check(TinyCell("bf16", "time-embed-fp32"));
  EXPECT_EQ(r.status, CellStatus::kError);
  EXPECT_EQ(r.error_class, "dtype_mismatch");
  EXPECT_EQ(r.reason.rfind("dtype_mismatch: mat1 and mat2 must have the same dtype", 0), 0u) << r.reason;
  EXPECT_NE(r.reason.find("time_embed.0"), std::string::npos) << r.reason;
  r = Check(TinyCell("bf16", "input-fp32"));
  EXPECT_EQ(r.status, CellStatus::kError);
  EXPECT_EQ(r.error_class, "dtype_mismatch");
  EXPECT_NE(r.reason.find("patch_embed"), std::string::npos) << r.reason;
}

TEST_F(CellRunnerTest, F5IsAnFp8PromotionError) {
  const CellResult r = Check(TinyCell("fp8e4m3-bf16", "fp8-no-upcast"));
  EXPECT_EQ(r.status, CellStatus::kError);
  EXPECT_EQ(r.error_class, "fp8_promotion");
}

TEST_F(CellRunnerTest, F2AndF3UnderFp16EmulationAreNonfiniteWithStepAndModule) {
  for (const char* fault : {"attn-overflow", "activation-overflow"}) {
    const CellResult r = Check(TinyCell("fp16-emulated", fault));
    EXPECT_EQ(r.status, CellStatus::kNonfinite) << fault << ": " << r.reason;
    ASSERT_TRUE(r.first_nonfinite.found) << fault;
    EXPECT_GE(r.first_nonfinite.step, 0);
    EXPECT_NE(r.reason.find(" at step " + std::to_string(r.first_nonfinite.step) + " in " +
                            r.first_nonfinite.module),
              std::string::npos)
        << r.reason;
    EXPECT_NE(r.health.defect, FrameDefect::kBlack);  // NaN frames are never "black"
  }
  const CellResult attn = Check(TinyCell("fp16-emulated", "attn-overflow"));
  EXPECT_NE(attn.first_nonfinite.module.find("spatial_attn"), std::string::npos)
      << attn.first_nonfinite.module;
  // The remedy: bf16 keeps the same fault finite.
  EXPECT_EQ(Check(TinyCell("bf16", "attn-overflow")).health.defect, FrameDefect::kNone);
}

TEST_F(CellRunnerTest, MissingGoldenIsUnresolvedWithTheCommandThatMakesIt) {
  Cell cell = TinyCell("fp32");
  cell.seed = 99;
  const CellResult r = Check(cell);
  EXPECT_EQ(r.status, CellStatus::kUnresolved);
  EXPECT_NE(r.reason.find("framegate golden make --size tiny --seed 99"), std::string::npos) << r.reason;
}

TEST_F(CellRunnerTest, XfailFlipsAndUnknownNamesAreBadInput) {
  Cell cell = TinyCell("fp16-emulated", "attn-overflow");
  cell.xfail = "F2: known FP16 attention overflow";
  EXPECT_EQ(Check(cell).status, CellStatus::kXfail);
  CellRunOptions options;
  options.golden_dir = *dir_;
  EXPECT_EQ(Run(TinyCell("fp12"), options).status().code(), Status::Code::kInvalidInput);
  EXPECT_EQ(Run(TinyCell("fp32", "gremlins"), options).status().code(), Status::Code::kInvalidInput);
}

}  // namespace
}  // namespace framegate
