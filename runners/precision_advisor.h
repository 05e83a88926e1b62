// The precision advisor (`framegate advise`): for a cell that fails under its policy
// (NONFINITE, BROKEN_FRAMES, FAIL, or ERROR dtype_mismatch), finds a small set of modules
// to keep in FP32 (fp32_modules islands) so that the cell passes, and proves it by
// running the cell with them. docs/diagnose.md describes the search:
//   1. one observed run (probes, SQNR against FP32): candidates are the module where the
//      error was raised or the first non-finite value was produced, the modules whose
//      values overflow the compute dtype, then the largest SQNR drops;
//   2. grow: run with the islands; if the cell still fails, add the module that fails
//      now, or, when that module is already an island, widen the island to its parent
//      module ("denoiser.blocks.1.ff.0" -> "denoiser.blocks.1.ff"); the last step is
//      "*" (the whole model in FP32);
//   3. shrink: drop each island whose removal still passes.
// Every step is a real run of the cell under a policy written to a file, the same file
// form a matrix accepts.
#pragma once

#include <functional>
#include <string>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "runners/cell_runner.h"

namespace framegate {

struct AdviseOptions {
  CellRunOptions run;    // golden_dir, threads of the judged runs
  int max_runs = 12;     // runs of the cell in all, the first observed one included
  std::string work_dir;  // where the candidate policy file is written (must exist)
  // Called after each run, for progress.
  std::function<void(const AdviceRun&)> on_run;
};

// A Status only for bad input (unknown policy, broken package, no or damaged golden:
// the advisor cannot judge without one). When no passing set is found within the budget
// the Advice says so: found() is false and status_after is the last run's.
// `observed`, when given, receives the first (observed) run's result, so that a caller
// recording the cell does not run it again.
StatusOr<Advice> AdvisePrecision(const Cell& cell, const AdviseOptions& options,
                                 CellResult* observed_result = nullptr);

// The parent module path ("a.b.c" -> "a.b"; "a" -> "*"; "*" -> "").
std::string ParentModule(const std::string& path);

}  // namespace framegate
