#include "checks/frame_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "harness/npy.h"

#ifndef FRAMEGATE_SOURCE_DIR
#error "FRAMEGATE_SOURCE_DIR must name the repository (tests/data/metric-vectors)"
#endif

namespace framegate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A video held in memory: [frames, height, width, channels].
struct Video {
  std::vector<float> values;
  int64_t frames = 0, height = 0, width = 0, channels = 3;

  VideoView View() const { return {values.data(), frames, height, width, channels}; }
  float& at(int64_t t, int64_t y, int64_t x, int64_t c) {
    return values[((t * height + y) * width + x) * channels + c];
  }
};

Video MakeVideo(int64_t frames, int64_t height, int64_t width) {
  Video v;
  v.frames = frames;
  v.height = height;
  v.width = width;
  v.values.assign(frames * height * width * 3, 0.0f);
  return v;
}

// Smooth structured content that moves by `shift` pixels per frame, in [0.1, 0.9].
Video MovingPattern(int64_t frames, int64_t height, int64_t width, int shift) {
  Video v = MakeVideo(frames, height, width);
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          const double u = 0.3 * (x + shift * t) + 0.7 * c;
          v.at(t, y, x, c) = static_cast<float>(0.5 + 0.2 * std::sin(u) * std::cos(0.2 * y) +
                                                0.2 * std::sin(0.05 * (x + y)));
        }
  return v;
}

Video AddNoise(const Video& v, double stddev, unsigned seed) {
  Video out = v;
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, stddev);
  for (float& x : out.values) x = static_cast<float>(x + noise(rng));
  return out;
}

Video LoadNpyVideo(const std::string& path) {
  StatusOr<NpyArray> array = ReadNpy(path);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  Video v;
  if (!array.ok()) return v;
  EXPECT_EQ(array->shape.size(), 4u) << path;
  if (array->shape.size() != 4) return v;
  v.frames = array->shape[0];
  v.height = array->shape[1];
  v.width = array->shape[2];
  v.channels = array->shape[3];
  v.values = array->ToFloat32();
  return v;
}

// The vectors scikit-image computed: tests/data/make_metric_vectors.py made them.
constexpr char kRegenerateHint[] =
    "HINT: the vectors are regenerated (with scikit-image) by\n"
    "  /usr/bin/python3 tests/data/make_metric_vectors.py";

class MetricVectorsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MetricVectorsTest, AgreesWithScikitImage) {
  const std::string dir = std::string(FRAMEGATE_SOURCE_DIR) + "/tests/data/metric-vectors/" + GetParam();
  SCOPED_TRACE(kRegenerateHint);
  const Video ref = LoadNpyVideo(dir + "/ref.npy");
  const Video cand = LoadNpyVideo(dir + "/cand.npy");
  std::ifstream json_file(dir + "/expected.json");
  ASSERT_TRUE(json_file) << "cannot open " << dir << "/expected.json";
  const nlohmann::json expected = nlohmann::json::parse(json_file);

  ASSERT_TRUE(CheckSameShape(ref.View(), cand.View()).ok());
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), cand.View());
  const auto& frames = expected.at("frames");
  ASSERT_EQ(m.frames.size(), frames.size());
  for (size_t t = 0; t < frames.size(); ++t) {
    SCOPED_TRACE("frame " + std::to_string(t));
    const nlohmann::json& psnr = frames[t].at("psnr");
    if (psnr.is_null()) {
      EXPECT_EQ(m.frames[t].psnr, kInf);
    } else {
      EXPECT_NEAR(m.frames[t].psnr, psnr.get<double>(), 1e-3);
    }
    EXPECT_NEAR(m.frames[t].ssim, frames[t].at("ssim").get<double>(), 1e-4);
  }
  EXPECT_NEAR(m.max_abs, expected.at("max_abs").get<double>(), 1e-4);
  EXPECT_NEAR(m.rel_l2, expected.at("rel_l2").get<double>(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(ScikitImageVectors, MetricVectorsTest,
                         ::testing::Values("identical", "noise_small", "blur"));

// SSIM straight from the definition: a 2D 11x11 Gaussian window at every valid pixel,
// variances apart (no shortcut of the optimized code), averaged over pixels and channels.
double NaiveSsim(const std::vector<float>& x, const std::vector<float>& y, int64_t h, int64_t w, int64_t c) {
  double g[11], gsum = 0.0;
  for (int k = 0; k < 11; ++k) gsum += g[k] = std::exp(-(k - 5.0) * (k - 5.0) / (2 * 1.5 * 1.5));
  for (double& v : g) v /= gsum;
  const double c1 = 1e-4, c2 = 9e-4;
  double sum = 0.0;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 5; i < h - 5; ++i)
      for (int64_t j = 5; j < w - 5; ++j) {
        double ux = 0, uy = 0, uxx = 0, uyy = 0, uxy = 0;
        for (int a = 0; a < 11; ++a)
          for (int b = 0; b < 11; ++b) {
            const int64_t idx = ((i + a - 5) * w + (j + b - 5)) * c + ch;
            const double wt = g[a] * g[b], xv = x[idx], yv = y[idx];
            ux += wt * xv;
            uy += wt * yv;
            uxx += wt * xv * xv;
            uyy += wt * yv * yv;
            uxy += wt * xv * yv;
          }
        const double vx = uxx - ux * ux, vy = uyy - uy * uy, vxy = uxy - ux * uy;
        sum += (2 * ux * uy + c1) * (2 * vxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2));
      }
  return sum / static_cast<double>((h - 10) * (w - 10) * c);
}

