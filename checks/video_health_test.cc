#include "checks/video_health.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace framegate {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A video held in memory, [frames, 24, 24, 3].
struct Video {
  std::vector<float> values;
  int64_t frames = 0;
  static constexpr int64_t kSide = 24;

  explicit Video(int64_t t, float fill = 0.0f) : values(t * kSide * kSide * 3, fill), frames(t) {}
  VideoView View() const { return {values.data(), frames, kSide, kSide, 3}; }
  float* Frame(int64_t t) { return values.data() + t * kSide * kSide * 3; }
};

// A moving gradient in [0.1, 0.9], as frame_health_test.cc's.
Video MovingVideo(int64_t t = 6) {
  Video v(t);
  for (int64_t f = 0; f < t; ++f)
    for (int64_t y = 0; y < Video::kSide; ++y)
      for (int64_t x = 0; x < Video::kSide; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          const double u = x / (Video::kSide - 1.0) + 0.15 * f;
          v.Frame(f)[(y * Video::kSide + x) * 3 + c] = static_cast<float>(0.5 + 0.4 * std::sin(u * 6.28));
        }
  return v;
}

FrameHealth Assess(const Video& v, const VideoView& golden, int threads = 1) {
  return AssessVideoHealth(v.View(), CountNonfiniteFrames(v.View(), 2.0f, -1.0f, threads), golden, {}, {},
                           threads);
}

TEST(VideoHealthTest, CountsNanAndInfPerFrameInTheDecoderRange) {
  Video v = MovingVideo(3);
  v.Frame(0)[5] = kNaN;
  v.Frame(2)[0] = kInf;
  v.Frame(2)[1] = -kInf;
  v.Frame(2)[2] = 3e38f;  // finite, but 2 * v - 1 overflows
  const std::vector<NonfiniteCount> counts = CountNonfiniteFrames(v.View(), 2.0f, -1.0f, 2);
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0].nan, 1);
  EXPECT_EQ(counts[0].inf, 0);
  EXPECT_FALSE(counts[1].any());
  EXPECT_EQ(counts[2].nan, 0);
  EXPECT_EQ(counts[2].inf, 3);
  // As stored, the huge value is finite.
  EXPECT_EQ(CountNonfinite(v.Frame(2), 24 * 24 * 3).inf, 2);
  // Lengths that end inside a block.
  std::vector<float> odd(37, 0.5f);
  odd[36] = kNaN;
  EXPECT_EQ(CountNonfinite(odd.data(), 37).nan, 1);
}

// A frame as dark, as bright or as flat as its golden's is what the model makes (a night
// sky, a fade from black, snow), not a broken frame; one that became so is.
TEST(VideoHealthTest, AGoldenFrameThatLooksTheSameExcusesBlackWhiteAndUniform) {
  Video night(2, 0.02f);  // black; a few stars on frame 1
  for (int i = 0; i < 40; ++i) night.Frame(1)[i * 37] = 0.9f;
  EXPECT_EQ(Assess(night, night.View()).defect, FrameDefect::kNone);
  EXPECT_EQ(Assess(night, VideoView{}).defect, FrameDefect::kBlack);  // no golden: as before
  Video fade = MovingVideo(2);                                        // from black
  std::fill(fade.Frame(0), fade.Frame(1), 0.0f);
  EXPECT_EQ(Assess(fade, fade.View()).defect, FrameDefect::kNone);
  Video dusk(2, 0.3f);  // flat dark grey, standard deviation 0.008 in the golden
  Video dusk_golden(2, 0.3f);
  for (size_t i = 0; i < dusk_golden.values.size(); ++i) dusk_golden.values[i] += (i % 2 ? 0.008f : -0.008f);
  EXPECT_EQ(Assess(dusk, dusk_golden.View()).defect, FrameDefect::kNone);
  // Snow: the golden just under 99% bright (98.4%), the candidate just over.
  Video snow(2, 1.0f), snow_golden(2, 1.0f);
  const int64_t n = 24 * 24 * 3;
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t i = 0; i < n * 16 / 1000; ++i) snow_golden.Frame(t)[i * 61 % n] = 0.5f;
    for (int64_t i = 0; i < n * 5 / 1000; ++i) snow.Frame(t)[i * 61 % n] = 0.5f;
  }
  EXPECT_EQ(Assess(snow_golden, VideoView{}).defect, FrameDefect::kNone);
  EXPECT_EQ(Assess(snow, VideoView{}).defect, FrameDefect::kWhite);
  EXPECT_EQ(Assess(snow, snow_golden.View()).defect, FrameDefect::kNone);
  // Became so: a moving golden turned black, white or flat is still broken; so is a night
  // turned white.
  const Video moving = MovingVideo(2);
  EXPECT_EQ(Assess(Video(2, 0.0f), moving.View()).defect, FrameDefect::kBlack);
  EXPECT_EQ(Assess(Video(2, 1.0f), moving.View()).defect, FrameDefect::kWhite);
  EXPECT_EQ(Assess(Video(2, 0.4f), moving.View()).defect, FrameDefect::kUniform);
  EXPECT_EQ(Assess(Video(2, 1.0f), night.View()).defect, FrameDefect::kWhite);
  EXPECT_EQ(Assess(Video(2, 0.4f), night.View()).defect, FrameDefect::kUniform);
}

