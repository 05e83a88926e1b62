// FrameHealth on tensors: the pipeline's front for checks/video_health.h, which
// has the checks and their thresholds (one implementation; this converts and calls it).
#pragma once

#include <ATen/core/Tensor.h>

#include "checks/video_health.h"
#include "harness/cell_result.h"

namespace framegate {

NonfiniteCount CountNonfinite(const at::Tensor& t);

// decoded: [1, 3, T, H, W] decoder output, unclamped (any dtype, any device).
// frames:  [T, H, W, 3] float32 in [0, 1] (the candidate as saved).
// golden_frames: [T, H, W, 3] float32, or an undefined tensor when there is none (then
// frozen frames are not looked for). step_latents: per-step counts gathered during the
// run (copied in; first_nonfinite_step derived from them).
FrameHealth AssessFrameHealth(const at::Tensor& decoded, const at::Tensor& frames,
                              const at::Tensor& golden_frames, std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& thresholds = {});

}  // namespace framegate
