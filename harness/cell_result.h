// CellResult: what happened to one cell and the verdict, as a plain value. The checks
// fill it, the store keeps it, the reports read it; nothing else carries cell results.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_status.h"
#include "harness/video.h"

namespace framegate {

// Candidate vs golden. `video` has the per-frame PSNR/SSIM and the video-level errors.
struct ComparisonMetrics {
  VideoMetrics video;
  double latent_cosine = 0;  // cosine similarity of the final latents
  // error(candidate, fp64) / error(fp32 golden, fp64), relative L2 of the frames; only
  // with --fp64-ref.
  std::optional<double> fp64_error_ratio;
};

// A named scalar of a ComparisonMetrics, in a fixed order: min_psnr, mean_ssim,
// min_ssim, max_abs, rel_l2, temporal_rel_l2, latent_cosine[, fp64_error_ratio]. The
// names are the tolerance keys, the JSON keys and the store's metric names.
struct NamedMetric {
  std::string name;
  double value;
};
std::vector<NamedMetric> NamedMetrics(const ComparisonMetrics& metrics);

struct NonfiniteCount {
  int64_t nan = 0;
  int64_t inf = 0;
  bool any() const { return nan > 0 || inf > 0; }
};

// What is wrong with one frame, looked at alone (or, for frozen, beside its neighbour).
enum class FrameDefect { kNone, kNonfinite, kBlack, kWhite, kUniform, kFrozen };
const char* FrameDefectName(FrameDefect defect);  // "none", "nonfinite", "black", ...

// The candidate's health, without the golden (frozen aside: see frame_health.h).
struct FrameHealth {
  std::vector<NonfiniteCount> step_latents;  // latents after each sampler step
  int first_nonfinite_step = -1;             // first step with a NaN/Inf latent; -1 none
  NonfiniteCount decoded;                    // decoder output before any clamping
  std::vector<FrameDefect> frames;           // one per frame
  // The video's defect: the most severe frame defect (nonfinite > black > white >
  // uniform > frozen), kNone when every frame is fine.
  FrameDefect defect = FrameDefect::kNone;
  int defect_frames = 0;  // frames with that defect
};

// Where a non-finite value first appeared: the first (step, module) whose output had one.
struct FirstNonfinite {
  bool found = false;
  int step = 0;        // sampler step, 0-based; -1 for the decoder
  std::string module;  // "blocks.0.spatial_attn.logits", "denoiser.blocks.0.attn"
  // The op inside `module` whose output was the first non-finite value ("aten::log"),
  // when ops are watched (model packages); "" when the module's output was.
  std::string op;
  NonfiniteCount count;

