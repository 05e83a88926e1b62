// CompareRuns: what changed between two runs, cell by cell, with a verdict.
//   status:   newly failing (passing in A, failing in B: a regression), newly passing,
//             other status changes (still failing, differently);
//   accuracy: min_psnr, mean_ssim and rel_l2 moved by more than the cell's own
//             run-to-run noise: a band of 3 standard deviations of the metric over the
//             cell's last noise_history results on the same device model in the runs of
//             B's matrix (same matrix_sha256) of the 30 days before B, never narrower
//             than a floor (kPsnrFloorDb, kSsimFloor, kRelL2RelativeFloor). Worse is a
//             regression;
//   latency:  the timing repeats of A and B differ by a two-sided Mann-Whitney U test
//             (p < alpha) AND the medians differ by at least min_effect (relative).
//             Slower is a regression. With fewer than 4 repeats a side no p value can go
//             below 0.05: such cells are never judged slower.
// Cells only in one run are listed, not judged.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/run_record.h"
#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

constexpr double kPsnrFloorDb = 0.01;
constexpr double kSsimFloor = 1e-4;
constexpr double kRelL2RelativeFloor = 0.01;

struct CompareOptions {
  double alpha = 0.05;       // Mann-Whitney significance level
  double min_effect = 0.05;  // smallest relative latency change that counts
  int noise_history = 20;    // results before B used to estimate a metric's noise
};

enum class ChangeKind {
  kNewlyFailing,
  kNewlyPassing,
  kStatusChanged,
  kAccuracyWorse,
  kAccuracyBetter,
  kSlower,
  kFaster,
  kOnlyInA,
  kOnlyInB,
};
const char* ChangeKindName(ChangeKind kind);  // "newly_failing", "accuracy_worse", ...
bool IsRegression(ChangeKind kind);           // newly failing, accuracy worse, slower

struct CellChange {
  ChangeKind kind = ChangeKind::kStatusChanged;
  std::string cell_id;
  std::string label;  // Cell::Label()
  std::string status_a, status_b;
  std::string reason_b;  // B's reason, for status changes
  std::string metric;    // accuracy: the metric; latency: "latency_median_s"
  double value_a = 0, value_b = 0;
  double band = 0;     // accuracy: the noise band the change exceeded
  double p_value = 1;  // latency
  int repeats_a = 0, repeats_b = 0;
};

struct RunComparison {
  RunInfo a, b;
  int cells_compared = 0;  // cells present in both runs
  std::vector<CellChange> changes;
  int regressions() const;
};

// NotFound (naming the file and the run) when either run does not exist.
StatusOr<RunComparison> CompareRuns(ResultStore& store, const std::string& run_a, const std::string& run_b,
                                    const CompareOptions& options);

nlohmann::json ComparisonToJson(const RunComparison& comparison);
// The human report: one section per change kind, one line per cell, and the verdict.
std::string FormatComparison(const RunComparison& comparison);

}  // namespace framegate
