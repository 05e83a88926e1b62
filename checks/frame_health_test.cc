#include "checks/frame_health.h"

#include <ATen/ATen.h>

#include <limits>

#include <gtest/gtest.h>

namespace framegate {
namespace {

// A moving gradient video [T, H, W, 3] in [0.1, 0.9] and its decoder form [1, 3, T, H, W].
at::Tensor MovingVideo(int64_t t = 6) {
  const at::Tensor x = at::linspace(0, 1, 24).view({1, 1, 24, 1});
  const at::Tensor shift = at::arange(t, at::kFloat).view({t, 1, 1, 1}) * 0.15;
  return (0.5 + 0.4 * at::sin((x + shift) * 6.28)).expand({t, 24, 24, 3}).contiguous();
}
at::Tensor Decoded(const at::Tensor& frames) { return (frames * 2 - 1).permute({3, 0, 1, 2}).unsqueeze(0); }

TEST(FrameHealthTest, HealthyVideoHasNoDefect) {
  const at::Tensor v = MovingVideo();
  const FrameHealth h = AssessFrameHealth(Decoded(v), v, v, {{}, {}});
  EXPECT_EQ(h.defect, FrameDefect::kNone);
  EXPECT_EQ(h.first_nonfinite_step, -1);
  EXPECT_EQ(h.frames.size(), 6u);
}

TEST(FrameHealthTest, NanVideoIsNonfiniteNeverBlack) {
  // What an FP16 overflow does: NaN decoder output, which a clamp or a PNG writer turns
  // into black pixels.
  const at::Tensor golden = MovingVideo();
  const at::Tensor decoded = at::full({1, 3, 6, 24, 24}, std::numeric_limits<float>::quiet_NaN());
  const at::Tensor black = at::zeros({6, 24, 24, 3});
  const FrameHealth h = AssessFrameHealth(decoded, black, golden, {{0, 0}, {12, 0}});
  EXPECT_EQ(h.defect, FrameDefect::kNonfinite);
  EXPECT_EQ(h.defect_frames, 6);
  EXPECT_EQ(h.first_nonfinite_step, 1);
  EXPECT_EQ(h.decoded.nan, 3 * 6 * 24 * 24);
}

TEST(FrameHealthTest, BlackWhiteUniformAndFrozenAreToldApart) {
  const at::Tensor golden = MovingVideo();
  const auto defect_of = [&](const at::Tensor& v) {
    return AssessFrameHealth(Decoded(v), v, golden, {}).defect;
  };
  EXPECT_EQ(defect_of(at::zeros({6, 24, 24, 3})), FrameDefect::kBlack);
  EXPECT_EQ(defect_of(at::ones({6, 24, 24, 3})), FrameDefect::kWhite);
  EXPECT_EQ(defect_of(at::full({6, 24, 24, 3}, 0.4)), FrameDefect::kUniform);
  const at::Tensor frozen = golden[0].unsqueeze(0).expand({6, 24, 24, 3}).contiguous();
  const FrameHealth h = AssessFrameHealth(Decoded(frozen), frozen, golden, {});
  EXPECT_EQ(h.defect, FrameDefect::kFrozen);
  EXPECT_EQ(h.defect_frames, 5);  // frame 0 has no predecessor
  EXPECT_EQ(h.frames[0], FrameDefect::kNone);
  // Frozen needs a moving golden: a static golden makes a static candidate fine.
  EXPECT_EQ(AssessFrameHealth(Decoded(frozen), frozen, frozen, {}).defect, FrameDefect::kNone);
  // ...and needs a golden at all.
  EXPECT_EQ(AssessFrameHealth(Decoded(frozen), frozen, at::Tensor(), {}).defect, FrameDefect::kNone);
}

TEST(FrameHealthTest, OneBlackFrameIsCounted) {
  at::Tensor v = MovingVideo().clone();
  v[2].zero_();
  const FrameHealth h = AssessFrameHealth(Decoded(v), v, MovingVideo(), {});
  EXPECT_EQ(h.defect, FrameDefect::kBlack);
  EXPECT_EQ(h.defect_frames, 1);
  EXPECT_EQ(h.frames[2], FrameDefect::kBlack);
}

}  // namespace
}  // namespace framegate
