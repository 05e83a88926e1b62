#include "checks/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace framegate {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

const ToleranceBound* BoundOn(const ToleranceProfile& p, const std::string& metric) {
  for (const ToleranceBound& b : p.bounds) {
    if (b.metric == metric) return &b;
  }
  return nullptr;
}

TEST(CalibrationTest, TheBoundIsTwiceTheReferenceErrorPlusTheNoiseFloor) {
  // Errors scale as they are.
  EXPECT_NEAR(CalibratedBound("rel_l2", 0.01, 0.001, 2.0), 0.021, 1e-12);
  EXPECT_NEAR(CalibratedBound("max_abs", 0.1, 0.0, 2.0), 0.2 + kCalibrationNoiseMinimum, 1e-12);
  // PSNR: twice the RMS error is 6.02 dB less; the noise adds its RMS error.
  EXPECT_NEAR(CalibratedBound("min_psnr", 40.0, kInf, 2.0), 40.0 - 20 * std::log10(2.0), 1e-3);
  const double with_noise = -20 * std::log10(2 * 0.01 + 0.001);  // 40 dB and 60 dB
  EXPECT_NEAR(CalibratedBound("min_psnr", 40.0, 60.0, 2.0), with_noise, 1e-9);
  // Similarities: their distance from 1, the square of an error: 2x the error is 4x it.
  EXPECT_NEAR(CalibratedBound("latent_cosine", 0.999, 1.0, 2.0), 1 - 0.004 - kCalibrationNoiseMinimum, 1e-12);
  EXPECT_NEAR(CalibratedBound("mean_ssim", 0.99, 0.9999, 2.0), 1 - 0.04 - 0.0001, 1e-12);
  EXPECT_NEAR(CalibratedBound("min_ssim", 0.99, 1.0, 3.0), 1 - 0.09 - kCalibrationNoiseMinimum, 1e-12);
  EXPECT_EQ(CalibratedBound("latent_cosine", 0.7, 1.0, 2.0), 0.0);  // 4 x 0.3: no bound below 0
  // An exact model (fp32 against its own golden) still allows float32's resolution.
  EXPECT_NEAR(CalibratedBound("min_psnr", kInf, kInf, 2.0), 120.0, 1e-9);
  EXPECT_TRUE(std::isnan(CalibratedBound("fp64_error_ratio", 1, 1, 2)));
}

TEST(CalibrationTest, KeepWorstKeepsTheLowestSimilarityAndTheHighestError) {
  std::vector<NamedMetric> worst;
  ComparisonMetrics a, b;
  a.video.min_psnr = 40, a.video.rel_l2 = 0.01, a.latent_cosine = 0.999;
  b.video.min_psnr = 45, b.video.rel_l2 = 0.02, b.latent_cosine = 0.998;
  KeepWorst(a, &worst);
  KeepWorst(b, &worst);
  auto value = [&](const std::string& name) {
    for (const NamedMetric& m : worst) {
      if (m.name == name) return m.value;
    }
    return -1.0;
  };
  EXPECT_EQ(value("min_psnr"), 40);
  EXPECT_EQ(value("rel_l2"), 0.02);
  EXPECT_EQ(value("latent_cosine"), 0.998);
  EXPECT_EQ(value("fp64_error_ratio"), -1.0);
}

Calibration Example() {
  Calibration c;
  c.pipeline = "model:clean";
  c.weights = "denoiser=0123456789abcdef,decoder=fedcba9876543210";
  c.config = "sampler=ddim|steps=8|guidance=5";
  c.framegate_version = "0.1.0";
  c.created_at = "2025-01-01T00:00:00Z";
  c.model_sha256 = {{"model.toml", "aa"}, {"denoiser.pt", "bb"}, {"decoder.pt", "cc"}};
  c.golden_sha256 = {{"model-clean-seed0-12345678.safetensors", "dd"}};
  c.noise_runs = {"cpu threads=1", "cpu:avx2 threads=2"};
  c.noise_floor = {{"min_psnr", kInf}, {"rel_l2", 0.0}, {"latent_cosine", 1.0}};
  c.policies["bf16"] = {{0, 1, 2}, {{"min_psnr", 45.5}, {"rel_l2", 0.01}, {"latent_cosine", 0.9995}}, ""};
  c.policies["fp16"] = {{0}, {}, "UNSUPPORTED: no fp16 kernels"};
  return c;
}

