#include "checks/frame_health.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace framegate {

NonfiniteCount CountNonfinite(const at::Tensor& t) {
  const at::Tensor x = t.detach();
  if (!at::isfinite(x).all().item<bool>()) {
    return {at::isnan(x).sum().item<int64_t>(), at::isinf(x).sum().item<int64_t>()};
  }
  return {};
}

namespace {

// A [T, H, W, C] float32 CPU contiguous tensor as a view (it must outlive the view).
VideoView ViewOf(const at::Tensor& v) {
  return {v.data_ptr<float>(), v.size(0), v.size(1), v.size(2), v.size(3)};
}

}  // namespace

FrameHealth AssessFrameHealth(const at::Tensor& decoded, const at::Tensor& frames,
                              const at::Tensor& golden_frames, std::vector<NonfiniteCount> step_latents,
                              const FrameHealthThresholds& thresholds) {
  const at::Tensor dec = decoded.detach().to(at::kCPU, at::kFloat);            // [1, 3, T, H, W]
  const at::Tensor f = frames.detach().to(at::kCPU, at::kFloat).contiguous();  // [T, H, W, 3]
  const int64_t num_frames = f.size(0);
  // The decoder output's counts per frame (dimension 2), all zero in the common case.
  std::vector<NonfiniteCount> decoded_frames(num_frames);
  if (!at::isfinite(dec).all().item<bool>()) {
    std::vector<int64_t> reduce;
    for (int64_t d = 0; d < dec.dim(); ++d) {
      if (d != 2) reduce.push_back(d);
    }
    const at::Tensor nan = at::isnan(dec).sum(reduce).to(at::kLong).contiguous();
    const at::Tensor inf = at::isinf(dec).sum(reduce).to(at::kLong).contiguous();
    for (int64_t t = 0; t < std::min(num_frames, nan.numel()); ++t) {
      decoded_frames[t] = {nan.data_ptr<int64_t>()[t], inf.data_ptr<int64_t>()[t]};
    }
  }
  at::Tensor golden;
  if (golden_frames.defined() && golden_frames.sizes() == f.sizes()) {
    golden = golden_frames.detach().to(at::kCPU, at::kFloat).contiguous();
  }
  return AssessVideoHealth(ViewOf(f), decoded_frames, golden.defined() ? ViewOf(golden) : VideoView{},
                           std::move(step_latents), thresholds);
}

}  // namespace framegate
