#include "pipelines/reference_model.h"

#include <gtest/gtest.h>

#include <ATen/Functions.h>

#include "pipelines/sampler.h"

namespace framegate {
namespace {

ReferenceSize Tiny() { return *FindReferenceSize("tiny"); }

std::unique_ptr<ReferenceModel> MakeTiny(const DtypePolicy& policy = Fp32Policy()) {
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(Tiny(), policy, c10::Device("cpu"));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(*model);
}

TEST(ReferenceModelTest, TinyMeetsItsContract) {
  const ReferenceSize tiny = Tiny();
  EXPECT_GE(tiny.latent.frames, 8);
  auto model = MakeTiny();
  const LatentGeometry& g = model->geometry();
  const GenerationInputs in = DrawInputs(g, 0);
  const at::Tensor eps = model->PredictNoise(in.noise, at::full({1}, 500.0), in.cond);
  EXPECT_EQ(eps.sizes(), in.noise.sizes());
  const at::Tensor rgb = model->Decode(in.noise);
  EXPECT_EQ(rgb.sizes(), (at::IntArrayRef{1, 3, g.frames, tiny.FrameHeight(), tiny.FrameWidth()}));
}

TEST(ReferenceModelTest, SameSeedGivesBitIdenticalFrames) {
  auto a = MakeTiny();
  auto b = MakeTiny();
  const SamplerConfig sampler{SamplerKind::kDdim, 3, 4.0};
  const GenerationResult ra = Generate(*a, sampler, 7);
  const GenerationResult rb = Generate(*b, sampler, 7);
  EXPECT_TRUE(at::equal(ra.frames, rb.frames));
  EXPECT_TRUE(at::equal(ra.latents, rb.latents));
  const GenerationResult rc = Generate(*a, sampler, 8);
  EXPECT_FALSE(at::equal(ra.frames, rc.frames));
}

TEST(ReferenceModelTest, FramesShowStructure) {
  auto model = MakeTiny();
  const GenerationResult r = Generate(*model, Tiny().sampler, 0);
  const at::Tensor f = r.frames;  // [T, H, W, 3]
  ASSERT_TRUE(at::isfinite(f).all().item<bool>());
  // Not blank, not flat gray, not saturated noise: a spread of values, and neighbouring
  // pixels correlated (spatial structure), and frames that differ over time.
  const double std = f.std().item<double>();
  EXPECT_GT(std, 0.05);
  const double saturated = ((f <= 0.0) | (f >= 1.0)).to(at::kFloat).mean().item<double>();
  EXPECT_LT(saturated, 0.2);
  const at::Tensor dx = f.narrow(2, 1, f.size(2) - 1) - f.narrow(2, 0, f.size(2) - 1);
  EXPECT_LT(dx.abs().mean().item<double>(), 0.8 * std);  // smoother than white noise (~1.13 std)
  const at::Tensor dt = f.narrow(0, 1, f.size(0) - 1) - f.narrow(0, 0, f.size(0) - 1);
  EXPECT_GT(dt.abs().mean().item<double>(), 1e-3);
}

TEST(ReferenceModelTest, ActivationsStayInARealisticRange) {
  auto model = MakeTiny();
  double max_absmax = 0, min_absmax = 1e30;
  model->SetObserver([&](const ModuleOutput& out) {
    if (out.kind == ModuleKind::kSoftmax) return;
    const double absmax = out.value.abs().max().item<double>();
    max_absmax = std::max(max_absmax, absmax);
    min_absmax = std::min(min_absmax, absmax);
  });
  Generate(*model, {SamplerKind::kDdim, 2, 4.0}, 0);
  EXPECT_LT(max_absmax, 1000.0);  // far from FP16's 65504
  EXPECT_GT(min_absmax, 0.05);    // nothing collapsed to zero
}

TEST(ReferenceModelTest, RefusesASizeTheDeviceCannotHoldBeforeAllocating) {
  ReferenceSize huge = Tiny();
  huge.name = "huge";
  huge.latent.height = huge.latent.width = 4096;
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(huge, Fp32Policy(), c10::Device("cpu"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(model.status().message().find("size 'huge' needs about"), std::string::npos);
}

TEST(ReferenceModelTest, LargeIsHundredsOfMillionsOfParameters) {
  const ReferenceSize large = *FindReferenceSize("large");
  const int64_t fp32_bytes = EstimateReferenceBytes(large, Fp32Policy());
  EXPECT_GT(fp32_bytes, int64_t{1} << 30);
}

}  // namespace
}  // namespace framegate
