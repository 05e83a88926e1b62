#include "harness/cell_result.h"

namespace framegate {

std::vector<NamedMetric> NamedMetrics(const ComparisonMetrics& m) {
  std::vector<NamedMetric> named = {
      {"min_psnr", m.video.min_psnr},     {"mean_ssim", m.video.mean_ssim},
      {"min_ssim", m.video.min_ssim},     {"max_abs", m.video.max_abs},
      {"rel_l2", m.video.rel_l2},         {"temporal_rel_l2", m.video.temporal_rel_l2},
      {"latent_cosine", m.latent_cosine},
  };
  if (m.fp64_error_ratio) named.push_back({"fp64_error_ratio", *m.fp64_error_ratio});
  return named;
}

const char* FrameDefectName(FrameDefect defect) {
  switch (defect) {
    case FrameDefect::kNone:
      return "none";
    case FrameDefect::kNonfinite:
      return "nonfinite";
    case FrameDefect::kBlack:
      return "black";
    case FrameDefect::kWhite:
      return "white";
    case FrameDefect::kUniform:
      return "uniform";
    case FrameDefect::kFrozen:
      return "frozen";
  }
  return "none";
}

}  // namespace framegate
