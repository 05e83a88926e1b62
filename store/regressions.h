// FindRegressions: what got worse lately and stayed worse, across a store's history.
//
// A series is one cell on one device model (the device's name in the run, e.g. "NVIDIA
// L4"), its points the runs since `since`, oldest first. Per series:
//   status    failing (IsFailure) in >= min_consecutive trailing runs after a passing
//             baseline point;
//   latency, min_psnr, mean_ssim, rel_l2 (passing points only): the last
//             >= min_consecutive points all worse than the baseline level by more than
//             max(relative, absolute, 3 x the series' noise) (see kValueTracks);
//   creeping  step changes found by binary segmentation (series_analysis.h) that add up,
//             worse, to more than that threshold between the window's first and last
//             level while no single step was flagged above.
// Baseline: "last-good" (the level just before the trailing streak: the last passing
// run for status, the median of the 5 points before the streak for values), a run id,
// or a tag (per series, the latest run carrying the tag).
// Flaky: a series whose status flips pass/fail at least twice between consecutive runs
// with the same git sha, LibTorch and CUDA versions: listed apart, never a regression.
// Findings are grouped by cell family (the cell without its device index: "cuda:3" and
// "cuda:5" are one family) and list the device models they show on, so "fails on one GPU
// model only" is one line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

struct RegressionOptions {
  std::string since;                   // "YYYY-MM-DD[...]"; "" = kDefaultWindowDays before the newest run
  std::string baseline = "last-good";  // "last-good", a run id or a tag
  double min_effect = 0.01;            // smallest relative latency / rel_l2 change that counts
  int min_consecutive = 2;             // the confirmation rule for status: failing nights in a row
  int confirm_values = 3;              // ... for latency and metrics: nights at the new level
  double fdr = 1e-4;                   // false discovery rate across all series x tracks
  double environment_fdr = 1e-2;       // ... across the environment tests (a known night)
  // Threads that judge the series (the result does not depend on it): 0 = the machine's
  // cores, at most 8, each with 2,000 series or more; N = N slices (tests).
  int judge_threads = 0;
};
constexpr int kDefaultWindowDays = 14;

struct StepChange {
  std::string run_id, git_sha;  // the first run at the new level
  double before = 0, after = 0;
};

struct RegressionFinding {
  std::string alert = "regression";  // "regression", "improvement", "environment"
  std::string kind;                  // "failing", "worse", "better", "creeping"
  std::string track;                 // "status", "latency_median_s", "min_psnr", "mean_ssim", "rel_l2"
  std::string family;                // "reference:tiny cuda fp16 seed=3"
  std::vector<std::string> cell_ids;
  std::vector<std::string> models;                         // device models it shows on
  std::vector<std::string> clean_models;                   // models where the family ran without it
  int devices = 0;                                         // series (cell x model) flagged
  std::string since_run, since_git_sha, since_started_at;  // first run of the streak
  int consecutive = 0;                                     // shortest streak in the group
  double baseline = 0, current = 0;                        // median over the group, in the track's unit
  std::string last_run;                                    // the newest run of the streak
  std::string last_status, last_reason;                    // status track: the newest failure
  std::vector<StepChange> steps;                           // creeping only (first series of the group)
  bool pending = false;  // one violation so far: shown, not counted as a regression
};

// One series' alert, what a CI gates on (`--json`'s "alerts"). kind: "regression" (exit 1
// when confirmed), "improvement", "environment" (the change began where the run's
// environment fingerprint changed; `changed` names the fields), "flaky".
struct SeriesAlert {
  std::string kind, change;  // change: "failing", "worse", "better", "creeping", "flaky"
  bool confirmed = false;    // held for min_consecutive nights and passed the FDR control
  std::string track, cell_id, model, family;
  std::string since_run, since_started_at, since_git_sha, last_run;
  int nights = 0;                    // runs at the new level (status: failing in a row)
  double baseline = 0, current = 0;  // in the track's unit
  double relative = 0;               // current / baseline - 1 (0 when baseline is 0)
  double sigmas = 0;                 // the shift in units of the series' noise (inf: noiseless)
  double confidence = 0;             // 1 - the Benjamini-Hochberg q-value
  std::vector<std::string> changed;  // environment: "libtorch_version: 1.13.0 -> 2.6.0"
};

struct FlakyCell {
  std::string family, cell_id, model;
  std::string statuses;  // oldest first, one letter per run: P pass, F fail, U other
  int flips = 0;
};

struct RegressionReport {
  std::string since, baseline;
  int runs = 0, series = 0;
  std::vector<RegressionFinding> findings;  // regressions first, then pending
  std::vector<FlakyCell> flaky;
  std::vector<SeriesAlert> alerts;  // one per flagged series and track
  int accepted = 0;                 // series judged from an accepted change on
  int regressions() const;
};

// InvalidInput for a malformed --since or a baseline that is neither a run nor a tag.
StatusOr<RegressionReport> FindRegressions(ResultStore& store, const RegressionOptions& options);

nlohmann::json RegressionsToJson(const RegressionReport& report);
std::string FormatRegressions(const RegressionReport& report);

}  // namespace framegate