TEST(FrameMetricsTest, SsimMatchesTheDefinitionOnOddShapes) {
  struct Shape {
    int64_t h, w, c;
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  // 1x1 valid region, one channel, channel counts other than 3, rows that end inside
  // a block, rows of several blocks.
  for (const Shape& s : {Shape{11, 11, 1}, Shape{11, 13, 3}, Shape{17, 40, 2}, Shape{30, 19, 3},
                         Shape{12, 200, 3}, Shape{23, 16, 4}}) {
    SCOPED_TRACE(std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c));
    std::vector<float> x(s.h * s.w * s.c), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = uniform(rng) * 0.5f + 0.25f * static_cast<float>(i % 7) / 7.0f;
      y[i] = x[i] + noise(rng);
    }
    const FrameView fx{x.data(), s.h, s.w, s.c}, fy{y.data(), s.h, s.w, s.c};
    // The filters run in float32 (the definition here in double): 5e-8 apart at most
    // on these shapes when this was written.
    EXPECT_NEAR(FrameSsim(fx, fy), NaiveSsim(x, y, s.h, s.w, s.c), 1e-6);
  }
}

TEST(FrameMetricsTest, SsimOfAFrameWithItselfIsOne) {
  const Video v = AddNoise(MovingPattern(1, 37, 29, 0), 0.1, 1);
  EXPECT_NEAR(FrameSsim(v.View().Frame(0), v.View().Frame(0)), 1.0, 1e-12);
  EXPECT_EQ(FramePsnr(v.View().Frame(0), v.View().Frame(0)), kInf);
}

TEST(FrameMetricsTest, PsnrAndSsimDecreaseAsNoiseGrows) {
  const Video ref = MovingPattern(1, 48, 64, 0);
  double last_psnr = kInf, last_ssim = 1.0;
  for (double stddev : {0.001, 0.01, 0.03, 0.1}) {
    const Video cand = AddNoise(ref, stddev, 7);
    const double psnr = FramePsnr(ref.View().Frame(0), cand.View().Frame(0));
    const double ssim = FrameSsim(ref.View().Frame(0), cand.View().Frame(0));
    EXPECT_LT(psnr, last_psnr) << "stddev " << stddev;
    EXPECT_LT(ssim, last_ssim) << "stddev " << stddev;
    // Gaussian noise of this stddev: PSNR ~ -20 log10(stddev).
    EXPECT_NEAR(psnr, -20.0 * std::log10(stddev), 0.5) << "stddev " << stddev;
    last_psnr = psnr;
    last_ssim = ssim;
  }
}

TEST(FrameMetricsTest, SsimIsNanForFramesSmallerThanTheWindow) {
  const Video v = MovingPattern(1, 10, 64, 0);
  EXPECT_TRUE(std::isnan(FrameSsim(v.View().Frame(0), v.View().Frame(0))));
  EXPECT_FALSE(ComputeVideoMetrics(v.View(), v.View()).ssim_measured);
  const Video eleven = MovingPattern(1, 11, 11, 0);
  EXPECT_TRUE(ComputeVideoMetrics(eleven.View(), eleven.View()).ssim_measured);
}

TEST(FrameMetricsTest, TemporalErrorIsZeroForIdenticalVideos) {
  const Video ref = MovingPattern(5, 24, 32, 2);
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), ref.View());
  EXPECT_EQ(m.temporal_rel_l2, 0.0);
  EXPECT_EQ(m.rel_l2, 0.0);
  EXPECT_EQ(m.max_abs, 0.0);
  EXPECT_EQ(m.min_psnr, kInf);
  EXPECT_NEAR(m.min_ssim, 1.0, 1e-12);
}

