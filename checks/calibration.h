// A model's own calibration (`framegate calibrate`): what FP32 noise and each policy's
// error look like on this model, measured and kept beside its goldens, with the
// provenance that says which model and goldens it was measured on. A check input: the
// verdict turns it into a tolerance profile by the bound rule below.
//
//   GOLDEN_DIR/calibration-<pipeline>[-<fault>]-<config hash, 8 hex>.toml
//
//   format_version = 1
//   pipeline = "model:clean"            # GoldenKey.pipeline
//   weights = "denoiser=..,decoder=.."  # GoldenKey.weights (sha256 prefixes; "seed=0")
//   fault = ""                          # reference fault case
//   config = "sampler=ddim|steps=8|guidance=5"
//   framegate_version = "0.1.0"
//   created_at = "2025-01-01T00:00:00Z"
//   multiplier = 2.0
//   [model_sha256]    "denoiser.pt" = "..", "decoder.pt" = "..", "model.toml" = ".."
//   [golden_sha256]   "<golden file name>" = ".."
//   [noise_floor]     runs = [..]; min_psnr = .. (the worst of each metric over the runs);
//                     step_rel_l2 = .. (the worst step of their step replays, when measured)
//   [policy.NAME]     seeds = [0, 1, 2]; min_psnr = .. (the worst over the seeds), or
//                     not_calibrated = "why" (the run did not finish or was not finite)
//
// The metric keys are NamedMetrics() names (min_psnr, mean_ssim, min_ssim, max_abs,
// rel_l2, temporal_rel_l2, latent_cosine): measured values, not bounds.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "checks/tolerance.h"
#include "harness/cell_result.h"
#include "harness/status.h"

namespace framegate {

// The bound rule (the FlashAttention-3 test's, "at most m times the reference's error"):
// a metric's error may be at most kCalibrationMultiplier x the calibrated reference error
// plus the FP32 noise floor. Errors: max_abs, rel_l2, temporal_rel_l2 as they are; the
// RMS error 10^(-psnr/20) for min_psnr (so with no noise min_psnr >= worst - 6.02 dB);
// for mean_ssim, min_ssim, latent_cosine their distance 1 - value, which is the square of
// an error, so m x the error is m^2 x that distance (tolerance.h's ErrorTimes). The noise
// floor is at least kCalibrationNoiseMinimum in these units (float32's own resolution,
// 120 dB), so that a model measured exact on one machine is not held to exactness on another.
constexpr double kCalibrationMultiplier = 2.0;
constexpr double kCalibrationNoiseMinimum = 1e-6;

struct PolicyCalibration {
  std::vector<uint64_t> seeds;
  std::vector<NamedMetric> worst;  // the worst of each metric over the seeds
  std::string not_calibrated;      // why there is no measurement ("" when measured)
};

struct Calibration {
  std::string source;  // the file it was read from ("" before it is written)
  std::string pipeline, weights, fault, config;
  std::string framegate_version, created_at;
  double multiplier = kCalibrationMultiplier;
  std::map<std::string, std::string> model_sha256;   // "model.toml" -> sha256, ...
  std::map<std::string, std::string> golden_sha256;  // golden file name -> sha256
  std::vector<std::string> noise_runs;               // "cpu threads=1", "cpu:avx2 threads=2"
  std::vector<NamedMetric> noise_floor;              // worst deviation of the FP32 reruns
  // The worst rel_l2 of any step of the FP32 reruns' step replays (`check --replay`): how
  // far a healthy device's step lands from the golden's. NaN when not measured (older files).
  double noise_step_rel_l2 = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, PolicyCalibration> policies;
};

// Folds `metrics` into `worst` (NamedMetrics order; psnr/similarities keep the lowest,
// errors the highest, NaN wins). fp64_error_ratio is left out.
void KeepWorst(const ComparisonMetrics& metrics, std::vector<NamedMetric>* worst);

// The bound on `metric` from its calibrated reference value and noise-floor value (both
// measured metric values, e.g. PSNRs in dB) under the rule above.
double CalibratedBound(const std::string& metric, double reference, double noise, double multiplier);

// The most an FP32 step replay's step may be off the golden on `device` (the bound rule
// with the noise floor as the reference: multiplier x noise_step_rel_l2 + the noise
// minimum); NaN when the step noise was not measured or not on `device` (a noise run's
// device: "cpu", "cpu:avx2", ...), since another device's FP32 noise may be larger.
double StepBudget(const Calibration& calibration, const std::string& device);

// The profile `policy` is judged by under `calibration` ("calibration" named after the
// file); NotFound when the policy was not calibrated (then say why).
StatusOr<ToleranceProfile> CalibratedProfile(const Calibration& calibration, const std::string& policy);

// The file's text (ParseCalibration reads it back to the same values).
std::string CalibrationToToml(const Calibration& calibration);
// Corrupt naming `source`, the line:column and the problem when the text is not a
// calibration of this format.
StatusOr<Calibration> ParseCalibration(const std::string& text, const std::string& source);
// NotFound when `path` does not exist; else ParseCalibration of its text.
StatusOr<Calibration> ReadCalibrationFile(const std::string& path);

// Bounds a model sets itself: model.toml's [tolerance.POLICY] tables, with the keys of a
// tolerance profile (tolerance.h). NotFound when model.toml has none for `policy`;
// InvalidInput naming model.toml's place for a bad table.
StatusOr<ToleranceProfile> ModelTomlProfile(const std::string& model_toml_path, const std::string& policy);

}  // namespace framegate
