#include "harness/checks/frame_health.h"

#include <ATen/ATen.h>

namespace framegate {

NonfiniteCount CountNonfinite(const at::Tensor& t) {
  const at::Tensor x = t.detach();
  if (!at::isfinite(x).all().item<bool>()) {
    return {at::isnan(x).sum().item<int64_t>(), at::isinf(x).sum().item<int64_t>()};
  }
  return {};
}

namespace {

int Severity(FrameDefect d) {  // higher is worse
  switch (d) {
    case FrameDefect::kNonfinite: return 5;
    case FrameDefect::kBlack: return 4;
    case FrameDefect::kWhite: return 3;
    case FrameDefect::kUniform: return 2;
    case FrameDefect::kFrozen: return 1;
    case FrameDefect::kNone: return 0;
  }
  return 0;
}

double MeanAbsChange(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().mean().item<double>();
}

}  // namespace

FrameHealth AssessFrameHealth(const at::Tensor& decoded, const at::Tensor& frames,
                              const at::Tensor& golden_frames,
                              std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& th) {
  FrameHealth health;
  health.step_latents = std::move(step_latents);
  for (size_t i = 0; i < health.step_latents.size(); ++i) {
    if (health.step_latents[i].any()) {
      health.first_nonfinite_step = static_cast<int>(i);
      break;
    }
  }
  const at::Tensor dec = decoded.detach().to(at::kCPU, at::kFloat);  // [1, 3, T, H, W]
  health.decoded = CountNonfinite(dec);
  const at::Tensor f = frames.detach().to(at::kCPU, at::kFloat);     // [T, H, W, 3]
  const int64_t num_frames = f.size(0);
  const bool use_golden = golden_frames.defined() && golden_frames.sizes() == f.sizes();
  for (int64_t t = 0; t < num_frames; ++t) {
    const at::Tensor frame = f[t];
    FrameDefect defect = FrameDefect::kNone;
    if (!at::isfinite(dec.select(2, t)).all().item<bool>() || !at::isfinite(frame).all().item<bool>()) {
      defect = FrameDefect::kNonfinite;
    } else if ((frame <= th.dark_value).to(at::kFloat).mean().item<double>() >= th.covered_fraction) {
      defect = FrameDefect::kBlack;
    } else if ((frame >= th.bright_value).to(at::kFloat).mean().item<double>() >= th.covered_fraction) {
      defect = FrameDefect::kWhite;
    } else if (frame.std().item<double>() < th.uniform_std) {
      defect = FrameDefect::kUniform;
    } else if (use_golden && t > 0 && MeanAbsChange(frame, f[t - 1]) <= th.frozen_change &&
               MeanAbsChange(golden_frames[t], golden_frames[t - 1]) >= th.golden_moving_change) {
      defect = FrameDefect::kFrozen;
    }
    health.frames.push_back(defect);
    if (Severity(defect) > Severity(health.defect)) health.defect = defect;
  }
  for (FrameDefect d : health.frames) health.defect_frames += (d == health.defect && d != FrameDefect::kNone);
  return health;
}

}  // namespace framegate