TEST(FrameMetricsTest, TemporalErrorSeesAFrozenCandidate) {
  const Video ref = MovingPattern(5, 24, 32, 2);
  Video frozen = ref;
  const int64_t frame_len = ref.height * ref.width * ref.channels;
  for (int64_t t = 1; t < ref.frames; ++t) {
    std::copy(ref.values.begin(), ref.values.begin() + frame_len, frozen.values.begin() + t * frame_len);
  }
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), frozen.View());
  // dc = 0 everywhere, so ||dc - dr|| = ||dr||.
  EXPECT_NEAR(m.temporal_rel_l2, 1.0, 1e-12);
  // A static offset changes no frame-to-frame difference.
  Video offset = ref;
  for (float& x : offset.values) x += 0.05f;
  EXPECT_LT(ComputeVideoMetrics(ref.View(), offset.View()).temporal_rel_l2, 1e-5);
}

// A near-static clip (a static camera: each frame 0.2% brighter than the last) is judged
// against a tenth of its contrast per change, not its own tiny motion: the candidate's
// rounding noise is not lost motion. A frozen candidate still shows the motion it lost.
TEST(FrameMetricsTest, TemporalErrorOfANearStaticClipIsJudgedAgainstAQuarterOfItsContrast) {
  Video ref = MovingPattern(6, 24, 32, 0);
  const int64_t frame_len = ref.height * ref.width * ref.channels;
  for (int64_t t = 0; t < ref.frames; ++t) {
    for (int64_t i = 0; i < frame_len; ++i) ref.values[t * frame_len + i] += 0.002f * static_cast<float>(t);
  }
  double sum = 0, sum_sq = 0;
  for (const float x : ref.values) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(ref.values.size());
  const double contrast = std::sqrt(sum_sq / n - (sum / n) * (sum / n));
  const Video noisy = AddNoise(ref, 0.0005, 7);
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), noisy.View());
  // ||d(noise)|| is about sqrt(2) 0.0005 per value; the floor 0.25 contrast per value.
  EXPECT_NEAR(m.temporal_rel_l2, std::sqrt(2.0) * 0.0005 / (0.25 * contrast), 0.1 * m.temporal_rel_l2);
  EXPECT_LT(m.temporal_rel_l2, 0.1);  // against the motion alone: about 0.35
  Video frozen = ref;
  for (int64_t t = 1; t < ref.frames; ++t) {
    std::copy(ref.values.begin(), ref.values.begin() + frame_len, frozen.values.begin() + t * frame_len);
  }
  EXPECT_NEAR(ComputeVideoMetrics(ref.View(), frozen.View()).temporal_rel_l2, 0.002 / (0.25 * contrast),
              1e-6);
}

TEST(FrameMetricsTest, ZeroDenominatorsFollowTheDocumentedRule) {
  const Video zeros = MakeVideo(3, 12, 12);
  Video ones = zeros;
  for (float& x : ones.values) x = 1.0f;
  EXPECT_EQ(ComputeVideoMetrics(zeros.View(), zeros.View()).rel_l2, 0.0);
  EXPECT_EQ(ComputeVideoMetrics(zeros.View(), ones.View()).rel_l2, kInf);
  // Static reference, moving candidate.
  Video moving = ones;
  for (int64_t i = 0; i < 12 * 12 * 3; ++i) moving.values[i] = 0.5f;
  EXPECT_EQ(ComputeVideoMetrics(ones.View(), moving.View()).temporal_rel_l2, kInf);
  // A single frame has no changes to compare.
  const Video one_frame = MovingPattern(1, 16, 16, 0);
  EXPECT_EQ(ComputeVideoMetrics(one_frame.View(), AddNoise(one_frame, 0.1, 3).View()).temporal_rel_l2, 0.0);
}

TEST(FrameMetricsTest, NanInTheCandidateIsNeverAGoodScore) {
  const Video ref = MovingPattern(2, 20, 20, 1);
  Video cand = ref;
  cand.at(1, 0, 0, 2) = std::numeric_limits<float>::quiet_NaN();  // a border pixel
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), cand.View());
  EXPECT_EQ(m.frames[0].psnr, kInf);
  EXPECT_TRUE(std::isnan(m.frames[1].psnr));
  EXPECT_TRUE(std::isnan(m.frames[1].ssim));
  EXPECT_TRUE(std::isnan(m.min_psnr));
  EXPECT_TRUE(std::isnan(m.min_ssim));
  EXPECT_TRUE(std::isnan(m.max_abs));
  EXPECT_TRUE(std::isnan(m.rel_l2));
  EXPECT_TRUE(std::isnan(m.temporal_rel_l2));
}

