#include "runners/precision_advisor.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "pipelines/dtype_policy.h"
#include "pipelines/pipeline_run.h"

namespace framegate {
namespace {

// The cell statuses the advisor can act on: a precision problem that FP32 islands may cure.
bool Advisable(const CellResult& r) {
  switch (r.status) {
    case CellStatus::kNonfinite:
    case CellStatus::kBrokenFrames:
    case CellStatus::kFail:
      return true;
    case CellStatus::kError:
      return r.error_class == "dtype_mismatch";
    default:
      return false;
  }
}

// The module a failed run blames: where the error was raised, or where the first
// non-finite value came from; "" when the run does not name one (a FAIL).
std::string BlamedModule(const CellResult& r) {
  if (r.status == CellStatus::kError) return r.error_module;
  if (r.first_nonfinite.found) return r.first_nonfinite.module;
  return "";
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Candidates from the observed run, most likely first: the blamed module, the modules
// whose values overflow the compute dtype, then the lowest SQNR against FP32.
std::vector<std::string> Candidates(const CellResult& observed) {
  std::vector<std::string> out;
  auto add = [&](const std::string& m) {
    if (!m.empty() && !Contains(out, m)) out.push_back(m);
  };
  add(BlamedModule(observed));
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
DtypePolicy IslandPolicy(const DtypePolicy& base, const std::vector<std::string>& islands) {
  DtypePolicy p = base;
  const std::string preset = base.based_on.empty() ? base.name : base.based_on;
  p.name = preset + "-fp32-islands";
  p.based_on = preset;
  p.fallback = preset;
  p.fp32_modules = islands;
  return p;
}

class Search {
 public:
  Search(const ResolvedCell& cell, const AdviseOptions& options)
      : cell_(cell), base_(cell.spec.policy), options_(options) {}

  // Runs the cell with `islands` kept in FP32 and records the run.
  StatusOr<CellResult> Try(const std::vector<std::string>& islands, Advice* advice) {
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
    StatusOr<CellResult> r = RunCell(candidate, options_.run);
    if (!r.ok()) return r.status();
    Record(islands, *r, advice);
    return r;
  }

  void Record(const std::vector<std::string>& islands, const CellResult& r, Advice* advice) {
    advice->runs.push_back({islands, r.status, r.reason});
    if (options_.on_run) options_.on_run(advice->runs.back());
  }

  bool BudgetLeft(const Advice& advice) const {
    return static_cast<int>(advice.runs.size()) < options_.max_runs;
  }

 private:
  const ResolvedCell& cell_;
  const DtypePolicy& base_;
  const AdviseOptions& options_;
};

// The next islands after a failed run: add the module it blames, or widen the island
// that already covers it; without a blamed module, the next candidate; at last "*".
std::vector<std::string> Grow(std::vector<std::string> islands, const CellResult& failed,
                              const DtypePolicy& base, std::vector<std::string>* queue) {
  const std::string blamed = BlamedModule(failed);
  if (!blamed.empty()) {
    const DtypePolicy current = IslandPolicy(base, islands);
    if (!current.InFp32Module(blamed)) {
      islands.push_back(blamed);
      return islands;
    }
    for (std::string& island : islands) {  // widen the island that covers it
      if (IslandPolicy(base, {island}).InFp32Module(blamed)) {
        island = ParentModule(island);
        break;
      }
    }
    std::sort(islands.begin(), islands.end());
    islands.erase(std::unique(islands.begin(), islands.end()), islands.end());
    return Contains(islands, "*") ? std::vector<std::string>{"*"} : islands;
  }
  while (!queue->empty()) {
    const std::string next = queue->front();
    queue->erase(queue->begin());
    if (!Contains(islands, next)) {
      islands.push_back(next);
      return islands;
    }
  }
  return {"*"};
}

double Fp32WeightFraction(const std::vector<WeightSize>& weights, const DtypePolicy& policy) {
  int64_t total = 0, kept = 0;
  for (const WeightSize& w : weights) {
    total += w.numel;
    if (policy.InFp32Module(ModuleOfWeight(w.name))) kept += w.numel;
  }
  return total > 0 ? static_cast<double>(kept) / static_cast<double>(total) : 0.0;
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
  observe.probes = true;  // ranges and SQNR against FP32 for the candidates
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

  std::vector<std::string> queue = Candidates(*observed);
  std::vector<std::string> islands;
  if (!queue.empty()) {
    islands.push_back(queue.front());
    queue.erase(queue.begin());
  } else {
    islands = {"*"};
  }
  // Grow until a run passes.
  bool passed = false;
  while (search.BudgetLeft(advice)) {
    StatusOr<CellResult> r = search.Try(islands, &advice);
    if (!r.ok()) return r.status();
    advice.status_after = r->status;
    if (r->status == CellStatus::kPass) {
      passed = true;
      break;
    }
    if (islands == std::vector<std::string>{"*"}) break;  // fails in FP32 too
    islands = Grow(islands, *r, base, &queue);
  }
  if (!passed) return advice;
  // Shrink: drop each island whose removal still passes.
  for (size_t i = 0; i < islands.size() && islands.size() > 1 && search.BudgetLeft(advice);) {
    std::vector<std::string> fewer = islands;
    fewer.erase(fewer.begin() + static_cast<long>(i));
    StatusOr<CellResult> r = search.Try(fewer, &advice);
    if (!r.ok()) return r.status();
    if (r->status == CellStatus::kPass) {
      islands = fewer;
    } else {
      ++i;
    }
  }
  const DtypePolicy final_policy = IslandPolicy(base, islands);
  advice.status_after = CellStatus::kPass;
  advice.islands = islands;
  advice.policy_name = final_policy.name;
  advice.policy_toml = final_policy.ToToml();
  StatusOr<std::vector<WeightSize>> weights = ListWeightSizes(resolved->spec);
  if (!weights.ok()) return weights.status();
  advice.fp32_weight_fraction = Fp32WeightFraction(*weights, final_policy);
  return advice;
}

}  // namespace framegate
