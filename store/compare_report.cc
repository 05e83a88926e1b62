// The JSON and text forms of a RunComparison (declared in run_compare.h).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/printf.h"
#include "store/run_compare.h"

namespace framegate {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string RunLine(const RunInfo& run) {
  return run.run_id + " (" + run.started_at + ", " + (run.git_sha.empty() ? "no git sha" : run.git_sha) + ")";
}

std::string ChangeDetail(const CellChange& c) {
  switch (c.kind) {
    case ChangeKind::kNewlyFailing:
    case ChangeKind::kNewlyPassing:
    case ChangeKind::kStatusChanged:
      return c.status_a + " -> " + c.status_b + (c.reason_b.empty() ? "" : "  " + c.reason_b);
    case ChangeKind::kAccuracyWorse:
    case ChangeKind::kAccuracyBetter:
      return c.metric + " " +
             Printf("%.6g -> %.6g (%+.3g, noise band %.3g)", c.value_a, c.value_b, c.value_b - c.value_a,
                    c.band);
    case ChangeKind::kSlower:
    case ChangeKind::kFaster:
      return Printf("median %.4g s -> %.4g s (%+.1f%%, Mann-Whitney p=%.3g", c.value_a, c.value_b,
                    100 * (c.value_b / c.value_a - 1), c.p_value) +
             ", " + std::to_string(c.repeats_a) + " vs " + std::to_string(c.repeats_b) + " repeats)";
    case ChangeKind::kOnlyInA:
    case ChangeKind::kOnlyInB:
      return c.status_b;
  }
  return "";
}

}  // namespace

nlohmann::json ComparisonToJson(const RunComparison& comparison) {
  nlohmann::json changes = nlohmann::json::array();
  for (const CellChange& c : comparison.changes) {
    nlohmann::json j = {{"kind", ChangeKindName(c.kind)}, {"regression", IsRegression(c.kind)},
                        {"cell_id", c.cell_id},           {"label", c.label},
                        {"status_a", c.status_a},         {"status_b", c.status_b}};
    if (!c.metric.empty()) {
      j["metric"] = c.metric;
      j["value_a"] = Number(c.value_a);
      j["value_b"] = Number(c.value_b);
    }
    if (c.kind == ChangeKind::kAccuracyWorse || c.kind == ChangeKind::kAccuracyBetter) {
      j["noise_band"] = Number(c.band);
    }
    if (c.kind == ChangeKind::kSlower || c.kind == ChangeKind::kFaster) {
      j["p_value"] = c.p_value;
      j["repeats_a"] = c.repeats_a;
      j["repeats_b"] = c.repeats_b;
    }
    if (!c.reason_b.empty()) j["reason_b"] = c.reason_b;
    changes.push_back(j);
  }
  return {{"run_a", comparison.a.run_id},
          {"run_b", comparison.b.run_id},
          {"cells_compared", comparison.cells_compared},
          {"regressions", comparison.regressions()},
          {"changes", changes}};
}

std::string FormatComparison(const RunComparison& comparison) {
  std::ostringstream out;
  out << "compare " << RunLine(comparison.a) << " -> " << RunLine(comparison.b) << ": "
      << comparison.cells_compared << " cells in both\n";
  const ChangeKind order[] = {
      ChangeKind::kNewlyFailing,  ChangeKind::kAccuracyWorse, ChangeKind::kSlower,
      ChangeKind::kStatusChanged, ChangeKind::kNewlyPassing,  ChangeKind::kAccuracyBetter,
      ChangeKind::kFaster,        ChangeKind::kOnlyInA,       ChangeKind::kOnlyInB};
  for (ChangeKind kind : order) {
    int count = 0;
    for (const CellChange& c : comparison.changes) count += c.kind == kind;
    if (count == 0) continue;
    out << ChangeKindName(kind) << " (" << count << ")" << (IsRegression(kind) ? " REGRESSION" : "") << ":\n";
    for (const CellChange& c : comparison.changes) {
      if (c.kind == kind) out << "  " << c.cell_id << "  " << c.label << "  " << ChangeDetail(c) << "\n";
    }
  }
  const int regressions = comparison.regressions();
  if (regressions > 0) {
    out << "verdict: REGRESSION (" << regressions << " change" << (regressions == 1 ? "" : "s") << ")\n";
  } else {
    out << "verdict: no regression\n";
  }
  return out.str();
}

}  // namespace framegate