TEST(VideoHealthTest, HealthyNanBlackWhiteUniformAndFrozen) {
  const Video golden = MovingVideo();
  const FrameHealth ok = Assess(golden, golden.View());
  EXPECT_EQ(ok.defect, FrameDefect::kNone);
  EXPECT_EQ(ok.frames.size(), 6u);
  EXPECT_EQ(Assess(Video(6, kNaN), golden.View()).defect, FrameDefect::kNonfinite);
  EXPECT_EQ(Assess(Video(6, 0.0f), golden.View()).defect, FrameDefect::kBlack);
  EXPECT_EQ(Assess(Video(6, 1.0f), golden.View()).defect, FrameDefect::kWhite);
  EXPECT_EQ(Assess(Video(6, 0.4f), golden.View()).defect, FrameDefect::kUniform);
  // 0.05 itself is dark: the threshold is compared in float32 (0.05f <= 0.05f).
  EXPECT_EQ(Assess(Video(6, 0.05f), golden.View()).defect, FrameDefect::kBlack);
  Video frozen(6);
  for (int64_t t = 0; t < 6; ++t)
    std::copy(golden.values.begin(), golden.values.begin() + 24 * 24 * 3, frozen.Frame(t));
  const FrameHealth h = Assess(frozen, golden.View());
  EXPECT_EQ(h.defect, FrameDefect::kFrozen);
  EXPECT_EQ(h.defect_frames, 5);
  EXPECT_EQ(h.frames[0], FrameDefect::kNone);
  // No golden, or a static one: not frozen.
  EXPECT_EQ(Assess(frozen, VideoView{}).defect, FrameDefect::kNone);
  EXPECT_EQ(Assess(frozen, frozen.View()).defect, FrameDefect::kNone);
}

TEST(VideoHealthTest, DecoderCountsAndStepsAreReported) {
  const Video v = MovingVideo(4);
  std::vector<NonfiniteCount> decoded(4);
  decoded[1] = {2, 1};
  decoded[3] = {0, 4};
  const FrameHealth h = AssessVideoHealth(v.View(), decoded, VideoView{}, {{0, 0}, {0, 0}, {1, 0}});
  EXPECT_EQ(h.defect, FrameDefect::kNonfinite);
  EXPECT_EQ(h.defect_frames, 2);
  EXPECT_EQ(h.decoded.nan, 2);
  EXPECT_EQ(h.decoded.inf, 5);
  EXPECT_EQ(h.first_nonfinite_step, 2);
}

TEST(VideoHealthTest, ThreadsDoNotChangeTheResult) {
  const Video golden = MovingVideo(9);
  Video v = MovingVideo(9);
  std::fill(v.Frame(4), v.Frame(5), 0.0f);
  v.Frame(7)[3] = kNaN;
  const FrameHealth one = Assess(v, golden.View(), 1);
  for (int threads : {2, 3, 16}) {
    const FrameHealth many = Assess(v, golden.View(), threads);
    EXPECT_EQ(many.frames, one.frames) << threads;
    EXPECT_EQ(many.defect, one.defect);
    EXPECT_EQ(many.decoded.nan, one.decoded.nan);
  }
  EXPECT_EQ(one.frames[4], FrameDefect::kBlack);
  EXPECT_EQ(one.frames[7], FrameDefect::kNonfinite);
}

TEST(VideoHealthTest, AnEmptyVideoIsHealthy) {
  const FrameHealth h = AssessVideoHealth(VideoView{}, {}, VideoView{}, {});
  EXPECT_EQ(h.defect, FrameDefect::kNone);
  EXPECT_TRUE(h.frames.empty());
}

}  // namespace
}  // namespace framegate
