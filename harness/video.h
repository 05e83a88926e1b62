// Videos as plain views and their scores: the values the checks compute and the cell
// results, store and reports carry (checks/frame_metrics.h computes them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace framegate {

// One frame: [height, width, channels], C order. Does not own `data`.
struct FrameView {
  const float* data = nullptr;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
};

// A video: [frames, height, width, channels], C order. Does not own `data`.
struct VideoView {
  const float* data = nullptr;
  int64_t frames = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;

  int64_t NumElements() const { return frames * height * width * channels; }
  // Frame t, 0 <= t < frames.
  FrameView Frame(int64_t t) const;
  // "[T, H, W, C]", for messages.
  std::string ShapeString() const;
};

// Frame scores. `psnr`: dB, +infinity for identical frames. `ssim`: in [-1, 1], 1 for
// identical frames; NaN when height or width < 11.
struct FrameScores {
  double psnr = 0.0;
  double ssim = 0.0;
};

struct VideoMetrics {
  std::vector<FrameScores> frames;  // one per frame, in order
  double min_psnr = 0.0;            // over frames; +infinity when every frame is identical
  double mean_ssim = 0.0;           // over frames
  double min_ssim = 0.0;            // over frames
  // False when the frames are smaller than SSIM's 11x11 window: the SSIMs are NaN, and
  // no bound judges them (checks/tolerance.h).
  bool ssim_measured = true;
  // max |cand - ref| over all elements.
  double max_abs = 0.0;
  // ||cand - ref||_2 / ||ref||_2 over all elements.
  double rel_l2 = 0.0;
  // How far the candidate's frame-to-frame changes are from the reference's, with
  // dr[t] = ref[t+1] - ref[t] and dc[t] = cand[t+1] - cand[t], t = 0 .. T-2:
  //   sqrt(sum_t ||dc[t] - dr[t]||^2) / sqrt(sum_t ||dr[t]||^2).
  // 0 for a single frame (no changes to compare). A frozen candidate against a moving
  // reference gives 1; a candidate that moves while the reference is static gives
  // +infinity (the zero-denominator rule above).
  double temporal_rel_l2 = 0.0;
  // Cosine similarity of the two videos as flat vectors (CosineSimilarity in
  // checks/frame_metrics.h), from the same pass over the frames.
  double cosine = 0.0;
};

}  // namespace framegate
