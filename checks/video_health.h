// VideoHealth: what is wrong with a candidate video on its own, on plain float32 views
// (no LibTorch): the one implementation of frame health. checks/frame_health.h
// is its LibTorch front for the pipeline (tensors in, the same FrameHealth out).
//
// A NaN frame is never "black": non-finite values are looked for first, in the decoder's
// output before any clamping. Thresholds (frames in [0, 1], all channels of a frame
// together):
//   nonfinite  any NaN/Inf in the frame, or in the decoder's output for that frame
//   black      at least 99% of the values <= 0.05
//   white      at least 99% of the values >= 0.95
//   uniform    standard deviation < 0.01 (a flat frame of any colour)
//   (none of these three where the golden's frame is so too, by the looser
//   golden_covered_fraction 0.9 and golden_uniform_std 0.02: a night sky, a fade from
//   black, snow, a candidate a little past a threshold that its golden is near)
//   frozen     frame t (t >= 1) differs from frame t-1 by a mean |change| <= 1e-3 while
//              the golden's frames t-1 -> t change by >= 1e-2 (needs the golden)
// The comparisons are those LibTorch made when the checks were tensor expressions
// (value thresholds and fractions in float32, the standard deviation with Bessel's
// correction), so that a frame gets the same defect as before.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/cell_result.h"
#include "harness/video.h"

namespace framegate {

struct FrameHealthThresholds {
  double dark_value = 0.05, bright_value = 0.95, covered_fraction = 0.99;
  double uniform_std = 0.01;
  double golden_covered_fraction = 0.9, golden_uniform_std = 0.02;
  double frozen_change = 1e-3, golden_moving_change = 1e-2;
};

// NaN and Inf counts of n float32 values.
NonfiniteCount CountNonfinite(const float* values, int64_t n);

// Per frame t of `video`, the NaN and Inf counts of scale * v + offset computed in
// float32 for every value v of the frame (scale 2, offset -1: the decoder's [-1, 1] range
// of frames in [0, 1], where a huge finite value overflows). On up to num_threads threads.
std::vector<NonfiniteCount> CountNonfiniteFrames(const VideoView& video, float scale = 1.0f,
                                                 float offset = 0.0f, int num_threads = 1);

// frames: the candidate [T, H, W, C] (float32, nominally [0, 1]).
// decoded_frames: per frame, the NaN/Inf count of the decoder's output for it (T entries;
// health.decoded is their sum).
// golden: the golden video, or a view with null data when there is none; frozen frames
// are looked for only when it has the shape of `frames`.
// step_latents: per-step counts gathered during the run (first_nonfinite_step derived).
// num_threads: threads over frames, the calling one included (below 1 counts as 1); the
// result does not depend on it.
// Precondition (asserted): decoded_frames.size() == frames.frames.
FrameHealth AssessVideoHealth(const VideoView& frames, const std::vector<NonfiniteCount>& decoded_frames,
                              const VideoView& golden, std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& thresholds = {}, int num_threads = 1);

}  // namespace framegate
