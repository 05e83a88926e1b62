#include "runners/precision_advisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "golden/golden_store.h"
#include "harness/printf.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/op_islands.h"
#include "pipelines/pipeline_run.h"
#include "pipelines/weighted_ops.h"
#include "runners/cell_bound.h"
#include "runners/error_producer.h"

namespace framegate {
namespace {

using Islands = std::vector<std::string>;

// The cell statuses the advisor can act on: a precision problem that FP32 islands may cure.
bool Advisable(const CellResult& r) {
  switch (r.status) {
    case CellStatus::kNonfinite:
    case CellStatus::kBrokenFrames:
    case CellStatus::kFail:
      return true;
    case CellStatus::kError:
      return r.error_class == "dtype_mismatch" || r.error_class == "value_overflow";
    default:
      return false;
  }
}

// Where a failed run's failure is made: the module (and op) that raised the error (for a
// dtype error with a float32 operand, the op where that operand became float32: an op
// island there hands it on in the compute dtype, to every op that takes it), made the
// first non-finite value, or made the largest isolated error; module "" when the run names
// none (a FAIL of the reference model).
struct Culprit {
  std::string module, op;
  // Grow took the ops that made the inputs of this culprit's sum island once already.
  bool took_sum_makers = false;
  std::string Name() const { return module + (op.empty() ? "" : " (" + op + ")"); }
};
Culprit CulpritOf(const CellResult& r) {
  if (r.status == CellStatus::kError && !r.error_float32_origin.empty()) {
    const std::string& origin = r.error_float32_origin;
    return {ModuleOfIslandEntry(origin), OpOfIslandEntry(origin)};
  }
  if (r.status == CellStatus::kError) return {r.error_module, r.error_op};
  // Finite frames (FAIL, BROKEN_FRAMES) that a value went non-finite on the way to (a
  // PixelNorm's x^2 overflowed and its rsqrt made 0): the producer, when it names a cause,
  // says which op's error made them; the first NaN/Inf may have done no harm (measured: a
  // residual branch's norm, where the frames were the output norm's).
  const bool finite_failure = r.status != CellStatus::kNonfinite && NamesACause(r.producer);
  if (r.first_nonfinite.found && !finite_failure) return {r.first_nonfinite.module, r.first_nonfinite.op};
  if (r.producer.found) return {r.producer.module, r.producer.op};
  return {};
}

// Whether `r` names where its failure is made: an error or a first non-finite value does;
// a producer does when it names a cause (runners/error_producer.h).
bool RunNamesACause(const CellResult& r) {
  return r.status == CellStatus::kError || r.first_nonfinite.found || NamesACause(r.producer);
}

// Where the islands for a failed run start: its culprit, except when the culprit made
// the error by an offset that a norm cancels (ErrorProducer::norm_module): the norm. An
// island around the offset's maker alone hands its output to the norm rounded; an island
// at the norm that leaves the error where it was takes in the ops that made its input
// (Grow), the maker among them.
Culprit IslandSeedOf(const CellResult& r) {
  const Culprit c = CulpritOf(r);
  if (!RunNamesACause(r)) return {};
  const ErrorProducer& p = r.producer;
  if (p.found && !p.norm_module.empty() && c.module == p.module && c.op == p.op)
    return {p.norm_module, p.norm_op};
  return c;
}

bool Contains(const Islands& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// Fallback candidates when no run names a culprit: the modules whose values overflow the
// compute dtype, then the lowest SQNR against FP32.
Islands ProbeCandidates(const CellResult& observed) {
  Islands out;
  auto add = [&](const std::string& m) {
    if (!m.empty() && !Contains(out, m)) out.push_back(m);
  };
  for (const ModuleProbe& p : observed.probes) {
    if (p.overflow_fraction > 0 || p.headroom_bits < 0) add(p.module);
  }
  std::vector<ModuleProbe> by_sqnr = observed.probes;
  by_sqnr.erase(std::remove_if(by_sqnr.begin(), by_sqnr.end(),
                               [](const ModuleProbe& p) { return !std::isfinite(p.sqnr_db); }),
                by_sqnr.end());
  std::sort(by_sqnr.begin(), by_sqnr.end(),
            [](const ModuleProbe& a, const ModuleProbe& b) { return a.sqnr_db < b.sqnr_db; });
  for (const ModuleProbe& p : by_sqnr) add(p.module);
  return out;
}

// The policy that keeps `islands` in FP32 on top of `base`, named after it.
DtypePolicy IslandPolicy(const DtypePolicy& base, const Islands& islands) {
  DtypePolicy p = base;
  const std::string preset = base.based_on.empty() ? base.name : base.based_on;
  p.name = preset + "-fp32-islands";
  p.based_on = preset;
  p.fallback = preset;
  p.fp32_modules = islands;
  return p;
}

bool Covers(const DtypePolicy& base, const Islands& islands, const Culprit& c) {
  return InFp32Op(IslandPolicy(base, islands), c.module, c.op);
}

// Share of the weights an island keeps in FP32 (0 for an op island).
double WeightShareOf(const std::vector<WeightSize>& weights, const std::string& island) {
  DtypePolicy only;
  only.fp32_modules = {island};
  return Fp32WeightFraction(weights, only);
}

// The first island for a culprit: IslandKeepingInFp32 (runners/error_producer.h).
std::string IslandFor(const Culprit& c, const std::vector<WeightSize>& weights) {
  // A component's root (a package's "denoiser") as a module keeps the whole component in
  // FP32: an op named there (attention logits written in its forward) is kept alone.
  if (!c.op.empty() && ParentModule(c.module) == "*") return OpIslandEntry(c.module, c.op);
  return IslandKeepingInFp32(c.module, c.op, weights);
}

// One step wider: an op island becomes its module, a module its parent; "" past the root.
std::string Wider(const std::string& island) {
  if (IsOpIslandEntry(island)) return ModuleOfIslandEntry(island);
  const std::string parent = ParentModule(island);
  return parent == "*" ? "" : parent;
}

// Each of `sites` that `islands` do not cover yet, once, as IslandFor takes it: an op on
// its module's own weights (a conv whose bias carries an offset) as that module, whose
// weights then stay FP32 too; any other as an op island, which hands its output to the
// island unrounded (op_islands.h), where a module island takes the value as it was made.
Islands UncoveredIslands(const DtypePolicy& base, const Islands& islands, const std::vector<Culprit>& sites,
                         const std::vector<WeightSize>& weights) {
  Islands out;
  for (const Culprit& site : sites) {
    const std::string island = IslandFor(site, weights);
    if (!Covers(base, islands, site) && !Contains(out, island)) out.push_back(island);
  }
  return out;
}

// The ops that made the inputs of `failed`'s islands (CellResult::island_input_makers)
// and are not islands yet (UncoveredIslands).
Islands NewInputMakers(const DtypePolicy& base, const Islands& islands, const CellResult& failed,
                       const std::vector<WeightSize>& weights) {
  std::vector<Culprit> makers;
  for (const std::string& entry : failed.island_input_makers) {
    if (!Contains(islands, entry)) makers.push_back({ModuleOfIslandEntry(entry), OpOfIslandEntry(entry)});
  }
  return UncoveredIslands(base, islands, makers, weights);
}

// The ops that rounded the offset a norm in FP32 still cancels (ErrorProducer::
// offset_rounded_by) and are not islands yet (UncoveredIslands).
Islands UncoveredOffsetRounders(const DtypePolicy& base, const Islands& islands, const CellResult& failed,
                                const std::vector<WeightSize>& weights) {
  std::vector<Culprit> rounders;
  for (const auto& [module, op] : failed.producer.offset_rounded_by) rounders.push_back({module, op});
  return UncoveredIslands(base, islands, rounders, weights);
}

// Drops every island another one covers ("a.b.c" under "a.b"; "a.b:aten::mm" under "a.b" or "a.b:*").
Islands Normalized(const DtypePolicy& base, Islands islands) {
  std::sort(islands.begin(), islands.end());
  islands.erase(std::unique(islands.begin(), islands.end()), islands.end());
  Islands kept;
  for (const std::string& island : islands) {
    bool covered = false;
    for (const std::string& other : islands) {
      // An op island covers no other, except all of a module's own ops ("decoder:*").
      if (other == island || (IsOpIslandEntry(other) && OpOfIslandEntry(other) != "*")) continue;
      const Culprit as{ModuleOfIslandEntry(island), OpOfIslandEntry(island)};
      covered = covered || Covers(base, {other}, as);
    }
    if (!covered) kept.push_back(island);
  }
  return kept;
}

class Search {
 public:
  // `other_seed`: the cell is another seed's than the advised one (verifying the islands
  // there), which each recorded run says (AdviceRun::seed).
  Search(const ResolvedCell& cell, const AdviseOptions& options, bool other_seed = false)
      : cell_(cell), base_(cell.spec.policy), options_(options), other_seed_(other_seed) {}

  // A cell FAILed because a few small modules make its error (CellResult::made_in_islands)
  // passes as soon as nothing is searched that way, cured or not: from then on a run
  // passes only if it also leaves at most 1 / kMadeInModulesErrorFactor of `observed`'s
  // error, as the rule's own run did (of the compute part's, when the rule found it there:
  // 1 / kMadeInComputePartErrorFactor).
  void RequireTheCureOf(const CellResult& observed) {
    cure_of_compute_part_ = observed.made_in_compute_part;
    if (!observed.made_in_islands.empty()) observed_rel_l2_ = RuleError(observed);
  }
  bool Passes(const CellResult& r) const {
    return r.status == CellStatus::kPass &&
           (!(observed_rel_l2_ >= 0) || RuleError(r) * RuleFactor() <= observed_rel_l2_);
  }

  // An FP16 overflow (a NONFINITE cell of a package under the FP16 emulation, or one that
  // FAILed as within 1 bit of FP16's range, CellResult::failed_fp16_headroom) is cured
  // only with headroom: islands whose run passes are run once more with FP16's range
  // kAdviceFp16HeadroomBits smaller (DtypePolicy::fp16_headroom_bits), and a value that
  // overflows there is a failure to grow from. An overflow cured by a hair at one seed
  // (attention logits kept in FP32 up to the softmax, which takes them just under FP16's
  // largest) comes back at the next.
  void RequireHeadroomFor(const CellResult& observed) {
    headroom_ = base_.emulate_fp16 && !cell_.spec.model_dir.empty() &&
                (observed.status == CellStatus::kNonfinite || observed.failed_fp16_headroom);
  }
  bool requires_headroom() const { return headroom_; }
  // The islands whose run passed but overflowed with less range, when no set has passed
  // with it yet (the last such); empty otherwise.
  const Islands& passed_without_headroom() const { return passed_without_headroom_; }

  // Runs the cell with `islands` kept in FP32 (judged by the cell's own tolerance) and
  // records the run; with headroom required, a passing run's islands are run once more
  // with less range, whose result is returned when it overflows.
  StatusOr<CellResult> Try(const Islands& islands, Advice* advice) {
    StatusOr<CellResult> r = TryOnce(islands, 0, advice);
    if (!r.ok() || !headroom_ || !Passes(*r)) return r;
    StatusOr<CellResult> tighter = TryOnce(islands, kAdviceFp16HeadroomBits, advice);
    // Any other status than PASS there is the overflow's: a sum past the narrower range,
    // then x / inf = 0, leaves finite frames that FAIL.
    if (!tighter.ok() || tighter->status == CellStatus::kPass) {
      if (tighter.ok()) passed_without_headroom_.clear();
      return r;
    }
    passed_without_headroom_ = islands;
    return tighter;
  }

 private:
  StatusOr<CellResult> TryOnce(const Islands& islands, int headroom_bits, Advice* advice) {
    const DtypePolicy policy = IslandPolicy(base_, islands);
    const std::string path = options_.work_dir + "/advise-policy.toml";
    std::ofstream(path) << policy.ToToml();
    // The file is the candidate's repro (kept current in this process's policy-file
    // cache); the run takes the policy itself, judged by the base policy's tolerance.
    StatusOr<PolicySet> set = PresetsAndPoliciesOf(policy.ToToml(), path);
    if (!set.ok()) return set.status();
    RememberPoliciesOfFile(path, *set);
    ResolvedCell candidate = cell_;
    candidate.cell.policy = policy.name;
    candidate.cell.policy_file = path;
    candidate.spec.policy = policy;
    candidate.spec.policy.fp16_headroom_bits = headroom_bits;
    // Islands that pass leave no few small modules making half their error, at any share
    // of the bound (CellRunOptions::made_in_at_any_share): measured, a norm's
    // sqrt(mean(m^2) + 1e-8) kept with m^2 left in FP16's subnormals passed at seed 0 using
    // 0.24 of its bound, and FAILed as made in the decoder's ops at three seeds of five.
    CellRunOptions run = options_.run;
    run.made_in_at_any_share = headroom_bits == 0;
    run.localise_absorbed_nonfinite = false;  // the search compares producers, not this
    run.check_fp16_headroom = false;          // RequireHeadroomFor's check instead
    StatusOr<CellResult> r = RunCell(candidate, run);
    if (!r.ok()) return r.status();
    if (headroom_bits > 0) {
      r->reason = "with FP16's range " + std::to_string(headroom_bits) + " bits smaller" +
                  (r->reason.empty() ? "" : ": " + r->reason);
    }
    Record(islands, *r, advice);
    return r;
  }

 public:
  // A run within the bound that RequireTheCureOf does not let pass is recorded as the
  // FAIL it is.
  void Record(const Islands& islands, const CellResult& r, Advice* advice) {
    if (r.status == CellStatus::kPass && !Passes(r)) {
      char text[200];
      std::snprintf(
          text, sizeof text, "within the bound, but it leaves %.2f of the %serror (rel_l2 %.3g): not cured",
          RuleError(r) / observed_rel_l2_, cure_of_compute_part_ ? "compute part's " : "", RuleError(r));
      advice->runs.push_back({islands, CellStatus::kFail, text});
    } else {
      advice->runs.push_back({islands, r.status, r.reason});
    }
    if (other_seed_) advice->runs.back().seed = cell_.cell.seed;
    if (options_.on_run) options_.on_run(advice->runs.back());
  }

  // The error RequireTheCureOf compares: the relative L2 of the whole cell's or of its
  // compute part; infinite when not measured (no cure shown).
  double RuleError(const CellResult& r) const {
    const std::optional<ComparisonMetrics>& m = cure_of_compute_part_ ? r.compute_metrics : r.metrics;
    return m ? m->video.rel_l2 : std::numeric_limits<double>::infinity();
  }

  bool cure_of_compute_part() const { return cure_of_compute_part_; }
  double RuleFactor() const {
    return cure_of_compute_part_ ? kMadeInComputePartErrorFactor : kMadeInModulesErrorFactor;
  }

  bool BudgetLeft(const Advice& advice) const {
    return static_cast<int>(advice.runs.size()) < options_.max_runs + more_runs_;
  }
  // Runs beyond max_runs: for the seeds the islands are verified at.
  void AllowMoreRuns(int runs) { more_runs_ = runs; }

 private:
  const ResolvedCell& cell_;
  const DtypePolicy& base_;
  const AdviseOptions& options_;
  double observed_rel_l2_ = -1;        // RequireTheCureOf's cell's; negative: none
  bool cure_of_compute_part_ = false;  // RequireTheCureOf: of the compute part's error
  bool headroom_ = false;              // RequireHeadroomFor
  Islands passed_without_headroom_;
  const bool other_seed_;
  int more_runs_ = 0;  // AllowMoreRuns
};

// What the growing search decided after a failed run.
struct Step {
  Islands next;      // the islands to run next (empty: stop)
  std::string stop;  // why it stops, when it does
  // When next adds the op island where a dtype error's float32 operand became float32:
  // that island, and the island of the op that raised, which takes its place if handing
  // the value on in the compute dtype breaks an op that needs float32 (a complex RoPE's
  // polar takes no BF16).
  std::string origin_island, consumer_island;
};

Step Stop(std::string why) {
  Step step;
  step.stop = std::move(why);
  return step;
}

// Whether `after` left a finite FAIL (or BROKEN_FRAMES: frames frozen, black) where
// `before` had it: the same status, the worst PSNR moved by less than 0.1 dB. An island
// that does so did not reach the error's cause.
bool Unmoved(const CellResult* before, const CellResult& after) {
  const bool finite = after.status == CellStatus::kFail || after.status == CellStatus::kBrokenFrames;
  if (before == nullptr || !before->metrics || !after.metrics || before->status != after.status || !finite) {
    return false;
  }
  const double a = before->metrics->video.min_psnr, b = after.metrics->video.min_psnr;
  return std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) < 0.1;
}

// The islands after `failed`: for the same cause, widen the island that covers its
// culprit (or add one for an uncovered culprit); for a new cause, add an island for it.
// Without a culprit, the next probe candidate. Stops past the weight cap or the root.
// A run that names no culprit (a FAIL of the reference model, which has no per-op hooks)
// widens the island of the last culprit named (`last`), else takes the next candidate.
// A run whose islands left the error where it was (`before`: the run before them) widens
// the last culprit's island too, whatever it names now: the error came in with that
// island's input (a norm fed an offset the boundary had rounded), so what it names next
// only carries it. A run that names the last culprit's op in a sibling module, uncovered
// (`blocks.3 (aten::sub)` after `blocks.1 (aten::sub)`), moved or not: the defect repeats
// there, as real models repeat blocks, and the last culprit's islands are mirrored onto
// that module. A run the made-in-modules rule FAILed grows from the cause that rule kept
// first (its producer) as an island of its own, not from the rule's modules: those are
// whole modules (`out_mix`, 15.3% of the weights, where its add as an op island cures it).
Step Grow(const Islands& islands, const CellResult& failed, const CellResult* before, const DtypePolicy& base,
          const std::vector<WeightSize>& weights, double cap, Islands* queue, Culprit* last) {
  Culprit c = IslandSeedOf(failed);
  const bool unmoved = Unmoved(before, failed);
  const bool names_none = c.module.empty();
  const Culprit previous = *last;
  const bool repeats = !c.module.empty() && !previous.module.empty() && c.op == previous.op &&
                       c.module != previous.module &&
                       ParentModule(c.module) == ParentModule(previous.module) && !Covers(base, islands, c) &&
                       Covers(base, islands, previous);
  if (!repeats &&
      (c.module.empty() || (unmoved && !previous.module.empty() && Covers(base, islands, previous)))) {
    c = previous;
  }
  *last = c;
  Islands next = islands;
  std::string origin_island, consumer_island;  // Step's
  if (repeats) {
    // Each island in the previous culprit's module (or below it), at the same place in c's.
    const std::string& from = previous.module;
    for (const std::string& island : islands) {
      const std::string module = ModuleOfIslandEntry(island);
      if (module != from && module.rfind(from + ".", 0) != 0) continue;
      const std::string mirrored = c.module + module.substr(from.size());
      next.push_back(IsOpIslandEntry(island) ? OpIslandEntry(mirrored, OpOfIslandEntry(island)) : mirrored);
    }
  } else if (const Islands rounders = UncoveredOffsetRounders(base, islands, failed, weights);
             !rounders.empty() && (c.module.empty() || Covers(base, islands, c))) {
    // A norm in FP32 still returns an offset rounded before it, whatever the run names as
    // its largest error: the ops that rounded it join (measured: a time embedding's +64
    // broadcast to a GroupNorm, whose norm widened to its module, then took every conv
    // feeding it, 11.7% of the weights for a 1.8% Linear).
    next.insert(next.end(), rounders.begin(), rounders.end());
  } else if (c.module.empty()) {
    while (!queue->empty() && Covers(base, next, {queue->front(), ""})) queue->erase(queue->begin());
    if (queue->empty()) return Stop("no run names where the error is made, and no candidate is left");
    next.push_back(queue->front());
    queue->erase(queue->begin());
  } else if (!Covers(base, islands, c)) {
    next.push_back(IslandFor(c, weights));
    if (failed.status == CellStatus::kError && next.back() == failed.error_float32_origin) {
      origin_island = next.back();
      consumer_island = IslandFor({failed.error_module, failed.error_op}, weights);
    }
  } else if (const Culprit maker = CulpritOf(failed);
             !failed.producer.norm_module.empty() && !maker.module.empty() && !Covers(base, islands, maker)) {
    // The norm is in FP32 and still returns the offset its maker (the producer) rounded:
    // the maker joins, whether or not the run moved (a text stream's LayerNorm kept in FP32
    // moved the cell a little; widening it took the whole denoiser). An offset carried to
    // the norm by sums (a patch embedding's bias along a residual stream) is rounded at
    // each: the sums that carried it and every norm it reached join too, as op islands.
    next.push_back(IslandFor(maker, weights));
    for (const auto& [module, op] : failed.producer.offset_stream) {
      const Culprit site{module, op};
      if (!Covers(base, next, site)) next.push_back(OpIslandEntry(module, op));
    }
  } else {
    // Covered and failing for the same cause: wider. An op that still makes a NaN/Inf in
    // FP32 may take a value that overflowed where an island's output re-entered the
    // reduced dtype (x300 kept in FP32 by an island, cast to FP16 by the residual add
    // after it): its module takes that boundary inside. A module island (or an op island
    // at a root, whose module is the whole denoiser or decoder) that left a finite error
    // (or broken frames) where it was took its input rounded where it was made (an offset
    // added before a norm, or before the subtraction that takes it out again): first the
    // ops that made its inputs join it, then the parent. So does one whose run moved but
    // names no cause of its own: what is left came in with an input not yet in FP32 (a conv
    // whose bias carries the offset, under the island of the add that takes it). Any other
    // op island widens to its module first.
    auto covering = std::find_if(next.begin(), next.end(),
                                 [&](const std::string& island) { return Covers(base, {island}, c); });
    const bool widens_to_root = covering != next.end() && IsOpIslandEntry(*covering) &&
                                ParentModule(ModuleOfIslandEntry(*covering)) == "*";
    // An op island at a root that still makes a NaN/Inf in FP32 is fed it (a norm's
    // sqrt(mean(x^2) + 1e-8) underflowed to 0 before its division): its parent is the
    // whole component, so the ops that made its inputs join first.
    const bool nonfinite_at_root = widens_to_root && failed.status == CellStatus::kNonfinite;
    // An elementwise sum kept in FP32 that left the error where it was subtracts what was
    // rounded before it (`(x + 4096) - (mu + 4096)`): the ops that made its inputs join it
    // before its module does (measured: the block's module, 7.8-15.7% of the weights,
    // where the sum and the adds cure it at 0%).
    // Once: a sum still unmoved with them takes a rounding its module holds (a blend weight
    // stored as 1.0), and the module comes next.
    const bool cancelling_sum = unmoved && covering != next.end() && IsOpIslandEntry(*covering) &&
                                IsElementwiseSum(OpOfIslandEntry(*covering)) && !last->took_sum_makers;
    last->took_sum_makers = last->took_sum_makers || cancelling_sum;
    const bool makers_first = ((unmoved || names_none) &&
                               (covering == next.end() || !IsOpIslandEntry(*covering) || widens_to_root)) ||
                              nonfinite_at_root || cancelling_sum;
    const Islands makers = makers_first ? NewInputMakers(base, islands, failed, weights) : Islands();
    if (!makers.empty()) {
      next.insert(next.end(), makers.begin(), makers.end());
    } else if (covering != next.end()) {
      *covering = Wider(*covering);
      if (covering->empty()) return Stop("the next island would be the whole model");
    }
  }
  next = Normalized(base, next);
  const double share = Fp32WeightFraction(weights, IslandPolicy(base, next));
  if (share > cap) {
    std::string list;
    for (const std::string& i : next) list += (list.empty() ? "" : ", ") + i;
    return Stop("the next islands (" + list + ") would keep " + PercentText(share) +
                " of the weights in FP32");
  }
  return {next, "", origin_island, consumer_island};
}

// Whether a run of the search kept exactly `islands` in FP32 and did not pass.
bool FailedBefore(const Advice& advice, const Islands& islands) {
  for (const AdviceRun& run : advice.runs) {
    if (run.islands == islands && run.status != CellStatus::kPass) return true;
  }
  return false;
}

// Sets `advice` to `islands` on top of `base`, which passed: their policy, its TOML and
// the share of `weights` they keep in FP32.
void Advise(const DtypePolicy& base, const Islands& islands, const std::vector<WeightSize>& weights,
            Advice* advice) {
  const DtypePolicy policy = IslandPolicy(base, islands);
  advice->status_after = CellStatus::kPass;
  advice->islands = islands;
  advice->policy_name = policy.name;
  advice->policy_toml = policy.ToToml();
  advice->fp32_weight_fraction = Fp32WeightFraction(weights, policy);
}

// Drops each island whose removal still passes (delta debugging).
StatusOr<Islands> Shrink(Islands islands, Search& search, Advice* advice) {
  for (size_t i = 0; i < islands.size() && islands.size() > 1 && search.BudgetLeft(*advice);) {
    Islands fewer = islands;
    fewer.erase(fewer.begin() + static_cast<long>(i));
    if (FailedBefore(*advice, fewer)) {
      ++i;
      continue;
    }
    StatusOr<CellResult> r = search.Try(fewer, advice);
    if (!r.ok()) return r.status();
    if (search.Passes(*r)) {
      islands = fewer;
    } else {
      ++i;
    }
  }
  return islands;
}

// The other seeds of 0..kAdviceSeedRange-1 whose goldens the golden folder holds, at
// most AdviseOptions::verify_seeds, each as `cell` at that seed.
std::vector<ResolvedCell> OtherSeedsToVerify(const ResolvedCell& cell, const AdviseOptions& options) {
  std::vector<ResolvedCell> out;
  const GoldenStore store(options.run.golden_dir);
  for (uint64_t seed = 0; seed < kAdviceSeedRange && static_cast<int>(out.size()) < options.verify_seeds;
       ++seed) {
    if (seed == cell.cell.seed) continue;
    ResolvedCell other = AtSeed(cell, seed);
    std::error_code missing;
    if (std::filesystem::exists(store.PathFor(other.golden), missing)) out.push_back(std::move(other));
  }
  return out;
}

// "at seed 1: FAIL (min_psnr 23.2 < 26.8)": where a run of the islands failed.
std::string FailedAt(uint64_t seed, const CellResult& r) {
  return "at seed " + std::to_string(seed) + ": " + StatusName(r.status) +
         (r.reason.empty() ? "" : " (" + r.reason + ")");
}

// Whether `islands`, which passed at the cell's seed (`search`), pass at each of `seeds`.
// A seed that fails grows them from its run (Grow) while the budget lasts, from the
// search's `last` culprit and candidate `queue` when its run names none (logit ops kept in
// FP32 from q and k rounded before them make no isolated error of their own); a grown set
// is run again at the cell's seed and at the seeds that passed before it. `islands` is the
// last set run. When they do not hold, `why` says so for the advice's note: "do not hold
// at seed 1: FAIL (...)", "were not run at seed 2: no runs left (--max-runs)".
StatusOr<bool> HoldsAtOtherSeeds(const std::vector<ResolvedCell>& seeds, Search& search,
                                 const CellResult& observed, const DtypePolicy& base,
                                 const std::vector<WeightSize>& weights, const AdviseOptions& options,
                                 const Culprit& last, const Islands& queue, Islands* islands, Advice* advice,
                                 std::string* why) {
  // One passing run per seed, two with headroom (the run with less range).
  const int more_runs = static_cast<int>(seeds.size()) * (search.requires_headroom() ? 2 : 1);
  search.AllowMoreRuns(more_runs);
  std::vector<std::unique_ptr<Search>> at;  // one per seed, each verifying `islands` there
  for (const ResolvedCell& cell : seeds) {
    at.push_back(std::make_unique<Search>(cell, options, /*other_seed=*/true));
    at.back()->RequireHeadroomFor(observed);
    at.back()->AllowMoreRuns(more_runs);
  }
  std::vector<std::pair<Search*, uint64_t>> passed = {{&search, observed.cell.seed}};
  std::string first_failure;  // of the islands as given, once they have grown from it
  // Whether they hold; `why` says why not, of the given islands first.
  const auto fails = [&](std::string what) {
    *why = first_failure.empty() ? what : "do not hold " + first_failure + "; grown from there, they " + what;
    return false;
  };
  for (size_t i = 0; i < seeds.size(); ++i) {
    Search& verify = *at[i];
    const uint64_t seed = seeds[i].cell.seed;
    Culprit culprit = last;
    Islands candidates = queue;
    std::optional<CellResult> before;
    bool grew = false;
    for (;;) {
      if (!verify.BudgetLeft(*advice))
        return fails("were not run at seed " + std::to_string(seed) + ": no runs left (--max-runs)");
      StatusOr<CellResult> r = verify.Try(*islands, advice);
      if (!r.ok()) return r.status();
      if (verify.Passes(*r)) break;
      if (!Advisable(*r)) return fails("do not hold " + FailedAt(seed, *r));
      const Step step = Grow(*islands, *r, before ? &*before : nullptr, base, weights,
                             options.max_weight_share, &candidates, &culprit);
      if (step.next.empty()) return fails("do not hold " + FailedAt(seed, *r) + ", and " + step.stop);
      if (first_failure.empty()) first_failure = FailedAt(seed, *r);
      *islands = step.next;
      before = *r;
      grew = true;
    }
    // Grown islands are run again where the smaller set passed.
    for (size_t j = 0; grew && j < passed.size(); ++j) {
      auto [earlier, earlier_seed] = passed[j];
      if (!earlier->BudgetLeft(*advice))
        return fails("were not run again at seed " + std::to_string(earlier_seed) +
                     ": no runs left (--max-runs)");
      StatusOr<CellResult> r = earlier->Try(*islands, advice);
      if (!r.ok()) return r.status();
      if (!earlier->Passes(*r)) return fails("do not hold " + FailedAt(earlier_seed, *r));
    }
    passed.emplace_back(&verify, seed);
  }
  return true;
}

}  // namespace

std::string ParentModule(const std::string& path) {
  if (path == "*" || path.empty()) return "";
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "*" : path.substr(0, dot);
}

StatusOr<Advice> AdvisePrecision(const Cell& cell, const AdviseOptions& options,
                                 CellResult* observed_result) {
  StatusOr<ResolvedCell> resolved = ResolveCell(cell);
  if (!resolved.ok()) return resolved.status();
  const DtypePolicy& base = resolved->spec.policy;
  CellRunOptions observe = options.run;
  observe.probes = true;  // ranges and SQNR against FP32 for the fallback candidates
  observe.probe_count = 64;
  StatusOr<CellResult> observed = RunCell(*resolved, observe);
  if (!observed.ok()) return observed.status();
  if (observed_result != nullptr) *observed_result = *observed;
  if (observed->status == CellStatus::kUnresolved) {
    return Status::NotFound("cannot judge without a golden: " + observed->reason);
  }
  Advice advice;
  advice.status_before = observed->status;
  Search search(*resolved, options);
  search.Record({}, *observed, &advice);
  advice.status_after = observed->status;
  if (observed->status == CellStatus::kPass || !Advisable(*observed)) return advice;
  StatusOr<std::vector<WeightSize>> weights = ListWeightSizes(resolved->spec);
  if (!weights.ok()) return weights.status();
  const Culprit culprit = CulpritOf(*observed);
  advice.culprit = culprit.module.empty() ? "" : culprit.Name();
  advice.culprit_weight_fraction =  // what keeping the culprit alone in FP32 costs
      culprit.module.empty() ? 0 : WeightShareOf(*weights, IslandFor(culprit, *weights));

  Islands queue = ProbeCandidates(*observed);
  // A producer that names no cause (an in-place sum's error shows at its module's level
  // with no isolated error of its own) still says where the error is largest: its module
  // is the first candidate.
  if (!RunNamesACause(*observed) && observed->producer.found && !observed->producer.module.empty() &&
      !Contains(queue, observed->producer.module))
    queue.insert(queue.begin(), observed->producer.module);
  Culprit last;
  // A cell the made-in-modules rule FAILed starts from the islands that rule proved.
  search.RequireTheCureOf(*observed);
  search.RequireHeadroomFor(*observed);
  Step step;
  if (observed->made_in_islands.empty()) {
    step = Grow({}, *observed, nullptr, base, *weights, options.max_weight_share, &queue, &last);
  } else {
    step.next = Normalized(base, observed->made_in_islands);
    last = IslandSeedOf(*observed);
  }
  CellResult before = *observed;  // the run before step.next's islands
  bool passed = false;
  while (!step.next.empty() && search.BudgetLeft(advice)) {
    StatusOr<CellResult> r = search.Try(step.next, &advice);
    if (!r.ok()) return r.status();
    if (r->status == CellStatus::kUnresolved) {
      return Status::NotFound("cannot judge without a golden: " + r->reason);
    }
    if (search.Passes(*r)) {
      advice.status_after = CellStatus::kPass;
      passed = true;
      break;
    }
    if (r->status == CellStatus::kPass) {  // within the bound, but not cured
      char text[120];
      std::snprintf(text, sizeof text,
                    "the islands pass the bound but leave more than 1/%g of the cell's %serror",
                    search.RuleFactor(), search.cure_of_compute_part() ? "compute part's " : "");
      step = Stop(text);
      break;
    }
    advice.status_after = r->status;
    if (!Advisable(*r) && !step.origin_island.empty()) {  // the consumer's island instead
      Islands next = step.next;
      std::replace(next.begin(), next.end(), step.origin_island, step.consumer_island);
      step = Step{};
      step.next = Normalized(base, next);
      continue;
    }
    if (!Advisable(*r)) {
      step = Stop(std::string("the islands turn the failure into ") + StatusName(r->status));
      break;
    }
    step = Grow(step.next, *r, &before, base, *weights, options.max_weight_share, &queue, &last);
    before = *r;
  }
  if (!passed && !search.passed_without_headroom().empty()) {
    // Better islands that pass by a hair than none: said so.
    Advise(base, search.passed_without_headroom(), *weights, &advice);
    advice.verified = false;
    advice.note = "the islands pass, but overflow with FP16's range " +
                  std::to_string(kAdviceFp16HeadroomBits) +
                  " bits smaller: other inputs may overflow (no island with that headroom found in " +
                  std::to_string(advice.runs.size()) + " runs)";
    return advice;
  }
  if (!passed) {
    if (step.next.empty() && search.BudgetLeft(advice)) {
      // No island within the cap: is it a precision problem at all? (Not advice.)
      StatusOr<CellResult> whole = search.Try({"*"}, &advice);
      if (!whole.ok()) return whole.status();
      advice.note =
          "no island of at most " + PercentText(options.max_weight_share) + " of the weights found (" +
          step.stop + "); " +
          (whole->status == CellStatus::kPass
               ? "the whole model in FP32 passes"
               : std::string("it fails with the whole model in FP32 too (") + StatusName(whole->status) +
                     "): not a precision problem FP32 islands can cure");
    } else if (step.next.empty()) {
      advice.note = "no island found (" + step.stop + ")";
    }
    return advice;
  }
  StatusOr<Islands> islands = Shrink(step.next, search, &advice);
  if (!islands.ok()) return islands.status();
  const std::vector<ResolvedCell> seeds = OtherSeedsToVerify(*resolved, options);
  Islands held = *islands;
  std::string why;
  StatusOr<bool> holds =
      HoldsAtOtherSeeds(seeds, search, *observed, base, *weights, options, last, queue, &held, &advice, &why);
  if (!holds.ok()) return holds.status();
  // Islands that pass at the cell's seed only are still its cure: said so.
  Advise(base, *holds ? held : *islands, *weights, &advice);
  if (!*holds) {
    advice.verified = false;
    advice.note = "the islands pass at seed " + std::to_string(cell.seed) + " but " + why;
  }
  return advice;
}

}  // namespace framegate
