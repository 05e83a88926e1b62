// Which bound judges a cell, and the words that say so in its result (the terminal, the
// JSON, the store's cells.judged_by). One place decides it, by this precedence:
//
//   1. an explicit profile: the cell's tolerance (a matrix's [tolerance] or [[include]]
//      tolerance, `check --tolerance`) or the policy's `tolerance` key
//                                             -> "profile NAME (explicit)"
//   2. the package's model.toml [tolerance.POLICY] table
//                                             -> "model.toml [tolerance.POLICY]"
//   3. the model's calibration beside its golden (checks/calibration.h), when its
//      provenance matches the model and the golden being judged
//                                             -> "calibration FILE (model sha256 ...)"
//   4. the policy's tolerance profile         -> "profile NAME"
//      and, for FP8 storage under 16-bit compute, its compute part (ComputePartBound)
//                                             -> "profile NAME; compute part: profile
//                                                 bf16 against its fp8e4m3 weights
//                                                 computed in FP32"
//      and, but for fp32, that profile at kSensitiveModelErrorFactor times its error for
//      a model more sensitive than the population the profile was fitted on: a finite
//      FAIL within it whose every op makes about the error its precision predicts
//      (runners/error_producer.h: RoundingAloneMadeTheError) is a PASS judged by it,
//      and so is its compute part's profile
//                                             -> "profile NAME at 2x its error: ..."
//
// A calibration that does not match (the model or the golden changed since) or that has
// no measurement for the policy falls back to 4 and says why:
//   "profile bf16 (calibration FILE is stale: the model's modules changed)".
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "checks/calibration.h"
#include "checks/tolerance.h"
#include "golden/golden_store.h"
#include "harness/status.h"
#include "runners/cell_runner.h"

