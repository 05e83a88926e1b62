// Tolerance profiles: how close a candidate must be to its golden. One profile per dtype
// policy, named after it (a matrix may name another). The shipped profiles are
// checks/tolerances.toml, compiled in; docs/tolerances.md shows the measurements each
// bound comes from.
//
//   [profile.NAME]
//   min_psnr = 40.0             # dB, worst frame       (ComparisonMetrics: min_psnr)
//   min_mean_ssim = 0.99        # mean over frames      (mean_ssim)
//   min_ssim = 0.99             # worst frame           (min_ssim)
//   max_abs = 0.05              # largest |error|       (max_abs)
//   max_rel_l2 = 0.01           #                       (rel_l2)
//   min_latent_cosine = 0.999   #                       (latent_cosine)
//   max_temporal_rel_l2 = 0.02  #                       (temporal_rel_l2)
//   max_fp64_ratio = 4.0        # only with --fp64-ref  (fp64_error_ratio)
// Every key is optional: a missing key is not checked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cell_result.h"
#include "harness/status.h"

namespace framegate {

struct ToleranceBound {
  std::string metric;  // a NamedMetrics() name
  bool is_min;         // value must be >= bound (else <= bound)
  double bound;
};

struct ToleranceProfile {
  std::string name;
  std::vector<ToleranceBound> bounds;  // in NamedMetrics() order
};

struct ToleranceViolation {
  ToleranceBound bound;
  double value;
  // "min_psnr 23.41 < 40" / "max_abs 0.31 > 0.05" / "min_psnr nan (not a number)"
  std::string Reason() const;
};

// Errors name `source`, line:column and the problem (unknown key, not a number).
StatusOr<std::vector<ToleranceProfile>> ParseToleranceProfiles(const std::string& toml_text,
                                                               const std::string& source);
// The [SECTION.NAME] tables of a TOML text as profiles named NAME, other keys ignored
// (model.toml's [tolerance.POLICY]); none when there is no SECTION. Errors as above.
StatusOr<std::vector<ToleranceProfile>> ParseToleranceSection(const std::string& toml_text,
                                                              const std::string& source,
                                                              const std::string& section);
const std::vector<ToleranceProfile>& ShippedToleranceProfiles();
// A shipped profile by name; InvalidInput listing the known names otherwise.
StatusOr<ToleranceProfile> FindToleranceProfile(const std::string& name);

// The first bound (in NamedMetrics() order) the metrics break; NaN breaks every bound.
// A bound on a metric the metrics do not have (fp64_error_ratio without --fp64-ref, the
// SSIMs of frames smaller than SSIM's window: ssim_measured false) is skipped.
std::optional<ToleranceViolation> FirstViolation(const ToleranceProfile& profile,
                                                 const ComparisonMetrics& metrics);

// `profile` allowing `factor` times the error of each bound: min_psnr 20 log10(factor) dB
// lower; the error maxima (max_abs, max_rel_l2, max_temporal_rel_l2, max_fp64_ratio)
// times factor; the similarities' distance from 1 (SSIMs, latent cosine) times factor^2,
// no floor below 0: that distance grows as the square of the error (1 - cos t ~ t^2 / 2;
// 1 - SSIM ~ the error's variance over the frame's), as the population bounds' 4x the
// worst distance is their 2x the error. Named "NAME x<factor>".
ToleranceProfile AllowingErrorTimes(const ToleranceProfile& profile, double factor);

// The error `value` of `bound`'s metric stands for: min_psnr's amplitude 10^(-value/20),
// an error maximum itself, a similarity's distance from 1 (an error's square). Larger is
// worse.
double ErrorOf(const ToleranceBound& bound, double value);
// The value of `bound`'s metric whose ErrorOf is `error` (its inverse); a similarity no
// lower than 0.
double ValueOfError(const ToleranceBound& bound, double error);
// ErrorOf units of `bound`'s metric when the amplitude error `error` stands for grows `factor`
// times: factor x a PSNR's or an error maximum's, factor^2 x a similarity's distance.
double ErrorTimes(const ToleranceBound& bound, double error, double factor);

// `metrics`' value of the metric `name` (a NamedMetrics() name); NaN when it has none.
double MetricValue(const ComparisonMetrics& metrics, const std::string& name);

}  // namespace framegate
