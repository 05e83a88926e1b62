#include "pipelines/sampler.h"

#include <gtest/gtest.h>

#include <ATen/Functions.h>

namespace framegate {
namespace {

TEST(SamplerScheduleTest, TimestepsSpanTheTrainingRangeDescending) {
  EXPECT_EQ(SamplerTimesteps(1), (std::vector<int64_t>{999}));
  EXPECT_EQ(SamplerTimesteps(4), (std::vector<int64_t>{999, 666, 333, 0}));
  const std::vector<double> a = AlphasCumprod();
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_NEAR(a[0], 1.0 - 0.00085, 1e-12);
  for (size_t i = 1; i < a.size(); ++i) ASSERT_LT(a[i], a[i - 1]);
  EXPECT_NEAR(a[999], 0.0047, 0.0003);  // the scaled-linear schedule's end
}

// A model whose noise prediction is exact for data x0 = 0: eps = x / sqrt(1 - a_t)
// recovers 0 with DDIM in one step, and Euler converges to 0 too.
class ZeroDataModel : public VideoModel {
 public:
  const LatentGeometry& geometry() const override { return geometry_; }
  c10::Device device() const override { return c10::Device("cpu"); }
  c10::ScalarType latent_dtype() const override { return at::kFloat; }
  at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor&) override {
    ++calls;
    batch_sizes.push_back(x.size(0));
    const double a = AlphasCumprod()[static_cast<int>(t[0].item<float>())];
    // For Euler the input is x / sqrt(sigma^2 + 1) = sqrt(a) x_sigma: eps = x_in / sqrt(1 - a).
    return x / std::sqrt(1.0 - a);
  }
  at::Tensor Decode(const at::Tensor& z) override { return z.narrow(1, 0, 3).repeat({1, 1, 1, 2, 2}); }
  int calls = 0;
  std::vector<int64_t> batch_sizes;

 private:
  LatentGeometry geometry_{4, 2, 4, 4, 2, 8};
};

TEST(SamplerTest, DdimRecoversExactDataAndReportsTimings) {
  ZeroDataModel model;
  const GenerationResult r = Generate(model, {SamplerKind::kDdim, 5, 1.0}, 0);
  EXPECT_EQ(model.calls, 5);
  EXPECT_LT(r.latents.abs().max().item<float>(), 1e-4);
  EXPECT_EQ(r.step_seconds.size(), 5u);
  EXPECT_EQ(r.frames.sizes(), (at::IntArrayRef{2, 8, 8, 3}));
  // Latents 0 decode to 0, mapped to gray 0.5.
  EXPECT_NEAR(r.frames.mean().item<float>(), 0.5f, 1e-4);
}

TEST(SamplerTest, EulerConvergesToTheData) {
  ZeroDataModel model;
  const GenerationResult r = Generate(model, {SamplerKind::kEuler, 10, 1.0}, 0);
  EXPECT_LT(r.latents.abs().max().item<float>(), 1e-3);
}

TEST(SamplerTest, GuidanceRunsOneDoubledBatchPerStep) {
  ZeroDataModel model;
  Generate(model, {SamplerKind::kDdim, 3, 5.0}, 0);
  EXPECT_EQ(model.calls, 3);
  EXPECT_EQ(model.batch_sizes, (std::vector<int64_t>{2, 2, 2}));
}

TEST(SamplerTest, StepObserverSeesEveryStep) {
  ZeroDataModel model;
  std::vector<int> steps;
  Generate(model, {SamplerKind::kDdim, 4, 1.0}, 0, [&](int step, const at::Tensor& latents) {
    steps.push_back(step);
    EXPECT_EQ(latents.dim(), 5);
  });
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3}));
}

TEST(SamplerTest, ReplayOfARunsTrajectoryRepeatsEachStepExactly) {
  for (SamplerKind kind : {SamplerKind::kDdim, SamplerKind::kEuler}) {
    ZeroDataModel model;
    const SamplerConfig sampler{kind, 4, 3.0};
    const GenerationResult run = Generate(model, sampler, 7, nullptr, /*keep_trajectory=*/true);
    ASSERT_EQ(run.trajectory.size(0), 5);
    EXPECT_TRUE(at::equal(run.trajectory[4], run.latents));
    const GenerationResult replay = ReplaySteps(model, sampler, 7, run.trajectory);
    EXPECT_TRUE(at::equal(replay.trajectory, run.trajectory));
    EXPECT_TRUE(at::equal(replay.frames, run.frames));
    EXPECT_EQ(replay.step_seconds.size(), 4u);
  }
}

TEST(SamplerTest, ReplayStartsEveryStepFromTheGivenLatentsNotFromTheLastOutput) {
  ZeroDataModel model;
  const SamplerConfig sampler{SamplerKind::kDdim, 3, 1.0};
  GenerationResult run = Generate(model, sampler, 1, nullptr, true);
  at::Tensor changed = run.trajectory.clone();
  changed[1].add_(1.0);  // step 1's input only
  const GenerationResult replay = ReplaySteps(model, sampler, 1, changed);
  EXPECT_TRUE(at::equal(replay.trajectory[1], run.trajectory[1]));   // step 0: as before
  EXPECT_FALSE(at::equal(replay.trajectory[2], run.trajectory[2]));  // step 1: from the change
  EXPECT_TRUE(at::equal(replay.trajectory[3], run.trajectory[3]));   // step 2: as before
  EXPECT_THROW(ReplaySteps(model, {SamplerKind::kDdim, 5, 1.0}, 1, changed), std::invalid_argument);
}

}  // namespace
}  // namespace framegate