namespace framegate {

// The compute part of a policy whose weights are stored in FP8 and computed in a 16-bit
// dtype (fp8e4m3-bf16): its frames against the same stored weights computed in FP32,
// judged by the compute dtype's profile (bf16's). A compute defect (a value the compute
// dtype cannot hold well) costs a model as much as under that dtype alone, but FP8
// storage makes a larger error of its own, so the storage's profile alone passes it.
struct ComputePartBound {
  DtypePolicy reference;       // the cell's storage and FP32 islands, FP32 compute
  ToleranceProfile profile;    // the compute dtype's
  std::string reference_text;  // "its fp8e4m3 weights computed in FP32"
  std::string judged_by;       // "profile bf16 against " + reference_text
  // Set with JudgingBound::sensitive_model: `profile` at kSensitiveModelErrorFactor.
  std::optional<ToleranceProfile> sensitive_model;
};

struct JudgingBound {
  ToleranceProfile profile;
  std::string judged_by;
  // Set when the policy's own profile judges the cell (4 above) and the policy has a
  // compute part; a model's own bound (1-3) judges the whole error alone.
  std::optional<ComputePartBound> compute_part;
  // The most a step replay's step may be off the golden (StepBudget): set for an FP32
  // cell whose calibration (3 above, found and not stale) measured the steps' FP32 noise
  // on the cell's device; NaN otherwise.
  double step_budget = std::numeric_limits<double>::quiet_NaN();
  // Set with 4 but for fp32: the profile allowing kSensitiveModelErrorFactor times its
  // error (above).
  std::optional<ToleranceProfile> sensitive_model;
};

// How much more error than a population profile allows a model may make when none of its
// ops makes more than its precision predicts: the population's bounds sit 2x the error
// below its worst design; healthy designs outside it measured 2.1-2.5 dB (1.3x) beyond
// (docs/tolerances.md, "A model more sensitive than the population").
constexpr double kSensitiveModelErrorFactor = 2;

// Weights that FP8 storage cannot hold (saturates or flushes) make a cell's error when it is at least this
// many times (relative L2 of the frames) the error of the same weights scaled to fit.
constexpr double kFp8RangeErrorFactor = 1.25;

// Where the search names ops at kCauseExcess (runners/error_producer.h) in such a FAIL,
// they are kept in FP32 in one more run of the cell: they do not make its error when
// that run still breaks the profile with at least this share of the error (then a search
// of that run decides as above). Measured: an AnimateDiff UNet whose FP8-flushed motion
// outputs (8x) are a thousandth of the residual they join kept 0.99 of its error;
// planted defects keep 0.3 or less (docs/tolerances.md).
constexpr double kNamedOpsErrorShare = 0.8;

// A cell within its bound whose error a few small modules make (a blend weight the policy
// stores as 1.0, a timestep rounded before its sinusoid): the bound, fitted on models
// without them, is wider than the damage. A passing cell using at least
// kMadeInModulesBandShare of its bound's error (ErrorOf's units) is searched; its causes
// (ops at kCauseExcess or more, cancelling sums and their makers, a cancelled offset's
// maker) are kept in FP32 in one more run, each by its module while the modules together
// hold at most kMadeInModulesMaxWeightShare of the weights (never a component's root);
// the error is theirs when that run's relative L2 is at most 1 / kMadeInModulesErrorFactor
// of the cell's. Measured on 214 package x seed runs of the helper rounds (docs/
// tolerances.md, "Error made in a few small modules"): healthy cells whose cause modules hold
// at most 30% of the weights kept at least 0.64 of their error (1.57x), planted defects
// 0.08-0.31 (3.2-12x); 11% of healthy passing cells used a quarter of their bound.
constexpr double kMadeInModulesBandShare = 0.25;
constexpr double kMadeInModulesMaxWeightShare = 0.1;
// A cause at kMadeInModulesStrongExcess or more (an error far past any rounding: a blend
// weight stored as 1.0, an offset 16x its spread) may bring them to this share. Measured
// on the 614 runs of three rounds (docs/tolerances.md): no healthy cell changed, a blend
// in a block of 10.3% of the weights FAILs (4 cells; 0.18-0.49 of the error left). Made
// at a component's root, such a cause keeps the root's own ops (an op island) and its
// scalars instead of the whole component.
constexpr double kMadeInModulesStrongExcess = 16;
constexpr double kMadeInModulesStrongMaxWeightShare = 0.3;
constexpr double kMadeInModulesErrorFactor = 2;
// The same rule on an FP8 cell's compute part (its stored weights computed in the policy's
// dtype, against the same weights computed in FP32), searched when the whole error's is
// not found: the whole error is mostly FP8 storage's, which a few modules in FP32 take
// away with their weights. Its run keeps the islands in FP32 in the reference too, and
// the error is theirs at 1 / kMadeInComputePartErrorFactor. Measured on 183 runs of the
// helper rounds (366 FP8 cells, docs/tolerances.md): planted defects left 0.13-0.33 of
// the compute part's error; healthy models with steep attention 0.43-0.47, and one with
// a +256 attention sink, which the rule already FAILs under BF16, 0.27-0.40.
constexpr double kMadeInComputePartErrorFactor = 2.5;

// The compute part of `policy`, nullopt when it has none (storage not FP8, or FP32 or
// emulated compute). InvalidInput when the compute dtype's profile is missing.
StatusOr<std::optional<ComputePartBound>> ComputePartBoundOf(const DtypePolicy& policy);

// The calibration file of `key`'s config in `golden_dir`: keyed like the golden but by
// neither the seed nor the model's weights, so that a changed model finds its old
// calibration and is told it is stale. "calibration-model-clean-1a2b3c4d.toml".
std::string CalibrationPathFor(const GoldenKey& key, const std::string& golden_dir);
// The sampler part of the config a calibration is for: "sampler=ddim|steps=8|guidance=5".
std::string CalibrationConfigOf(const GoldenKey& key);
// sha256 of a package's denoiser.pt, decoder.pt and model.toml by file name; none for the
// reference model (its weights are its GoldenKey's seed). IoError naming a missing file.
StatusOr<std::map<std::string, std::string>> ModelFileSha256(const std::string& model_dir);

// The bound that judges `cell` (precedence above). `golden_path`: the golden the cell is
// compared with ("" when none); `use_calibration` false skips 3 (`calibrate` itself,
// `check --ignore-calibration`). Corrupt naming the file for a calibration file that is
// not one; InvalidInput naming model.toml for a bad [tolerance.POLICY].
// The `framegate calibrate` command that measures `calibration`'s policies and seeds again,
// with the cell's policy (and its --policy-file) among them, for the cell's config into
// `golden_dir`: what the note of a stale calibration, or of one without the cell's policy,
// tells to run.
std::string CalibrateAgainCommand(const Calibration& calibration, const ResolvedCell& cell,
                                  const std::string& golden_dir);

StatusOr<JudgingBound> JudgingBoundOf(const ResolvedCell& cell, const std::string& golden_dir,
                                      const std::string& golden_path, bool use_calibration);

}  // namespace framegate