TEST(FrameMetricsTest, InfIsNeverAGoodScore) {
  // An Inf pixel gave a PSNR of -inf (printed "inf" by `metrics`) and a cosine of 1.
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  const Video ref = MovingPattern(2, 20, 20, 1);
  for (const bool in_both : {false, true}) {
    Video cand = ref;
    Video reference = ref;
    cand.at(1, 3, 4, 0) = kInfF;
    if (in_both) reference.at(1, 3, 4, 0) = kInfF;
    const VideoMetrics m = ComputeVideoMetrics(reference.View(), cand.View());
    EXPECT_EQ(m.frames[0].psnr, kInf);
    EXPECT_TRUE(std::isnan(m.frames[1].psnr)) << m.frames[1].psnr;
    EXPECT_TRUE(std::isnan(m.min_psnr)) << m.min_psnr;
    EXPECT_FALSE(m.frames[1].ssim >= 0.5) << m.frames[1].ssim;
    EXPECT_TRUE(std::isnan(m.cosine)) << m.cosine;
    EXPECT_FALSE(m.rel_l2 < 1.0) << m.rel_l2;
  }
  Video cand = ref;
  cand.at(0, 0, 0, 0) = -kInfF;
  EXPECT_TRUE(std::isnan(FramePsnr(ref.View().Frame(0), cand.View().Frame(0))));
  EXPECT_TRUE(std::isnan(CosineSimilarity(ref.values.data(), cand.values.data(), 10)));
}

TEST(FrameMetricsTest, ThreadsDoNotChangeTheResult) {
  const Video ref = MovingPattern(7, 33, 41, 3);
  const Video cand = AddNoise(ref, 0.02, 11);
  const VideoMetrics one = ComputeVideoMetrics(ref.View(), cand.View());
  FrameMetricsOptions options;
  options.num_threads = 3;
  const VideoMetrics three = ComputeVideoMetrics(ref.View(), cand.View(), options);
  ASSERT_EQ(one.frames.size(), three.frames.size());
  for (size_t t = 0; t < one.frames.size(); ++t) {
    EXPECT_EQ(one.frames[t].psnr, three.frames[t].psnr);
    EXPECT_EQ(one.frames[t].ssim, three.frames[t].ssim);
  }
  EXPECT_EQ(one.rel_l2, three.rel_l2);
  EXPECT_EQ(one.temporal_rel_l2, three.temporal_rel_l2);
  EXPECT_EQ(one.mean_ssim, three.mean_ssim);
}

TEST(FrameMetricsTest, CheckSameShapeNamesBothShapes) {
  const Video a = MakeVideo(2, 24, 64);
  const Video b = MakeVideo(2, 24, 63);
  EXPECT_TRUE(CheckSameShape(a.View(), a.View()).ok());
  const Status s = CheckSameShape(a.View(), b.View());
  EXPECT_EQ(s.code(), Status::Code::kInvalidInput);
  EXPECT_NE(s.message().find("[2, 24, 64, 3]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[2, 24, 63, 3]"), std::string::npos) << s.message();
  VideoView null_data = a.View();
  null_data.data = nullptr;
  EXPECT_EQ(CheckSameShape(null_data, a.View()).code(), Status::Code::kInvalidInput);
}

TEST(FrameMetricsTest, CosineSimilarity) {
  std::vector<float> a = {0.5f, -1.25f, 3.0f, 0.0f, 2.0f};
  std::vector<float> neg(a.size()), orth = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> other = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f}, zeros(a.size(), 0.0f);
  for (size_t i = 0; i < a.size(); ++i) neg[i] = -a[i];
  const int64_t n = static_cast<int64_t>(a.size());
  EXPECT_DOUBLE_EQ(CosineSimilarity(a.data(), a.data(), n), 1.0);
  EXPECT_DOUBLE_EQ(CosineSimilarity(a.data(), neg.data(), n), -1.0);
  EXPECT_DOUBLE_EQ(CosineSimilarity(orth.data(), other.data(), n), 0.0);
  EXPECT_EQ(CosineSimilarity(zeros.data(), zeros.data(), n), 1.0);
  EXPECT_EQ(CosineSimilarity(a.data(), zeros.data(), n), 0.0);
}

TEST(FrameMetricsTest, VideoCosineIsTheCosineOfTheFlatVideos) {
  const Video ref = MovingPattern(5, 24, 37, 2);  // 37 * 3 values a row: not a block multiple
  const Video cand = AddNoise(ref, 0.05, 3);
  const VideoMetrics m = ComputeVideoMetrics(ref.View(), cand.View(), {2});
  EXPECT_NEAR(
      m.cosine,
      CosineSimilarity(ref.values.data(), cand.values.data(), static_cast<int64_t>(ref.values.size())),
      1e-14);
  EXPECT_LT(m.cosine, 1.0);
  EXPECT_EQ(ComputeVideoMetrics(ref.View(), ref.View()).cosine, 1.0);
  const Video empty = MakeVideo(0, 24, 37);
  EXPECT_EQ(ComputeVideoMetrics(empty.View(), empty.View()).cosine, 1.0);  // as n = 0
}

}  // namespace
}  // namespace framegate
