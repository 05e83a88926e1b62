#include "checks/video_health.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>

#include "checks/frame_loops.h"

namespace framegate {
namespace {

constexpr uint32_t kExponentBits = 0x7f800000u;  // float32: all ones = Inf or NaN

// The loops below are compiled once per ISA level (FRAMEGATE_SIMD_CLONES). They keep
// kBlock partial sums in local arrays, so that GCC vectorizes them at -O2 without
// reordering a sum it may not reorder.
constexpr int64_t kBlock = 16;

// NaN and Inf counts of scale * v + offset over n values, from the bits.
FRAMEGATE_SIMD_CLONES NonfiniteCount CountAffineNonfinite(const float* values, int64_t n, float scale,
                                                          float offset) {
  auto classify = [&](int64_t i, int32_t* nan, int32_t* inf) {
    const float v = values[i] * scale + offset;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0x7fffffffu;
    *nan += bits > kExponentBits;
    *inf += bits == kExponentBits;
  };
  NonfiniteCount count;
  int64_t i = 0;
  // int32 lanes, emptied into the int64 totals every chunk (no lane can overflow).
  constexpr int64_t kChunk = kBlock << 20;
  while (i + kBlock <= n) {
    int32_t nan[kBlock] = {}, inf[kBlock] = {};
    const int64_t end = std::min(n, i + kChunk) / kBlock * kBlock;
    for (; i < end; i += kBlock) {
      for (int l = 0; l < kBlock; ++l) classify(i + l, &nan[l], &inf[l]);
    }
    for (int l = 0; l < kBlock; ++l) {
      count.nan += nan[l];
      count.inf += inf[l];
    }
  }
  int32_t nan = 0, inf = 0;
  for (; i < n; ++i) classify(i, &nan, &inf);
  count.nan += nan;
  count.inf += inf;
  return count;
}

// One pass over a frame's n values: how many are <= dark and >= bright (compared in
// float32, as a float32 tensor with a scalar is) and their sum (in double).
struct FrameTally {
  int64_t dark = 0, bright = 0;
  double sum = 0.0;
};

FRAMEGATE_SIMD_CLONES FrameTally Tally(const float* x, int64_t n, float dark, float bright) {
  int64_t dark_lanes[kBlock] = {}, bright_lanes[kBlock] = {};
  double sum_lanes[kBlock] = {};
  const int64_t blocks_end = n / kBlock * kBlock;
  for (int64_t i = 0; i < blocks_end; i += kBlock) {
    for (int l = 0; l < kBlock; ++l) {
      dark_lanes[l] += x[i + l] <= dark;
      bright_lanes[l] += x[i + l] >= bright;
      sum_lanes[l] += x[i + l];
    }
  }
  FrameTally tally;
  for (int64_t i = blocks_end; i < n; ++i) {
    tally.dark += x[i] <= dark;
    tally.bright += x[i] >= bright;
    tally.sum += x[i];
  }
  for (int l = 0; l < kBlock; ++l) {
    tally.dark += dark_lanes[l];
    tally.bright += bright_lanes[l];
    tally.sum += sum_lanes[l];
  }
  return tally;
}

// sum (x - mean)^2 over n values, in double.
FRAMEGATE_SIMD_CLONES double SquaredDeviations(const float* x, int64_t n, double mean) {
  double lanes[kBlock] = {};
  const int64_t blocks_end = n / kBlock * kBlock;
  for (int64_t i = 0; i < blocks_end; i += kBlock) {
    for (int l = 0; l < kBlock; ++l) lanes[l] += (x[i + l] - mean) * (x[i + l] - mean);
  }
  double sum = 0.0;
  for (int64_t i = blocks_end; i < n; ++i) sum += (x[i] - mean) * (x[i] - mean);
  for (double v : lanes) sum += v;
  return sum;
}

// sum |a - b| over n values, the differences in float32, the sum in double.
FRAMEGATE_SIMD_CLONES double AbsChangeSum(const float* a, const float* b, int64_t n) {
  double lanes[kBlock] = {};
  const int64_t blocks_end = n / kBlock * kBlock;
  for (int64_t i = 0; i < blocks_end; i += kBlock) {
    for (int l = 0; l < kBlock; ++l) lanes[l] += std::fabs(a[i + l] - b[i + l]);
  }
  double sum = 0.0;
  for (int64_t i = blocks_end; i < n; ++i) sum += std::fabs(a[i] - b[i]);
  for (double v : lanes) sum += v;
  return sum;
}

int Severity(FrameDefect d) {  // higher is worse
  switch (d) {
    case FrameDefect::kNonfinite:
      return 5;
    case FrameDefect::kBlack:
      return 4;
    case FrameDefect::kWhite:
      return 3;
    case FrameDefect::kUniform:
      return 2;
    case FrameDefect::kFrozen:
      return 1;
    case FrameDefect::kNone:
      return 0;
  }
  return 0;
}

// A fraction of n as LibTorch's mean of a 0/1 float32 tensor gives it: float32 division.
double Fraction(int64_t count, int64_t n) { return static_cast<float>(count) / static_cast<float>(n); }

// mean |a - b| over n values.
double MeanAbsChange(const float* a, const float* b, int64_t n) {
  return AbsChangeSum(a, b, n) / static_cast<double>(n);
}

// Whether a frame of n values (`tally`: its Tally) is black or white (at least `covered`
// of its values dark or bright) or flat (its standard deviation under `flat`).
struct Looks {
  bool black = false, white = false, uniform = false;
};
Looks LooksOf(const float* x, int64_t n, const FrameTally& tally, double covered, double flat) {
  Looks looks;
  looks.black = Fraction(tally.dark, n) >= covered;
  looks.white = Fraction(tally.bright, n) >= covered;
  // Standard deviation with Bessel's correction (n - 1), two passes in double, rounded to
  // float32 as LibTorch's std() of a float32 tensor is; NaN for n <= 1.
  const double mean = tally.sum / static_cast<double>(n);
  const double var = SquaredDeviations(x, n, mean) / static_cast<double>(std::max<int64_t>(0, n - 1));
  looks.uniform = static_cast<float>(std::sqrt(var)) < flat;
  return looks;
}

// The defect of frame t alone (and beside frame t - 1 for frozen). The checks that the
// tensor version made one after the other are made in as few passes as they can be. A
// golden frame that looks (nearly) the same way excuses black, white and uniform: a night
// sky, a fade from black, snow are what the model makes.
FrameDefect FrameDefectOf(const VideoView& frames, const VideoView* golden, bool decoded_nonfinite, int64_t t,
                          const FrameHealthThresholds& th) {
  const int64_t n = frames.height * frames.width * frames.channels;
  const float* x = frames.Frame(t).data;
  const float dark = static_cast<float>(th.dark_value), bright = static_cast<float>(th.bright_value);
  const FrameTally tally = Tally(x, n, dark, bright);
  // A sum of finite float32 values in double neither overflows nor becomes NaN: it is
  // not finite exactly when a value is not.
  if (decoded_nonfinite || !std::isfinite(tally.sum)) return FrameDefect::kNonfinite;
  const Looks looks = LooksOf(x, n, tally, th.covered_fraction, th.uniform_std);
  Looks golden_looks;
  if (golden != nullptr && (looks.black || looks.white || looks.uniform)) {
    const float* g = golden->Frame(t).data;
    golden_looks =
        LooksOf(g, n, Tally(g, n, dark, bright), th.golden_covered_fraction, th.golden_uniform_std);
  }
  if (looks.black && !golden_looks.black) return FrameDefect::kBlack;
  if (looks.white && !golden_looks.white) return FrameDefect::kWhite;
  if (looks.uniform && !golden_looks.uniform && !looks.black && !looks.white) return FrameDefect::kUniform;
  if (golden != nullptr && t > 0 && MeanAbsChange(x, frames.Frame(t - 1).data, n) <= th.frozen_change &&
      MeanAbsChange(golden->Frame(t).data, golden->Frame(t - 1).data, n) >= th.golden_moving_change) {
    return FrameDefect::kFrozen;
  }
  return FrameDefect::kNone;
}

}  // namespace

NonfiniteCount CountNonfinite(const float* values, int64_t n) {
  return CountAffineNonfinite(values, n, 1.0f, 0.0f);
}

std::vector<NonfiniteCount> CountNonfiniteFrames(const VideoView& video, float scale, float offset,
                                                 int num_threads) {
  std::vector<NonfiniteCount> counts(video.frames);
  const int64_t n = video.height * video.width * video.channels;
  ForEachFrame(video.frames, num_threads, [&] {
    return [&](int64_t t) { counts[t] = CountAffineNonfinite(video.Frame(t).data, n, scale, offset); };
  });
  return counts;
}

FrameHealth AssessVideoHealth(const VideoView& frames, const std::vector<NonfiniteCount>& decoded_frames,
                              const VideoView& golden, std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& th, int num_threads) {
  assert(static_cast<int64_t>(decoded_frames.size()) == frames.frames);
  FrameHealth health;
  health.step_latents = std::move(step_latents);
  for (size_t i = 0; i < health.step_latents.size(); ++i) {
    if (health.step_latents[i].any()) {
      health.first_nonfinite_step = static_cast<int>(i);
      break;
    }
  }
  for (const NonfiniteCount& c : decoded_frames) {
    health.decoded.nan += c.nan;
    health.decoded.inf += c.inf;
  }
  const bool use_golden = golden.data != nullptr && golden.frames == frames.frames &&
                          golden.height == frames.height && golden.width == frames.width &&
                          golden.channels == frames.channels;
  health.frames.assign(frames.frames, FrameDefect::kNone);
  ForEachFrame(frames.frames, num_threads, [&] {
    return [&](int64_t t) {
      health.frames[t] =
          FrameDefectOf(frames, use_golden ? &golden : nullptr, decoded_frames[t].any(), t, th);
    };
  });
  for (FrameDefect d : health.frames) {
    if (Severity(d) > Severity(health.defect)) health.defect = d;
  }
  for (FrameDefect d : health.frames) health.defect_frames += (d == health.defect && d != FrameDefect::kNone);
  return health;
}

}  // namespace framegate