TEST(CalibrationTest, TheFileRoundTripsAndGivesTheCalibratedProfile) {
  const Calibration c = Example();
  StatusOr<Calibration> back = ParseCalibration(CalibrationToToml(c), "cal.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(CalibrationToToml(*back), CalibrationToToml(c));
  EXPECT_EQ(back->policies.at("bf16").seeds, (std::vector<uint64_t>{0, 1, 2}));
  StatusOr<ToleranceProfile> bf16 = CalibratedProfile(*back, "bf16");
  ASSERT_TRUE(bf16.ok());
  ASSERT_NE(BoundOn(*bf16, "min_psnr"), nullptr);
  EXPECT_TRUE(BoundOn(*bf16, "min_psnr")->is_min);
  EXPECT_NEAR(BoundOn(*bf16, "min_psnr")->bound, CalibratedBound("min_psnr", 45.5, kInf, 2.0), 1e-9);
  EXPECT_FALSE(BoundOn(*bf16, "rel_l2")->is_min);
  EXPECT_NEAR(BoundOn(*bf16, "rel_l2")->bound, 0.02 + kCalibrationNoiseMinimum, 1e-12);
  EXPECT_EQ(CalibratedProfile(*back, "fp16").status().message(),
            "policy 'fp16' was not calibrated: UNSUPPORTED: no fp16 kernels");
  EXPECT_EQ(CalibratedProfile(*back, "fp8e4m3-bf16").status().code(), Status::Code::kNotFound);
  // A candidate 3 dB below the calibrated worst passes; 7 dB below fails.
  ComparisonMetrics m;
  m.video.min_psnr = 42.5, m.video.mean_ssim = m.video.min_ssim = 1, m.latent_cosine = 0.9995;
  m.video.rel_l2 = 0.01;
  EXPECT_FALSE(FirstViolation(*bf16, m));
  m.video.min_psnr = 38.5;
  ASSERT_TRUE(FirstViolation(*bf16, m));
  EXPECT_EQ(FirstViolation(*bf16, m)->bound.metric, "min_psnr");
}

TEST(CalibrationTest, TheStepBudgetHoldsOnlyOnTheDevicesTheStepNoiseWasMeasuredOn) {
  Calibration c = Example();
  EXPECT_TRUE(std::isnan(StepBudget(c, "cpu:avx2")));  // an older file: no step noise
  c.noise_step_rel_l2 = 6e-7;
  StatusOr<Calibration> back = ParseCalibration(CalibrationToToml(c), "cal.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->noise_step_rel_l2, 6e-7);
  EXPECT_NEAR(StepBudget(*back, "cpu:avx2"), 2 * 6e-7 + kCalibrationNoiseMinimum, 1e-15);
  EXPECT_NEAR(StepBudget(*back, "cpu"), 2 * 6e-7 + kCalibrationNoiseMinimum, 1e-15);
  EXPECT_TRUE(std::isnan(StepBudget(*back, "cuda:0")));  // its FP32 noise was not measured
  EXPECT_TRUE(std::isnan(StepBudget(*back, "cpu:default")));
  std::string text = CalibrationToToml(c);
  text.replace(text.find("step_rel_l2 = "), 14, "step_rel_l2 = -");
  EXPECT_NE(ParseCalibration(text, "cal.toml").status().message().find(": step_rel_l2 must be a number >= 0"),
            std::string::npos);
}

TEST(CalibrationTest, ACorruptFileIsRefusedNamingTheFileAndThePlace) {
  auto error = [](const std::string& text) {
    StatusOr<Calibration> c = ParseCalibration(text, "cal.toml");
    return c.ok() ? std::string("ok") : c.status().message();
  };
  EXPECT_EQ(ParseCalibration("garbage [", "cal.toml").status().code(), Status::Code::kCorrupt);
  EXPECT_EQ(error("pipeline = 1\n"), "cal.toml: not a framegate calibration (format_version = 1 expected)");
  std::string text = CalibrationToToml(Example());
  text.replace(text.find("min_psnr = 45.5"), 15, "min_psnr = \"x\"");
  EXPECT_NE(error(text).find("cal.toml:"), std::string::npos);
  EXPECT_NE(error(text).find(": min_psnr must be a number"), std::string::npos) << error(text);
  EXPECT_EQ(ReadCalibrationFile("/nonexistent/cal.toml").status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace framegate
