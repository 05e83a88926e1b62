// FrameHealth: what is wrong with a candidate video on its own, before any comparison.
// A NaN frame is never "black": non-finite values are looked for first, in the decoder's
// output before any clamping.
//
// Thresholds (frames in [0, 1], all channels of a frame together):
//   nonfinite  any NaN/Inf in the frame's decoder output
//   black      at least 99% of the values <= 0.05
//   white      at least 99% of the values >= 0.95
//   uniform    standard deviation < 0.01 (a flat frame of any colour)
//   frozen     frame t (t >= 1) differs from frame t-1 by a mean |change| <= 1e-3 while
//              the golden's frames t-1 -> t change by >= 1e-2 (needs the golden)
#pragma once

#include <ATen/core/Tensor.h>

#include "harness/cell_result.h"

namespace framegate {

struct FrameHealthThresholds {
  double dark_value = 0.05, bright_value = 0.95, covered_fraction = 0.99;
  double uniform_std = 0.01;
  double frozen_change = 1e-3, golden_moving_change = 1e-2;
};

NonfiniteCount CountNonfinite(const at::Tensor& t);

// decoded: [1, 3, T, H, W] decoder output, unclamped (any dtype, any device).
// frames:  [T, H, W, 3] float32 in [0, 1] (the candidate as saved).
// golden_frames: [T, H, W, 3] float32, or an undefined tensor when there is none (then
// frozen frames are not looked for). step_latents: per-step counts gathered during the
// run (copied in; first_nonfinite_step derived from them).
FrameHealth AssessFrameHealth(const at::Tensor& decoded, const at::Tensor& frames,
                              const at::Tensor& golden_frames,
                              std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& thresholds = {});

}  // namespace framegate
