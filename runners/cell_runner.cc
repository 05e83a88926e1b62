#include "runners/cell_runner.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "checks/frame_health.h"
#include "checks/frame_metrics.h"
#include "checks/numeric_probes.h"
#include "checks/tolerance.h"
#include "checks/verdict.h"
#include "golden/golden_store.h"
#include "harness/memory_info.h"
#include "harness/npy.h"
#include "harness/printf.h"
#include "harness/sha256.h"
#include "pipelines/model_package.h"
#include "pipelines/module_shadow.h"
#include "pipelines/op_islands.h"
#include "runners/cell_bound.h"
#include "runners/error_producer.h"
#include "runners/step_replay.h"

namespace framegate {
namespace {

double GenerationSeconds(const GenerationResult& r) {
  double total = r.decode_seconds;
  for (double s : r.step_seconds) total += s;
  return total;
}

Status SaveArtifacts(const std::string& dir, const GenerationResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create: " + ec.message());
  const at::Tensor frames = r.frames.contiguous();
  const at::Tensor latents = r.latents.contiguous();
  FG_RETURN_IF_ERROR(WriteNpyFloat32(dir + "/frames.npy", frames.sizes().vec(), frames.data_ptr<float>()));
  return WriteNpyFloat32(dir + "/latents.npy", latents.sizes().vec(), latents.data_ptr<float>());
}

ComparisonMetrics Compare(const Golden& golden, const GenerationResult& r) {
  const at::Tensor g = golden.frames.contiguous(), c = r.frames.contiguous();  // [T, H, W, 3]
  const VideoView ref{g.data_ptr<float>(), g.size(0), g.size(1), g.size(2), g.size(3)};
  const VideoView cand{c.data_ptr<float>(), c.size(0), c.size(1), c.size(2), c.size(3)};
  ComparisonMetrics m;
  m.video = ComputeVideoMetrics(ref, cand, {at::get_num_threads()});
  const at::Tensor gl = golden.latents.contiguous(), cl = r.latents.contiguous();
  m.latent_cosine = CosineSimilarity(gl.data_ptr<float>(), cl.data_ptr<float>(), gl.numel());
  return m;
}

// Why no bound judged the SSIMs, or "" when they were measured.
std::string SsimNote(const std::optional<ComparisonMetrics>& metrics) {
  if (!metrics || metrics->video.ssim_measured) return "";
  return "mean_ssim and min_ssim not judged: frames smaller than SSIM's 11x11 window";
}

// The command that makes the golden `cell` is judged by: its config in FP32 on the CPU.
std::string MakeGoldenCommand(const ResolvedCell& cell, const std::string& dir) {
  PipelineSpec fp32 = cell.spec;
  fp32.policy = Fp32Policy();
  fp32.device = "cpu";
  return GoldenMakeCommand(fp32, dir);
}

// The golden for `spec`, or why there is none (missing: UNRESOLVED) or a Status for a
// golden that exists but cannot be trusted.
struct GoldenLookup {
  std::optional<Golden> golden;
  std::string unresolved;
};
StatusOr<GoldenLookup> LookUpGolden(const ResolvedCell& cell, const std::string& dir,
                                    std::map<std::string, Golden>& loaded) {
  const GoldenKey& key = cell.golden;
  const GoldenStore store(dir);
  GoldenLookup lookup;
  const auto kept = loaded.find(store.PathFor(key));
  if (kept != loaded.end()) {
    lookup.golden = kept->second;  // tensors share their storage
    return lookup;
  }
  StatusOr<Golden> golden = store.Load(key);
  if (golden.ok()) {
    lookup.golden = *golden;
    loaded.emplace(store.PathFor(key), std::move(*golden));
  } else if (golden.status().code() == Status::Code::kNotFound) {
    lookup.unresolved =
        "no golden " + store.PathFor(key) + " (make it: " + MakeGoldenCommand(cell, dir) + ")";
  } else {
    return golden.status();
  }
  return lookup;
}

// A module output's shape, in the order the run made them.
struct ShapeSeen {
  std::string module;
  std::string op;
  std::vector<int64_t> sizes;
};

StatusOr<std::vector<ShapeSeen>> ShapesOf(const PipelineSpec& spec, ModelCache* models,
                                          GenerationResult* result) {
  std::vector<ShapeSeen> seen;
  const ModuleObserver record = [&seen](const ModuleOutput& out) {
    seen.push_back({out.module, out.op, out.value.sizes().vec()});
  };
  StatusOr<PipelineOutcome> run = RunPipeline(spec, record, nullptr, models);
  if (!run.ok()) return run.status();
  if (run->kind != RunEnd::kFinished) return Status::Internal("the run ended early: " + run->error.message);
  *result = run->result;
  return seen;
}

// A cell whose frames or latents have another shape than its golden. When the same model
// in FP32 makes the golden's shapes, the policy changed the shape: a finding, ERROR
// shape_mismatch in the first module output whose shape differs from the FP32 run's.
// Otherwise (an FP32 cell, or FP32 disagrees too) the golden does not fit the model: the
// Corrupt status of CheckGoldenShapes. Costs two more runs, only on a mismatch.
StatusOr<std::optional<ClassifiedError>> ShapeFinding(const std::string& golden_path, const Golden& golden,
                                                      const PipelineSpec& spec, const GenerationResult& r,
                                                      ModelCache* models) {
  const Status shapes = CheckGoldenShapes(golden_path, golden, r.frames, r.latents);
  if (shapes.ok()) return std::optional<ClassifiedError>();
  if (spec.policy.name == Fp32Policy().name) return shapes;
  PipelineSpec fp32 = spec;
  fp32.policy = Fp32Policy();
  GenerationResult fp32_result, cell_result;
  StatusOr<std::vector<ShapeSeen>> expected = ShapesOf(fp32, models, &fp32_result);
  if (!expected.ok() ||
      !CheckGoldenShapes(golden_path, golden, fp32_result.frames, fp32_result.latents).ok()) {
    return shapes;
  }
  StatusOr<std::vector<ShapeSeen>> made = ShapesOf(spec, models, &cell_result);
  ClassifiedError error;
  error.cls = ErrorClass::kShapeMismatch;
  const bool frames = golden.frames.sizes() != r.frames.sizes();
  error.message = std::string(frames ? "frames " : "latents ") +
                  c10::str(frames ? r.frames.sizes() : r.latents.sizes()) +
                  " where the golden and this model in FP32 have " +
                  c10::str(frames ? golden.frames.sizes() : golden.latents.sizes());
  if (made.ok()) {
    for (size_t i = 0; i < made->size() && i < expected->size(); ++i) {
      if ((*made)[i].sizes == (*expected)[i].sizes) continue;
      error.module = (*made)[i].module;
      error.graph_op = (*made)[i].op;
      break;
    }
  }
  return std::optional<ClassifiedError>(error);
}

// error(candidate, fp64) / error(golden, fp64): how many times the FP32 golden's own
// error the candidate's is. The FP64 run is the same config on the CPU.
StatusOr<double> Fp64ErrorRatio(const PipelineSpec& spec, const at::Tensor& candidate,
                                const at::Tensor& golden) {
  PipelineSpec fp64 = spec;
  fp64.policy = Fp64ReferencePolicy();
  fp64.device = "cpu";
  StatusOr<PipelineOutcome> ref = RunPipeline(fp64);
  if (!ref.ok()) return Status::Internal("the FP64 reference run failed: " + ref.status().message());
  if (ref->kind != RunEnd::kFinished) {
    return Status::Internal("the FP64 reference run failed: " + ref->error.Reason() + ref->unsupported);
  }
  return RelativeL2(candidate, ref->result.frames) / RelativeL2(golden, ref->result.frames);
}

}  // namespace

StatusOr<PipelineSpec> PipelineSpecOf(const Cell& cell, const CellNames& names) {
  PipelineSpec spec;
  spec.size = cell.size;
  spec.model_dir = cell.model_dir;
  spec.device = cell.device;
  spec.seed = cell.seed;
  spec.policy = names.policy;
  spec.fault = names.fault;
  if (cell.steps > 0 || cell.guidance > 0 || names.sampler) {
    SamplerConfig config;
    if (cell.model_dir.empty()) {
      config = FindReferenceSize(cell.size)->sampler;
    } else {
      StatusOr<ModelManifest> manifest = ReadModelManifest(cell.model_dir);
      if (!manifest.ok()) return manifest.status();
      config = manifest->sampler;
    }
    if (cell.steps > 0) config.steps = cell.steps;
    if (cell.guidance > 0) config.guidance = cell.guidance;
    if (names.sampler) config.kind = *names.sampler;
    spec.sampler = config;
  }
  return spec;
}

StatusOr<ResolvedCell> ResolveCell(const Cell& cell) {
  StatusOr<CellNames> names = ResolveCellNames(cell);
  if (!names.ok()) return names.status();
  StatusOr<ToleranceProfile> tolerance = ToleranceOf(cell, *names);
  if (!tolerance.ok()) return tolerance.status();
  StatusOr<PipelineSpec> spec = PipelineSpecOf(cell, *names);
  if (!spec.ok()) return spec.status();
  StatusOr<GoldenKey> golden = GoldenKeyOf(*spec);
  if (!golden.ok()) return golden.status();
  return ResolvedCell{cell, *spec, *tolerance, *golden};
}

ResolvedCell AtSeed(ResolvedCell resolved, uint64_t seed) {
  resolved.cell.seed = seed;
  resolved.spec.seed = seed;
  resolved.golden.seed = seed;
  return resolved;
}

namespace {

// A passing FP16-emulated package cell that held a value past 65504 / 2 is judged once
// more with FP16's range this many bits smaller (CellRunOptions::check_fp16_headroom).
// Measured (2026-12-03, 177 packages, seeds 0-1): healthy ones keep 1.77 bits or more.
constexpr int kVerdictFp16HeadroomBits = 1;

// The judged bound's view of replayed frames: the first bound they break, their worst
// PSNR and the bound on it.
void JudgeDecode(const ToleranceProfile& profile, const ComparisonMetrics& m, StepReplay& pass) {
  const std::optional<ToleranceViolation> v = FirstViolation(profile, m);
  pass.decode_violation = v ? v->Reason() : "";
  pass.decode_min_psnr = m.video.min_psnr;
  for (const ToleranceBound& b : profile.bounds) {
    if (b.metric == "min_psnr") pass.decode_psnr_bound = b.bound;
  }
}

// `check --replay N`: N step-replay passes from the golden's trajectory, judged by the
// first pass's frames (decoded from the golden's final latents).
StatusOr<CellResult> RunReplayCell(const ResolvedCell& resolved, const CellRunOptions& options,
                                   const std::optional<Golden>& golden, const std::string& unresolved,
                                   const JudgingBound& bound, CellResult result, ModelCache* models) {
  const ToleranceProfile& profile = bound.profile;
  if (!golden) return Status::InvalidInput("--replay: " + unresolved);
  if (!golden->trajectory.defined()) {
    return Status::InvalidInput(result.golden +
                                ": golden format version 1 has no step latents to replay (remake it: " +
                                MakeGoldenCommand(resolved, options.golden_dir) + ")");
  }
  std::optional<SdcSpec> inject;
  if (!options.inject_sdc.empty()) {
    StatusOr<SdcSpec> parsed = ParseSdcSpec(options.inject_sdc);
    if (!parsed.ok()) return parsed.status();
    if (parsed->device == resolved.cell.device) inject = *parsed;
  }
  const uint64_t seed = std::stoull(Sha256Hex(resolved.cell.Id()).substr(0, 15), nullptr, 16);
  const PassJudge judge = [&](const GenerationResult& r, StepReplay& pass) {
    JudgeDecode(profile, Compare(*golden, r), pass);
    pass.step_budget = bound.step_budget;
  };
  StatusOr<ReplayPasses> replayed = RunReplayPasses(resolved.spec, *golden, options.replays,
                                                    inject ? &*inject : nullptr, seed, models, judge);
  if (!replayed.ok()) return replayed.status();
  const PipelineOutcome& first = replayed->first;
  VerdictInputs in;
  in.tolerance = &profile;
  in.expected_to_fail = resolved.cell.expected_to_fail();
  in.first_nonfinite = &result.first_nonfinite;
  in.health = &result.health;
  in.run = first.kind;
  in.error = first.error;
  in.unsupported = first.unsupported;
  StatusOr<std::optional<ClassifiedError>> shape_finding = std::optional<ClassifiedError>();
  if (first.kind == RunEnd::kFinished) {
    shape_finding = ShapeFinding(result.golden, *golden, resolved.spec, first.result, models);
    if (!shape_finding.ok()) return shape_finding.status();
  }
  if (*shape_finding) {
    in.run = RunEnd::kError;
    in.error = **shape_finding;
  } else if (first.kind == RunEnd::kFinished) {
    const GenerationResult& r = first.result;
    result.health = AssessFrameHealth(r.decoded, r.frames, golden->frames, {});
    result.metrics = Compare(*golden, r);
    in.metrics = &*result.metrics;
    result.timings.step_seconds = r.step_seconds;
    result.timings.decode_seconds = r.decode_seconds;
  }
  for (const StepReplay& pass : replayed->passes) result.timings.generation_seconds.push_back(pass.seconds);
  result.replays = std::move(replayed->passes);
  const Verdict verdict = DecideVerdict(in);
  result.status = verdict.status;
  result.reason = verdict.reason;
  result.error_class = verdict.error_class;
  result.error_module = in.error.module;
  result.error_op = in.error.graph_op;
  result.error_float32_origin = in.error.float32_origin;
  result.observed = first.observed;
  if (const std::string note = SsimNote(result.metrics); !note.empty()) {
    result.observed += (result.observed.empty() ? "" : "; ") + note;
  }
  if (inject) {
    result.observed += std::string(result.observed.empty() ? "" : "; ") + "injected " +
                       std::to_string(replayed->injected.size()) + " bit flips (" + inject->ToString() + ")";
  }
  result.timings.peak_rss_bytes = PeakRssBytes();
  return result;
}

// Whether `module` is a component's root ("denoiser", "decoder": the whole component).
bool IsComponentRoot(const std::string& module) { return module.find('.') == std::string::npos; }

// The sites that keeping `cause` (a search's) in FP32 takes, in order: the cause, then
// for a cancelling sum each input maker that is a sum or a mean (only a sum that made an
// input rounds it) and the relays between such a sum and it (IsolatedError::relays:
// `* 1.0`, a negation; kept without the sum, they would hand on an exact copy of the
// rounded value, hiding it); with `offset_makers`, for a norm cancelling an offset, the op
// that made it (the norm alone returns that rounding).
std::vector<OpSite> SitesToKeep(const IsolatedError& cause, bool offset_makers) {
  std::vector<OpSite> sites = {{cause.module, cause.op}};
  if (offset_makers && cause.input_offset >= kCancellingOffset) sites.push_back(cause.input_maker);
  if (!cause.index_maker.empty()) sites.push_back(cause.index_maker);  // made the rounded index
  if (!IsCancellingSum(cause)) return sites;
  for (const OpSite& maker : cause.input_makers) {
    if (IsSumOrMean(maker.op)) sites.push_back(maker);
  }
  // Between such a sum and it, the relays that hand the rounded value on (`* 1.0`): in
  // the compute dtype they would round it again.
  sites.insert(sites.end(), cause.relays.begin(), cause.relays.end());
  return sites;
}

// Whether `cause` is made in a component root's own forward far past any rounding
// (kMadeInModulesStrongExcess, not a different choice): the root's own ops stand in for it
// (RootStandIn), not the whole component.
bool MadeInARootsOwnForward(const IsolatedError& cause) {
  return IsComponentRoot(cause.module) && cause.Excess() >= kMadeInModulesStrongExcess &&
         !cause.chose_differently;
}

// Whether `cause` cancels the rounding of a sum or a mean that made one of its inputs
// (IsCancellingSum; `(h + 512) - 512`): at a root, the sum and those makers are op islands,
// whatever the excess, not the root's other ops (a healthy root's glue).
bool CancelsASumsRounding(const IsolatedError& cause) {
  return IsCancellingSum(cause) && !cause.chose_differently &&
         std::any_of(cause.input_makers.begin(), cause.input_makers.end(),
                     [](const OpSite& maker) { return IsSumOrMean(maker.op); });
}

// The islands that stand in for the own forward of component root `root` ("denoiser"): its
// own ops (an op island, no weight) and the scalars stored at its level (a `1 - sigma` of a
// sigma stored as 1.0 is made where the scalar is stored), by their paths.
std::vector<std::string> RootStandIn(const std::string& root, const std::vector<WeightSize>& weights) {
  std::vector<std::string> islands = {OpIslandEntry(root, "*")};
  for (const WeightSize& w : weights) {
    if (w.numel == 1 && ModuleOfWeight(w.name) == root) islands.push_back(w.name);
  }
  return islands;
}

// Whether the ops of `causes` (a search's: at kCauseExcess or more, or cancelling sums)
// do not make the error that breaks `broken`'s bound of `profile` against `golden`: one
// run of the cell with each kept in FP32 (IslandKeepingInFp32; a cancelling sum with the
// sums and means that made its inputs, whose rounding it cancels) still breaks `profile`, with at least
// kNamedOpsErrorShare of that error. Then the every-step search of that run (against
// `reference` with the same islands, for a compute part) when it shows rounding alone, with
// `kept` saying what the run showed; nullopt otherwise. A cause that saturates FP8 weights
// or makes a non-finite value is one whatever its share; so is, for a compute part, one
// whose island keeps a module's weights in FP32 (its reference keeps them FP8).
StatusOr<std::optional<ErrorProducer>> KeptOpsLeaveTheError(
    const PipelineSpec& spec, int steps, ModelCache* models, const Golden& golden,
    const DtypePolicy* reference, const ToleranceProfile& profile, const ToleranceViolation& broken,
    const std::vector<IsolatedError>& causes, std::string& kept) {
  const auto defect = [](const IsolatedError& c) { return !std::isfinite(c.Excess()); };
  if (causes.empty() || std::any_of(causes.begin(), causes.end(), defect))
    return std::optional<ErrorProducer>();
  StatusOr<std::vector<WeightSize>> weights = ListWeightSizes(spec);
  if (!weights.ok()) return weights.status();
  PipelineSpec without = spec;
  std::vector<std::string>& islands = without.policy.fp32_modules;
  bool weights_kept = false;  // a module island: its weights stay FP32
  const auto keep = [&](const std::string& island) {
    if (std::find(islands.begin(), islands.end(), island) == islands.end()) islands.push_back(island);
  };
  const std::vector<WeightSize> kNoWeights;
  for (const IsolatedError& c : causes) {
    for (const OpSite& site : SitesToKeep(c, /*offset_makers=*/false)) {
      if (site == OpSite{c.module, c.op} && MadeInARootsOwnForward(c)) {
        // A compute part's reference keeps its FP8 scalars: its root's own ops alone.
        for (const std::string& island : RootStandIn(c.module, reference != nullptr ? kNoWeights : *weights))
          keep(island);
        continue;
      }
      // An op fed a rounding made before it (IsolatedError::carried_error) computes in FP32
      // already: its module, which made the rounding, is the island (not a component's root).
      const bool fed_rounding =
          c.carried_error > 0 && site == OpSite{c.module, c.op} && !IsComponentRoot(c.module);
      const std::string island =
          fed_rounding ? site.module : IslandKeepingInFp32(site.module, site.op, *weights);
      weights_kept = weights_kept || island == site.module;
      keep(island);
    }
  }
  const auto weak_sum = [](const IsolatedError& c) {
    return IsCancellingSum(c) && c.Excess() < kCauseExcess;
  };
  const size_t sums = std::count_if(causes.begin(), causes.end(), weak_sum);  // below kCauseExcess
  // A compute part's reference keeps the FP8 weights: a module island's FP32 ones differ.
  if (reference != nullptr && weights_kept) return std::optional<ErrorProducer>();
  StatusOr<PipelineOutcome> run = RunPipeline(without, nullptr, nullptr, models);
  if (!run.ok()) return run.status();
  if (run->kind != RunEnd::kFinished) return std::optional<ErrorProducer>();
  const ComparisonMetrics metrics = Compare(golden, run->result);
  const double value = MetricValue(metrics, broken.bound.metric);
  const double share = ErrorOf(broken.bound, value) / ErrorOf(broken.bound, broken.value);
  if (!FirstViolation(profile, metrics) || !(share >= kNamedOpsErrorShare))
    return std::optional<ErrorProducer>();
  std::optional<DtypePolicy> kept_reference;
  if (reference != nullptr) {
    kept_reference = *reference;
    kept_reference->fp32_modules = islands;
  }
  StatusOr<ErrorProducer> search = LocateErrorProducer(without, steps, models, ProducerSearch::kEveryStep,
                                                       nullptr, kept_reference ? &*kept_reference : nullptr);
  if (!search.ok()) return search.status();
  if (!RoundingAloneMadeTheError(*search)) return std::optional<ErrorProducer>();
  char what[160];
  if (sums == 0) {
    std::snprintf(what, sizeof what, "the %zu op%s at %gx or more", causes.size(),
                  causes.size() == 1 ? "" : "s", kCauseExcess);
  } else {
    std::snprintf(what, sizeof what,
                  "the %zu op%s at %gx or more, or sums cancelling at %gx with their inputs' makers",
                  causes.size(), causes.size() == 1 ? "" : "s", kCauseExcess, kCancellingSumExcess);
  }
  char text[640];
  std::snprintf(text, sizeof text,
                "%s, the most %.2fx at %s (%s), kept in FP32 leave %s at %g (%.2f of the error): they do not "
                "make it; then ",
                what, causes.front().Excess(), causes.front().module.c_str(), causes.front().op.c_str(),
                broken.bound.metric.c_str(), value, share);
  kept = text;
  return std::optional<ErrorProducer>(std::move(*search));
}

// A cell that breaks the population profile `in.*slot` (the whole error's or the compute
// part's) but not `wider`, that profile at kSensitiveModelErrorFactor times its error
// (runners/cell_bound.h): its producer is located (into `producer`; against
// `reference` for a compute part: its ops predicted their compute dtype's rounding, not
// their FP8 weights'), and when rounding alone made the error, `in.*slot` is `wider` and
// `judged_by` says why. Ops the search names as causes (at kCauseExcess, cancelling sums,
// makers of an input at kCauseExcess) are first kept in FP32 by one more run
// compared with `golden` (the FP32 golden, or the compute part's reference frames)
// (KeptOpsLeaveTheError): when they do not make the error, rounding alone is asked of that
// run. A cell past `wider` on another metric than the one its reason names gets that
// metric in `past_the_band` ("max_abs 0.117 > 0.1004 at 2x its error").
Status JudgeASensitiveModel(VerdictInputs& in, const ToleranceProfile* VerdictInputs::*slot,
                            const ToleranceProfile& wider, const ComparisonMetrics& metrics,
                            const PipelineSpec& spec, int steps, ModelCache* models, const Golden& golden,
                            const DtypePolicy* reference, std::optional<ErrorProducer>& producer,
                            std::string& judged_by, std::string& past_the_band) {
  VerdictInputs plain = in;
  plain.expected_to_fail = false;
  if (DecideVerdict(plain).status != CellStatus::kFail) return Status::Ok();
  const std::optional<ToleranceViolation> broken = FirstViolation(*(in.*slot), metrics);
  plain.*slot = &wider;
  if (!broken) return Status::Ok();
  if (DecideVerdict(plain).status != CellStatus::kPass) {
    // The reason names the first metric broken, which may be within the band: say which is not.
    const std::optional<ToleranceViolation> past = FirstViolation(wider, metrics);
    if (past && past->bound.metric != broken->bound.metric) {
      char factor[16];
      std::snprintf(factor, sizeof factor, "%g", kSensitiveModelErrorFactor);
      past_the_band = past->Reason() + " at " + factor + "x its error";
    }
    return Status::Ok();
  }
  std::vector<IsolatedError> causes;
  StatusOr<ErrorProducer> located =
      LocateErrorProducer(spec, steps, models, ProducerSearch::kEveryStep, &causes, reference);
  if (!located.ok()) return located.status();
  producer = *located;
  const ErrorProducer* rounding = &*producer;  // the search that shows rounding alone
  std::string kept;                            // what keeping the causes in FP32 showed
  std::optional<ErrorProducer> without_causes;
  if (!RoundingAloneMadeTheError(*producer) || !causes.empty()) {
    StatusOr<std::optional<ErrorProducer>> left =
        KeptOpsLeaveTheError(spec, steps, models, golden, reference, *(in.*slot), *broken, causes, kept);
    if (!left.ok()) return left.status();
    if (!*left) return Status::Ok();
    without_causes = std::move(**left);
    rounding = &*without_causes;
  }
  in.*slot = &wider;
  char text[1024];
  std::snprintf(text, sizeof text,
                " at %gx its error (%s; %sno op makes %gx the error its precision predicts, the most "
                "%.2fx at %s (%s): a model more sensitive than the population)",
                kSensitiveModelErrorFactor, broken->Reason().c_str(), kept.c_str(), kCauseExcess,
                ExcessOf(*rounding), rounding->module.c_str(), rounding->op.c_str());
  judged_by += text;
  return Status::Ok();
}

// Whether the weights `outcome`'s FP8 storage could not hold (saturated or flushed) make the
// cell's error (`metrics` against `golden`): one more run with them scaled to fit
// (DtypePolicy::fp8_scaled_to_fit: the same values in the format's range) keeps at most 1 /
// kFp8RangeErrorFactor of its relative L2. Returns the finding for VerdictInputs::fp8_out_of_range, or ""
// with `note` saying what was measured when they do not make it (a norm after them undoes it).
StatusOr<std::string> Fp8RangeFinding(const PipelineSpec& spec, const PipelineOutcome& outcome,
                                      const Golden& golden, const ComparisonMetrics& metrics,
                                      ModelCache* models, std::string& note) {
  PipelineSpec fit = spec;
  fit.policy.name += ".fp8-scaled-to-fit";
  fit.policy.fp8_scaled_to_fit = true;
  StatusOr<PipelineOutcome> run = RunPipeline(fit, nullptr, nullptr, models);
  if (!run.ok()) return run.status();
  if (run->kind != RunEnd::kFinished) {
    return outcome.fp8_out_of_range + " (scaled to fit, the run did not finish: " + run->error.Reason() + ")";
  }
  const double stored = metrics.video.rel_l2, scaled = Compare(golden, run->result).video.rel_l2;
  char measured[160];
  std::snprintf(measured, sizeof measured, "rel_l2 %.3g against the golden, %.3g with them scaled to fit",
                stored, scaled);
  if (stored >= kFp8RangeErrorFactor * scaled)
    return outcome.fp8_out_of_range + "; they make the error: " + measured;
  note = "FP8 storage cannot hold weights without making the error (" + std::string(measured) +
         "): " + outcome.fp8_out_of_range;
  return std::string();
}

// The largest share of its bound a metric of `metrics` uses (error over the bound's, in
// ErrorOf's units): 1 at the bound.
double ShareOfBoundUsed(const ToleranceProfile& profile, const ComparisonMetrics& metrics) {
  double used = 0;
  for (const ToleranceBound& b : profile.bounds) {
    const double value = MetricValue(metrics, b.metric);
    const double limit = ErrorOf(b, b.bound);
    if (std::isfinite(value) && limit > 0) used = std::max(used, ErrorOf(b, value) / limit);
  }
  return used;
}

// Whether a few small modules make the error of a cell whose frames `judged.profile` passes
// (its `metrics` against `golden`; runners/cell_bound.h, kMadeInModulesErrorFactor): the
// finding for VerdictInputs::made_in_modules, "" when they do not (or the cell is not
// searched); the every-step search into `producer` and the islands into `kept_islands`
// when it is the finding's. A cell using less than `band_share` of its bound is not
// searched. With a `reference` (a compute part's: the FP8 weights computed in FP32),
// `golden` and `metrics` are the compute part's: the search predicts each op its compute dtype's rounding,
// and the islands are kept in FP32 in the reference too, so that the run with them is compared with the same
// weights computed in FP32 (the compute error left outside them); the error is theirs at
// kMadeInComputePartErrorFactor.
// What a made-in-modules search judges: frames against a golden by a profile.
struct JudgedError {
  const Golden& golden;
  const ToleranceProfile& profile;
  const ComparisonMetrics& metrics;
  const DtypePolicy* reference = nullptr;  // a compute part's: the FP8 weights computed in FP32
};
StatusOr<std::string> MadeInModulesFinding(const PipelineSpec& spec, int steps, ModelCache* models,
                                           const JudgedError& judged, double band_share,
                                           std::optional<ErrorProducer>& producer,
                                           std::vector<std::string>& kept_islands) {
  const Golden& golden = judged.golden;
  const ComparisonMetrics& metrics = judged.metrics;
  const DtypePolicy* const reference = judged.reference;
  if (spec.model_dir.empty() || ShareOfBoundUsed(judged.profile, metrics) < band_share) return std::string();
  std::vector<IsolatedError> causes;
  StatusOr<ErrorProducer> located =
      LocateErrorProducer(spec, steps, models, ProducerSearch::kEveryStep, &causes, reference);
  if (!located.ok()) return located.status();
  if (causes.empty()) return std::string();
  StatusOr<std::vector<WeightSize>> weights = ListWeightSizes(spec);
  if (!weights.ok()) return weights.status();
  // Each cause's module (weights and all), largest excess first, while they hold at most
  // kMadeInModulesMaxWeightShare together; never a component's root ("denoiser": the whole
  // component). The ops at a root's own level ("denoiser:*") are no stand-in for a cause
  // under kMadeInModulesStrongExcess: measured, a healthy root's glue (classifier-free
  // guidance, token merging) kept in FP32 took away half or more of the error of 17
  // healthy cells. They are for a strong cause made there (a timestep cast to BF16 before
  // its sinusoid, `E[x^2] - E[x]^2`; with the root's own scalars), and the op of a root
  // that made the offset a norm cancels (`norm(h + 64)` in the root's forward) is, as an
  // op island; so are a sum at a root that cancels the rounding of a sum or a mean, and
  // those makers (CancelsASumsRounding: `(h + 512) - 512` at 14.5x). A cause that took
  // other indices than the FP32 run (IsolatedError::chose_differently: token merging's
  // gathers, 23-123x) is a different choice, not a rounding: not kept.
  PipelineSpec kept = spec;
  std::vector<std::string>& islands = kept.policy.fp32_modules;
  const size_t policy_islands = islands.size();
  const double policy_share = Fp32WeightFraction(*weights, spec.policy);
  double kept_share = 0;                      // beyond the policy's own islands
  const IsolatedError* first_kept = nullptr;  // the first cause an island was kept for
  for (const IsolatedError& cause : causes) {
    if (cause.chose_differently) continue;
    // A strong cause (an error far past any rounding) may take larger modules in.
    const bool strong = cause.Excess() >= kMadeInModulesStrongExcess;
    const double cap = strong ? kMadeInModulesStrongMaxWeightShare : kMadeInModulesMaxWeightShare;
    const auto keep_within_cap = [&](const std::string& island) {
      if (std::find(islands.begin(), islands.end(), island) != islands.end()) return;
      islands.push_back(island);
      const double share = Fp32WeightFraction(*weights, kept.policy) - policy_share;
      if (share > cap) {
        islands.pop_back();
      } else {
        kept_share = share;
        if (first_kept == nullptr) first_kept = &cause;
      }
    };
    for (const OpSite& site : SitesToKeep(cause, /*offset_makers=*/true)) {
      const bool root = IsComponentRoot(site.module);
      // The op that made a cancelled offset or a rounded index: kept as an op island at a root.
      const bool made_input =
          (cause.input_offset >= kCancellingOffset && site == cause.input_maker) || site == cause.index_maker;
      if (!root || made_input) {
        keep_within_cap(root ? OpIslandEntry(site.module, site.op) : site.module);
      } else if (site == OpSite{cause.module, cause.op} && MadeInARootsOwnForward(cause)) {
        for (const std::string& island : RootStandIn(site.module, *weights)) keep_within_cap(island);
      } else if (CancelsASumsRounding(cause)) {
        keep_within_cap(OpIslandEntry(site.module, site.op));  // the sum, or a sum that fed it
      }
    }
  }
  if (islands.size() == policy_islands) return std::string();
  std::string names;
  for (size_t i = policy_islands; i < islands.size(); ++i) names += (names.empty() ? "" : ", ") + islands[i];
  StatusOr<PipelineOutcome> run = RunPipeline(kept, nullptr, nullptr, models);
  if (!run.ok()) return run.status();
  if (run->kind != RunEnd::kFinished) return std::string();
  std::optional<Golden> kept_golden;  // a compute part's reference with the same islands
  if (reference != nullptr) {
    PipelineSpec part = spec;
    part.policy = *reference;
    part.policy.fp32_modules = islands;
    StatusOr<PipelineOutcome> part_run = RunPipeline(part, nullptr, nullptr, models);
    if (!part_run.ok()) return part_run.status();
    if (part_run->kind != RunEnd::kFinished) return std::string();
    kept_golden = Golden{part_run->result.frames, part_run->result.latents, {}, {}};
  }
  const double cell = metrics.video.rel_l2;
  const double without = Compare(kept_golden ? *kept_golden : golden, run->result).video.rel_l2;
  const double factor = reference != nullptr ? kMadeInComputePartErrorFactor : kMadeInModulesErrorFactor;
  if (!(cell >= factor * without)) return std::string();
  producer = *located;
  if (first_kept != nullptr && !InFp32Op(kept.policy, producer->module, producer->op)) {
    // The search's top op is not what the rule kept (over the cap, or another choice): the
    // producer names the cause the islands were kept for, as the reason does.
    producer->module = first_kept->module;
    producer->op = first_kept->op;
    producer->isolated_error = first_kept->error;
    producer->predicted_error = first_kept->predicted;
    producer->norm_module.clear();
    producer->norm_op.clear();
    if (const std::string index = IndexMakerNote(*first_kept); !index.empty())
      producer->note += std::string(producer->note.empty() ? "" : "; ") + index;
  }
  kept_islands.assign(islands.begin() + static_cast<long>(policy_islands), islands.end());
  char text[512];
  std::snprintf(
      text, sizeof text, "%s (%s of the weights): kept in FP32, %s %.2f of the error (rel_l2 %.3g -> %.3g)",
      names.c_str(), PercentText(kept_share).c_str(),
      islands.size() == policy_islands + 1 ? "it leaves" : "they leave", without / cell, cell, without);
  return std::string(text);
}

// An op with no kernel for the policy's dtype in this CPU's LibTorch (torch 1.13: BF16
// replication_pad3d, mish) leaves the rest of the model unjudged. Such an op runs in FP32
// instead, as an op island (what a device with the kernel computes, to one rounding): the
// island entry for `error`, or "" where that is not the cure (not the CPU, the whole
// policy's compute such as FP16 matmul, an op already in FP32, an op not located).
std::string KernelFallbackEntry(const PipelineSpec& spec, const ClassifiedError& error,
                                size_t fallbacks_so_far) {
  constexpr size_t kMaxKernelFallbacks = 3;
  if (spec.device.rfind("cpu", 0) != 0 || error.module.empty() || error.graph_op.empty() ||
      FindWeightedOp(error.graph_op) != nullptr || fallbacks_so_far >= kMaxKernelFallbacks) {
    return "";
  }
  const std::string entry = OpIslandEntry(error.module, error.graph_op);
  const auto& islands = spec.policy.fp32_modules;
  return std::find(islands.begin(), islands.end(), entry) == islands.end() ? entry : "";
}

}  // namespace

StatusOr<CellResult> RunCell(const ResolvedCell& resolved, const CellRunOptions& options) {
  const Cell& cell = resolved.cell;
  PipelineSpec spec = resolved.spec;  // plus the kernel fallbacks' op islands, below
  CellRunCache cell_only;
  CellRunCache& cache = options.cache != nullptr ? *options.cache : cell_only;
  StatusOr<GoldenLookup> golden = LookUpGolden(resolved, options.golden_dir, cache.goldens);
  if (!golden.ok()) return golden.status();
  ModelCache* const models = &cache.models;

  CellResult result;
  result.cell = cell;
  result.policy_used = cell.policy;
  result.repro = CheckCommandFor(cell, options.golden_dir);
  if (golden->golden) result.golden = GoldenStore(options.golden_dir).PathFor(resolved.golden);
  StatusOr<JudgingBound> bound =
      JudgingBoundOf(resolved, options.golden_dir, result.golden, options.use_calibration);
  if (!bound.ok()) return bound.status();
  result.judged_by = bound->judged_by;
  if (options.replays > 0) {
    return RunReplayCell(resolved, options, golden->golden, golden->unresolved, *bound, std::move(result),
                         models);
  }

  double load_seconds = 0;  // building the model, whichever run built it
  for (int i = 0; i < options.warmup; ++i) {
    StatusOr<PipelineOutcome> warm = RunPipeline(spec, nullptr, nullptr, models);
    if (!warm.ok()) return warm.status();
    load_seconds += warm->load_seconds;
  }
  // The judged run: NaN counts on every step's latents; module probes when asked for.
  NumericProbes probes(options.probes);
  const bool emulated = spec.policy.emulate_fp16;
  const auto watch = [emulated](NumericProbes& p) -> ModuleObserver {
    return [&p, emulated](const ModuleOutput& out) {
      p.Observe(out.module, out.step, out.value, emulated ? c10::kHalf : out.value.scalar_type(), out.op);
    };
  };
  const ModuleObserver on_module = options.probes ? watch(probes) : nullptr;
  // With probes, each module output is also compared with the same cell's FP32 run
  // (SQNR), so that a FAIL without NaN says where the error grows.
  NumericProbes fp32_outputs(/*ranges=*/false);
  const bool is_fp32 = spec.policy.name == Fp32Policy().name;
  // The same cell's FP32 run, watched: its outputs for SQNR and where it writes NaN/Inf
  // itself (a -inf mask), which the first non-finite under the policy is not. Once a cell.
  bool fp32_watched = false;
  const auto run_fp32_watched = [&]() -> Status {
    if (fp32_watched) return Status::Ok();
    fp32_watched = true;
    PipelineSpec fp32 = spec;
    fp32.policy = Fp32Policy();
    fp32_outputs.KeepNonfiniteOutputs();
    StatusOr<PipelineOutcome> reference = RunPipeline(fp32, watch(fp32_outputs), nullptr, models);
    if (!reference.ok()) return reference.status();
    if (reference->kind == RunEnd::kFinished) {
      probes.CompareWith(&fp32_outputs);
      probes.ExcuseNonfiniteOf(&fp32_outputs);
    }
    return Status::Ok();
  };
  if (options.probes && !is_fp32) {
    fp32_outputs.KeepOutputsForSqnr();
    const Status ran = run_fp32_watched();
    if (!ran.ok()) return ran;
  }
  // `run` (the cell's spec, or one with less FP16 range) with every module output watched:
  // the first NaN/Inf that the FP32 run does not make too (same inputs, same result on the
  // CPU) goes to `first`; `on_step` sees the latents.
  const auto run_localised = [&](const PipelineSpec& run, const StepObserver& on_step,
                                 FirstNonfinite& first) -> StatusOr<PipelineOutcome> {
    NumericProbes localise(/*ranges=*/false);
    if (!is_fp32) {
      FG_RETURN_IF_ERROR(run_fp32_watched());
      localise.ExcuseNonfiniteOf(&fp32_outputs);
    }
    StatusOr<PipelineOutcome> again = RunPipeline(run, watch(localise), on_step, models);
    first = localise.first_nonfinite();
    return again;
  };
  const auto localise_nonfinite = [&]() -> Status {
    return run_localised(spec, nullptr, result.first_nonfinite).status();
  };
  std::vector<NonfiniteCount> step_counts;
  const StepObserver on_step = [&](int, const at::Tensor& latents) {
    step_counts.push_back(CountNonfinite(latents));
  };
  StatusOr<PipelineOutcome> outcome = RunPipeline(spec, on_module, on_step, models);
  if (!outcome.ok()) return outcome.status();
  // Kernel fallbacks: every later run of this cell (localisation, producer, repeats) has
  // them too. What the cell then says: below, after the verdict.
  std::vector<std::string> kernel_fallbacks;
  std::string unsupported_reason;
  while (outcome->kind == RunEnd::kUnsupported) {
    const std::string entry = KernelFallbackEntry(spec, outcome->error, kernel_fallbacks.size());
    if (entry.empty()) break;
    if (unsupported_reason.empty()) unsupported_reason = outcome->unsupported;
    kernel_fallbacks.push_back(entry);
    spec.policy.fp32_modules.push_back(entry);
    probes = NumericProbes(options.probes);
    step_counts.clear();
    outcome = RunPipeline(spec, on_module, on_step, models);
    if (!outcome.ok()) return outcome.status();
  }
  result.timings.warmup = options.warmup;
  result.timings.load_seconds = load_seconds + outcome->load_seconds;

  std::string kernel_note;   // what the kernel fallbacks changed
  std::string fp64_missing;  // --fp64-ref: why the FP64 reference gave no ratio
  std::optional<ComparisonMetrics> compute_metrics;
  std::optional<Golden> compute_golden;           // the compute part's reference frames
  std::string compute_note;                       // the compute part's figure, or why it was not judged
  std::optional<ErrorProducer> producer;          // when located before the verdict
  std::optional<ErrorProducer> compute_producer;  // the compute part's, against its reference
  std::string fp8_range_note;  // Fp8RangeFinding: weights out of range without making the error
  std::string past_the_band;   // JudgeASensitiveModel: the metric past 2x, when not the reason's
  VerdictInputs in;
  in.tolerance = &bound->profile;
  in.expected_to_fail = cell.expected_to_fail();
  in.unresolved = golden->unresolved;
  in.first_nonfinite = &result.first_nonfinite;
  in.health = &result.health;
  std::optional<ClassifiedError> shape_finding;
  if (outcome->kind == RunEnd::kFinished && golden->golden) {
    StatusOr<std::optional<ClassifiedError>> found =
        ShapeFinding(result.golden, *golden->golden, spec, outcome->result, models);
    if (!found.ok()) return found.status();
    shape_finding = *found;
  }
  if (outcome->kind == RunEnd::kError || shape_finding) {
    in.run = RunEnd::kError;
    in.error = shape_finding ? *shape_finding : outcome->error;
  } else if (outcome->kind == RunEnd::kUnsupported) {
    in.run = RunEnd::kUnsupported;
    in.unsupported = outcome->unsupported;
  } else {
    const GenerationResult& r = outcome->result;
    result.timings.generation_seconds.push_back(GenerationSeconds(r));
    result.timings.step_seconds = r.step_seconds;
    result.timings.decode_seconds = r.decode_seconds;
    const at::Tensor golden_frames = golden->golden ? golden->golden->frames : at::Tensor();
    result.health = AssessFrameHealth(r.decoded, r.frames, golden_frames, step_counts);
    const bool run_nonfinite = result.health.first_nonfinite_step >= 0 || result.health.decoded.any();
    // A value the FP32 run makes non-finite too (a -inf mask) is no finding of a run whose
    // latents and frames stay finite: measured, it made `advise` name an Open-Sora-like
    // cross-attention's masked_fill as the culprit of a drift in another block.
    if (run_nonfinite || !probes.OnlyExcusedNonfinite()) result.first_nonfinite = probes.first_nonfinite();
    if (!result.first_nonfinite.found && run_nonfinite) FG_RETURN_IF_ERROR(localise_nonfinite());
    result.probes = probes.LeastHeadroom(static_cast<size_t>(options.probe_count));
    if (golden->golden) {
      result.metrics = Compare(*golden->golden, r);
      if (options.fp64_ref) {
        // An FP64 run that fails (a package that hard-codes float32 raises under FP64)
        // costs the ratio only: the cell keeps its verdict and says why it has none.
        StatusOr<double> ratio = Fp64ErrorRatio(spec, r.frames, golden->golden->frames);
        if (ratio.ok()) {
          result.metrics->fp64_error_ratio = *ratio;
        } else {
          fp64_missing = "fp64_error_ratio not measured: " + ratio.status().message();
        }
      }
    }
    in.metrics = result.metrics ? &*result.metrics : nullptr;
    if (!outcome->fp8_out_of_range.empty() && in.metrics == nullptr) {
      fp8_range_note = "FP8 storage cannot hold weights (their effect not measured: no golden): " +
                       outcome->fp8_out_of_range;
    } else if (!outcome->fp8_out_of_range.empty()) {
      StatusOr<std::string> finding =
          Fp8RangeFinding(spec, *outcome, *golden->golden, *in.metrics, models, fp8_range_note);
      if (!finding.ok()) return finding.status();
      in.fp8_out_of_range = *finding;
    }
    if (bound->sensitive_model && in.metrics != nullptr) {
      FG_RETURN_IF_ERROR(JudgeASensitiveModel(
          in, &VerdictInputs::tolerance, *bound->sensitive_model, *in.metrics, spec, outcome->sampler.steps,
          models, *golden->golden, nullptr, producer, result.judged_by, past_the_band));
    }
    const CellStatus without_part = DecideVerdict(in).status;
    if (bound->compute_part && (without_part == CellStatus::kPass || without_part == CellStatus::kXpass)) {
      // The same stored weights computed in FP32: what the compute dtype alone changes.
      // Only a cell that passes otherwise runs it: it cannot change another verdict.
      PipelineSpec reference = spec;
      reference.policy = bound->compute_part->reference;
      StatusOr<PipelineOutcome> part = RunPipeline(reference, nullptr, nullptr, models);
      if (!part.ok()) return part.status();
      if (part->kind == RunEnd::kFinished) {
        compute_golden = Golden{part->result.frames, part->result.latents, {}, {}};
        const Golden& part_frames = *compute_golden;
        compute_metrics = Compare(part_frames, r);
        in.compute_metrics = &*compute_metrics;
        in.compute_tolerance = &bound->compute_part->profile;
        in.compute_reference = bound->compute_part->reference_text;
        result.judged_by += "; compute part: " + bound->compute_part->judged_by;
        if (bound->compute_part->sensitive_model) {
          FG_RETURN_IF_ERROR(JudgeASensitiveModel(
              in, &VerdictInputs::compute_tolerance, *bound->compute_part->sensitive_model, *compute_metrics,
              spec, outcome->sampler.steps, models, part_frames, &bound->compute_part->reference,
              compute_producer, result.judged_by, past_the_band));
        }
        char psnr[32];
        std::snprintf(psnr, sizeof psnr, "%.2f dB", compute_metrics->video.min_psnr);
        compute_note =
            "compute part: min_psnr " + std::string(psnr) + " against " + bound->compute_part->reference_text;
      } else {
        compute_note = "compute part not judged: " + bound->compute_part->reference_text + " did not finish";
      }
    }
    if (!options.artifacts_dir.empty()) {
      FG_RETURN_IF_ERROR(SaveArtifacts(options.artifacts_dir, r));
      result.artifacts_dir = options.artifacts_dir;
    }
    for (int i = 1; i < options.repeats; ++i) {
      StatusOr<PipelineOutcome> again = RunPipeline(spec, nullptr, nullptr, models);
      if (!again.ok()) return again.status();
      if (again->kind == RunEnd::kFinished) {
        result.timings.generation_seconds.push_back(GenerationSeconds(again->result));
      }
    }
  }
  if (!is_fp32 && in.metrics != nullptr && !producer && !compute_producer) {
    VerdictInputs plain = in;
    plain.expected_to_fail = false;
    if (DecideVerdict(plain).status == CellStatus::kPass) {
      const double band_share = options.made_in_at_any_share ? 0.0 : kMadeInModulesBandShare;
      StatusOr<std::string> finding = MadeInModulesFinding(spec, outcome->sampler.steps, models,
                                                           {*golden->golden, *in.tolerance, *in.metrics},
                                                           band_share, producer, result.made_in_islands);
      if (!finding.ok()) return finding.status();
      in.made_in_modules = *finding;
      if (in.made_in_modules.empty() && in.compute_metrics != nullptr) {
        // The whole error is FP8 storage's mostly: the compute part's is searched on its own.
        const JudgedError compute_part{*compute_golden, *in.compute_tolerance, *in.compute_metrics,
                                       &bound->compute_part->reference};
        finding = MadeInModulesFinding(spec, outcome->sampler.steps, models, compute_part, band_share,
                                       producer, result.made_in_islands);
        if (!finding.ok()) return finding.status();
        if (!finding->empty()) {
          in.made_in_modules = "compute part: " + *finding;
          result.made_in_compute_part = true;
        }
      }
    }
  }
  const Verdict verdict = DecideVerdict(in);
  result.status = verdict.status;
  result.reason = verdict.reason;
  if (result.status == CellStatus::kFail && !past_the_band.empty()) result.reason += "; " + past_the_band;
  result.error_class = verdict.error_class;
  if (result.status == CellStatus::kPass && options.check_fp16_headroom && spec.policy.emulate_fp16 &&
      spec.policy.fp16_headroom_bits == 0 && outcome->largest_fp16_magnitude > 0 && golden->golden) {
    // Passed by a hair of FP16's range: other inputs (prompts, seeds) may overflow where
    // these did not (an exp without max subtraction just under 65504).
    PipelineSpec narrower = spec;
    narrower.policy.fp16_headroom_bits = kVerdictFp16HeadroomBits;
    std::vector<NonfiniteCount> counts;
    const StepObserver count_step = [&](int, const at::Tensor& latents) {
      counts.push_back(CountNonfinite(latents));
    };
    FirstNonfinite first;
    StatusOr<PipelineOutcome> again = run_localised(narrower, count_step, first);
    if (!again.ok()) return again.status();
    Verdict tight{CellStatus::kError, again->kind == RunEnd::kFinished ? "" : again->error.Reason(), ""};
    if (again->kind == RunEnd::kFinished) {
      const FrameHealth health =
          AssessFrameHealth(again->result.decoded, again->result.frames, golden->golden->frames, counts);
      const ComparisonMetrics metrics = Compare(*golden->golden, again->result);
      VerdictInputs narrower_in = in;
      narrower_in.health = &health;
      narrower_in.first_nonfinite = &first;
      narrower_in.metrics = &metrics;
      narrower_in.compute_metrics = nullptr;
      narrower_in.expected_to_fail = false;
      tight = DecideVerdict(narrower_in);
    }
    if (tight.status != CellStatus::kPass) {
      char largest[32];
      std::snprintf(largest, sizeof largest, "%.6g", outcome->largest_fp16_magnitude);
      result.status = CellStatus::kFail;
      result.reason = std::string("within 1 bit of FP16's range (a value of ") + largest +
                      " held in FP16): with FP16's range 1 bit smaller, " + StatusName(tight.status) +
                      (tight.reason.empty() ? "" : " (" + tight.reason + ")") + ": other inputs may overflow";
      result.failed_fp16_headroom = true;
      if (first.found) result.first_nonfinite = first;
    }
  }
  if (!kernel_fallbacks.empty() && outcome->kind != RunEnd::kUnsupported) {
    // A failure found with the op in FP32 is the model's on any device that has the
    // kernel: reported. A pass is not claimed on a device that cannot run the op.
    std::string ops;
    for (const std::string& entry : kernel_fallbacks) ops += (ops.empty() ? "" : ", ") + entry;
    const std::string judged = "judged with " + ops + " in FP32";
    if (IsFailure(result.status)) {
      kernel_note = judged + " (" + unsupported_reason + ")";
    } else {
      kernel_note = judged + ": " + std::string(StatusName(result.status)) +
                    (result.reason.empty() ? "" : " (" + result.reason + ")");
      result.status = CellStatus::kUnsupported;
      result.reason = unsupported_reason + "; the rest of the model " +
                      (verdict.status == CellStatus::kPass ? "passes" : "is judged") + " with " + ops +
                      " in FP32";
      result.error_class.clear();
    }
  }
  // Finite frames that failed (FAIL, BROKEN_FRAMES): where the error was made is searched.
  const bool finite_failure =
      result.status == CellStatus::kFail || result.status == CellStatus::kBrokenFrames;
  // A failure found after the compute part was judged is the compute part's: its producer
  // is searched against the compute part's reference.
  const bool compute_part_failed =
      in.compute_metrics != nullptr && IsFailure(result.status) && in.made_in_modules.empty();
  if (compute_producer && (compute_part_failed || !producer)) {
    result.producer = *compute_producer;
  } else if (producer && !compute_part_failed) {
    result.producer = *producer;
  } else if (finite_failure && !result.failed_fp16_headroom) {  // whose error, at FP16's range, passed
    StatusOr<ErrorProducer> located =
        LocateErrorProducer(spec, outcome->sampler.steps, models, ProducerSearch::kProbedSteps, nullptr,
                            compute_part_failed ? &bound->compute_part->reference : nullptr);
    if (!located.ok()) return located.status();
    result.producer = *located;
  }
  // Finite frames that a value went non-finite on the way to: where (with the probes,
  // the judged run was watched already).
  if (finite_failure && outcome->kind == RunEnd::kFinished && !options.probes &&
      options.localise_absorbed_nonfinite && !result.first_nonfinite.found && !result.failed_fp16_headroom) {
    FG_RETURN_IF_ERROR(localise_nonfinite());
  }
  if (result.status == CellStatus::kError) {
    result.error_module = in.error.module;
    result.error_op = in.error.graph_op;
    result.error_float32_origin = in.error.float32_origin;
  }
  result.compute_metrics = compute_metrics;
  result.observed = outcome->observed;
  result.island_input_makers = outcome->island_input_makers;
  std::string ssim_note = SsimNote(result.metrics);
  for (const std::string* note : {&kernel_note, &compute_note, &fp64_missing, &ssim_note, &fp8_range_note}) {
    if (!note->empty()) result.observed += (result.observed.empty() ? "" : "; ") + *note;
  }
  result.timings.peak_rss_bytes = PeakRssBytes();
  return result;
}

}  // namespace framegate