  // "NaN at step 2 in denoiser.blocks.0.attn (aten::softmax)", "Inf at decode in ...".
  std::string Describe() const;
};

// Where a finite failure's error is made (FAIL, BROKEN_FRAMES): the op whose isolated
// error (run under the policy on the FP32 run's inputs, pipelines/module_shadow.h) most
// exceeds what its compute dtype predicts; the modules after it only carry the error.
struct ErrorProducer {
  bool found = false;
  std::string module;          // "denoiser.blocks.1.ff.0"
  std::string op;              // "aten::linear"
  double isolated_error = 0;   // relative L2 against FP32; +inf: made a NaN/Inf from finite inputs
  double predicted_error = 0;  // the unit roundoff of its compute (or weight storage) dtype
  // Why no producer is named, or what limits it ("the reference model has no per-op hooks:
  // the producer is not localised"); "" when found without a caveat.
  std::string note;
  // The norm the error shows in when this op made it by an offset that norm cancels
  // (pipelines/module_shadow.h: "decoder.norm_out", "aten::group_norm"; the errors above
  // are the norm's); empty otherwise. Not stored: the note says it.
  std::string norm_module, norm_op;
  // When that offset was carried to the norm by sums (a residual stream): the sums that
  // carried it and every norm it reached, as (module, op). For the advisor; not stored.
  std::vector<std::pair<std::string, std::string>> offset_stream;
  // When a norm computes in FP32 but the offset it cancels was rounded before it (an FP32
  // island around the norm and its sums, the offset's maker outside): the ops that rounded
  // it (pipelines/module_shadow.h, RoundedNorm::rounded_by), nearest the norm first, as
  // (module, op), whatever op the producer names. For the advisor; not stored.
  std::vector<std::pair<std::string, std::string>> offset_rounded_by;
  // The producer's largest FP32 weight when it is beyond what its FP8 storage holds (they
  // saturate: a cause whatever its error); 0 otherwise. Not stored: the note says it.
  double saturated_weight = 0;
  bool attempted() const { return found || !note.empty(); }
  // One line: "denoiser.blocks.1.ff.0 (aten::linear): isolated error 3.1e-02, 254x the
  // 1.2e-04 its precision predicts"; the note alone when not found.
  std::string Describe() const;
};

// One module's numeric range over the whole run, against its output dtype's limits.
struct ModuleProbe {
  std::string module;
  std::string dtype;              // the dtype whose limits apply ("float16", "bfloat16")
  double absmax = 0;              // largest finite |value| seen
  double overflow_fraction = 0;   // of values beyond the dtype's max (or non-finite)
  double underflow_fraction = 0;  // of non-zero values below its smallest normal
  // log2(dtype max / absmax): doublings left before overflow; +inf when absmax is 0.
  double headroom_bits = 0;
  // Error against the same module in the cell's FP32 run, as SQNR in dB:
  // 20 log10(||ref|| / ||ref - x||) over the whole run; +inf when equal; NaN when not
  // measured (no FP32 run, or the module did not run there).
  double sqnr_db = std::numeric_limits<double>::quiet_NaN();
};

// The precision advisor's answer for a failing cell (`framegate advise`, docs/diagnose.md):
// the modules to keep in FP32 so that the cell passes, proven by a run.
struct AdviceRun {
  AdviceRun() = default;
  AdviceRun(std::vector<std::string> islands, CellStatus status, std::string reason)
      : islands(std::move(islands)), status(status), reason(std::move(reason)) {}
  std::vector<std::string> islands;  // module paths kept in FP32 in this run
  CellStatus status = CellStatus::kUnresolved;
  std::string reason;
  // A run at another seed than the cell's (verifying the islands there); unset at the cell's.
  std::optional<uint64_t> seed;
};
struct Advice {
  CellStatus status_before = CellStatus::kUnresolved;
  CellStatus status_after = CellStatus::kUnresolved;  // of the final islands' run
  std::vector<std::string> islands;                   // the final set (module paths); empty when none found
  std::string policy_name;                            // the suggested policy ("fp16-emulated-islands")
  std::string policy_toml;                            // its [policy.NAME] table, ready for a matrix file
  double fp32_weight_fraction = 0;                    // share of the weights the islands keep in FP32
  std::vector<AdviceRun> runs;                        // every run tried, in order
  // Where the failure is made, as the first run named it ("denoiser.blocks.0.attn
  // (aten::matmul)"; "" when no run named one) and the share of the weights its own island
  // (its module, or the op alone) keeps in FP32.
  std::string culprit;
  double culprit_weight_fraction = 0;
  // Why no island was returned ("no island of at most 50% of the weights ..."), or why the
  // returned ones are not verified; "" otherwise.
  std::string note;
  // False when the returned islands pass at the cell's seed but failed a verification: at
  // another seed, or with FP16's range made smaller (`note` says which).
  bool verified = true;
  bool found() const { return status_after == CellStatus::kPass; }
};

// One step-replay pass of a cell (`check --replay`): every sampler step run from the
// golden's latents before it (teacher forcing) and judged against the golden's latents
// after it, so that an error is found at the step that makes it.
struct StepReplay {
  // Relative L2 of step i's output against the golden's latents after step i.
  std::vector<double> step_rel_l2;
  double decode_rel_l2 = 0;  // frames decoded from the golden's final latents vs its frames
  // Those frames judged by the cell's bound (profile or calibration): the first bound
  // they break ("" when none), their worst-frame PSNR and the bound on it (NaN: none).
  std::string decode_violation;
  double decode_min_psnr = 0;
  double decode_psnr_bound = std::numeric_limits<double>::quiet_NaN();
  // The most a step's rel_l2 may be: from the model's calibration (its FP32 noise floor,
  // measured on this device) for an FP32 cell; NaN when nothing bounds the steps.
  double step_budget = std::numeric_limits<double>::quiet_NaN();
  int first_nonfinite_step = -2;  // first step with a NaN/Inf output; -1 the decode; -2 none
  // sha256 of every step's output and the decoded frames, bytes as computed: equal
  // digests are bitwise equal passes.
  std::string digest;
  // Per step, the L2 norm of each module's output in call order (what a device is
  // compared with its peers by, to name the first module that deviates).
  std::vector<std::vector<double>> module_norms;
  std::vector<std::string> modules;  // the module names of module_norms' columns, step 0's calls
  double seconds = 0;                // the pass's wall time
};

struct CellTimings {
  int warmup = 0;                          // runs before the timed ones
  double load_seconds = 0;                 // model creation and placement
  std::vector<double> generation_seconds;  // one per timed repeat (sampler + decode)
  std::vector<double> step_seconds;        // each sampler step of the first timed repeat
  double decode_seconds = 0;               // of the first timed repeat
  int64_t peak_rss_bytes = 0;              // process high-water mark
  int64_t peak_device_bytes = 0;           // GPU allocator peak, 0 on the CPU
};

struct CellResult {
  Cell cell;
  std::string policy_used;  // the policy that produced the verdict (differs with --fallback)
  CellStatus status = CellStatus::kUnresolved;
  // Why, one line. FAIL: "min_psnr 23.1 < 30"; ERROR: "dtype_mismatch: ..."; NONFINITE:
  // "NaN at step 3 in blocks.0.spatial_attn.logits"; BROKEN_FRAMES: "black: 8 of 8
  // frames"; UNRESOLVED: "no golden: <path> (make it: framegate golden make ...)".
  std::string reason;
  std::string error_class;  // ERROR only: "dtype_mismatch", ...
  // ERROR only: the module path and op where the exception was raised, when known
  // ("denoiser.embed.time_mlp.0", "aten::linear").
  std::string error_module;
  std::string error_op;
  // The bound that judged the metrics (runners/cell_bound.h): "profile bf16",
  // "calibration DIR/calibration-model-x-1a2b3c4d.toml (model sha256 ...)", ...
  std::string judged_by;
  std::optional<ComparisonMetrics> metrics;  // when a golden was compared
  FrameHealth health;
  FirstNonfinite first_nonfinite;
  ErrorProducer producer;           // FAIL and BROKEN_FRAMES: where the error is made
  std::vector<ModuleProbe> probes;  // least headroom first
  // What NaN localisation and probes could see of a package ("denoiser: 23 module calls,
  // 32 ops in 23 graphs; ...") and how the device computed: "accumulation emulated on the
  // CPU: tf32 inputs", "native on CUDA: tf32_cublas=1 ...", "attention: math ...". "" for
  // the reference model under a plain policy (it sees everything, nothing emulated).
  std::string observed;
  // The ops outside any island whose outputs entered an FP32 island of the policy, a module
  // or an op (op island entries, pipelines/package_observer.h): where such an island's input was
  // made. For the advisor; not written to JSON or the store.
  std::vector<std::string> island_input_makers;
  // ERROR dtype_mismatch: where its float32 operand became float32, as an op island entry
  // (ClassifiedError::float32_origin). In the JSON ("" when none), not in the store (the
  // reason names it); the advisor starts there.
  std::string error_float32_origin;
  // FAIL "error made in ..." (a few small modules make the error of a cell within its
  // bound): the islands whose FP32 run left at most half of its error. A run with them
  // is the advisor's first; any other passes only if it leaves as little. For the
  // advisor; not written to JSON or the store.
  std::vector<std::string> made_in_islands;
  // Whether made_in_islands make the compute part's error (an FP8 cell's: its stored
  // weights computed in the policy's dtype against the same computed in FP32), which
  // `compute_metrics` measured. For the advisor; not written to JSON or the store.
  bool made_in_compute_part = false;
  // FAIL because the run held a value within 1 bit of FP16's largest and a run with FP16's
  // range 1 bit smaller did not pass (runners/cell_runner.cc); first_nonfinite is that
  // run's. For the advisor; not written to JSON or the store (the reason says it).
  bool failed_fp16_headroom = false;
  std::optional<ComparisonMetrics> compute_metrics;  // when the compute part was judged
  std::optional<Advice> advice;                      // when `framegate advise` ran on this cell
  std::vector<StepReplay> replays;                   // `check --replay`: one per repeat
  CellTimings timings;
  std::string golden;         // golden file used, "" when none
  std::string artifacts_dir;  // candidate frames/latents saved here, "" when not kept
  std::string repro;          // the one command that reruns this cell alone
};

}  // namespace framegate
