#include "pipelines/pipeline_run.h"

#include <gtest/gtest.h>

#include <ATen/Functions.h>

namespace framegate {
namespace {

PipelineSpec TinySpec(const DtypePolicy& policy, uint64_t seed) {
  PipelineSpec spec;
  spec.size = "tiny";
  spec.policy = policy;
  spec.seed = seed;
  spec.sampler = SamplerConfig{SamplerKind::kDdim, 2, 4.0};
  return spec;
}

at::Tensor Frames(const PipelineSpec& spec, ModelCache* models) {
  StatusOr<PipelineOutcome> outcome = RunPipeline(spec, nullptr, nullptr, models);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->kind, RunEnd::kFinished);
  return outcome->result.frames;
}

TEST(ModelCacheTest, AKeptModelGivesTheFramesOfAFreshOne) {
  ModelCache models;
  const DtypePolicy bf16 = *FindPolicy("bf16");
  // seed 0 builds the model; seed 1 runs on it (after it ran seed 0 with an observer).
  int observed = 0;
  ASSERT_TRUE(RunPipeline(
                  TinySpec(bf16, 0), [&](const ModuleOutput&) { ++observed; }, nullptr, &models)
                  .ok());
  EXPECT_GT(observed, 0);
  const at::Tensor reused = Frames(TinySpec(bf16, 1), &models);
  EXPECT_EQ(models.builds(), 1);
  EXPECT_TRUE(at::equal(reused, Frames(TinySpec(bf16, 1), nullptr)));
}

TEST(ModelCacheTest, AnotherPolicyBuildsAnotherModelAndTheLeastRecentIsDropped) {
  ModelCache models(/*capacity=*/1);
  Frames(TinySpec(Fp32Policy(), 0), &models);
  Frames(TinySpec(*FindPolicy("bf16"), 0), &models);
  EXPECT_EQ(models.builds(), 2);
  EXPECT_EQ(models.size(), 1u);
  const at::Tensor fp32 = Frames(TinySpec(Fp32Policy(), 0), &models);  // dropped: built again
  EXPECT_EQ(models.builds(), 3);
  EXPECT_TRUE(at::equal(fp32, Frames(TinySpec(Fp32Policy(), 0), nullptr)));
}

}  // namespace
}  // namespace framegate
