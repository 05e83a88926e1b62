// FrameMetrics: how far a generated video is from its golden video, as numbers.
//
// Videos are float32 [T, H, W, C] in C order (C = 3 for RGB), values nominally in
// [0, 1]; the data range used by PSNR and SSIM is 1.0. Per frame: PSNR and SSIM,
// matching scikit-image 0.19:
//   peak_signal_noise_ratio(ref[t], cand[t], data_range=1.0)
//   structural_similarity(ref[t], cand[t], data_range=1.0, channel_axis=-1,
//       gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
// to 1e-4 (PSNR: 1e-3 dB); see tests/data/metric-vectors. Over the video: max abs
// error, relative L2 error and a temporal error (below).
//
// Numbers that are not finite, by design (a validation harness must never turn a
// broken frame into a good score):
//   - PSNR is +infinity where the two frames are identical (skimage: inf, JSON: null).
//   - A NaN anywhere in either input makes every metric that reads it NaN
//     (max_abs included).
//   - An Inf in either input makes the PSNR of its frame and the cosine NaN (not
//     defined: never -inf, never a perfect score); max_abs and the relative errors are
//     then +infinity or NaN.
//   - A relative error whose denominator is 0 is 0 when its numerator is 0 too, and
//     +infinity otherwise.
//   - SSIM is NaN for frames smaller than 11x11 (skimage raises instead).
//   - A finite value so far from the frame's values (about 1e19) that its square
//     overflows float32 makes the SSIM of each window that holds it 0 (in double it
//     is a tiny positive number).
//
// All functions are pure and thread-safe; they do not keep the pointers they get.
// Sums, errors and PSNR are computed in double. SSIM's Gaussian filters run in float32
// SIMD (AVX-512, AVX2 or SSE2, picked at load time) on values centred per frame and
// channel, which keeps the float32 rounding of its variances (differences of nearly
// equal filtered moments) small; the SSIM formula and the per-frame mean are in double.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/status.h"
#include "harness/video.h"

namespace framegate {

// InvalidInput when a dimension is negative, data is null for a non-empty video, or the
// shapes differ; the message names both shapes ("reference [2, 24, 64, 3] vs candidate
// [2, 24, 64, 4]"). Callers check this before ComputeVideoMetrics.
Status CheckSameShape(const VideoView& ref, const VideoView& cand);

struct FrameMetricsOptions {
  // Threads over frames, the calling one included (values below 1 count as 1; no more
  // than one per frame). Results do not depend on it: each frame is scored alone and the
  // sums are reduced in frame order.
  int num_threads = 1;
};

// Per-frame PSNR and SSIM and the video-level values for two videos of the same shape
// (precondition, asserted: CheckSameShape(ref, cand).ok()). An empty video (T = 0)
// gives no frames and zeros.
VideoMetrics ComputeVideoMetrics(const VideoView& ref, const VideoView& cand,
                                 const FrameMetricsOptions& options = {});

// PSNR of one frame pair, data range 1.0: 10 * log10(1 / mean((cand - ref)^2)).
// Precondition (asserted): same shape.
double FramePsnr(const FrameView& ref, const FrameView& cand);

// SSIM of one frame pair as described at the top of this file: Gaussian window 11x11,
// sigma 1.5, K1 = 0.01, K2 = 0.03, population covariances, mean over the valid region
// (5 pixels cropped from each border) and over channels. Precondition (asserted): same
// shape.
double FrameSsim(const FrameView& ref, const FrameView& cand);

// dot(a, b) / (||a|| ||b||) for two flat arrays of n floats (e.g. final latents),
// clamped to [-1, 1]. 1 when both are all zeros (or n = 0), 0 when exactly one is.
double CosineSimilarity(const float* a, const float* b, int64_t n);

}  // namespace framegate
