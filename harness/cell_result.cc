#include "harness/cell_result.h"

#include <cmath>
#include <cstdio>

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

std::string FirstNonfinite::Describe() const {
  return std::string(count.nan > 0 ? "NaN" : "Inf") + " at " +
         (step < 0 ? std::string("decode") : "step " + std::to_string(step)) + " in " + module +
         (op.empty() ? "" : " (" + op + ")");
}

std::string ErrorProducer::Describe() const {
  if (!found) return note;
  char numbers[160];
  if (std::isfinite(isolated_error)) {
    std::snprintf(numbers, sizeof numbers, "isolated error %.2e, %.0fx the %.2e its precision predicts",
                  isolated_error, predicted_error > 0 ? isolated_error / predicted_error : 0.0,
                  predicted_error);
  } else {
    std::snprintf(numbers, sizeof numbers, "a NaN/Inf from finite FP32 inputs (its precision predicts %.2e)",
                  predicted_error);
  }
  std::string line = module + (op.empty() ? "" : " (" + op + ")") + ": " + numbers;
  return note.empty() ? line : line + "; " + note;
}

}  // namespace framegate
