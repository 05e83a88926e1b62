// The precision advisor (`framegate advise`): for a cell that fails under its policy
// (NONFINITE, BROKEN_FRAMES, FAIL, or ERROR dtype_mismatch), finds a small set of FP32
// islands (fp32_modules entries: module paths, or "PATH:OP" op islands, op_islands.h) so
// that the cell passes, and proves it by running the cell with them. docs/diagnose.md
// describes the search:
//   1. one observed run (probes, SQNR against FP32). The culprit is where the failure is
//      MADE: the module and op that raised the error, produced the first non-finite value,
//      or, for a finite FAIL, made the largest isolated error against what its precision
//      predicts (runners/error_producer.h);
//   2. grow: the first island is the culprit's (its module when the op uses the module's
//      own weights, else the op at its module's level; for an offset that a norm cancels,
//      the norm's). Run with the islands. While the
//      cell fails, widen the island that covers the new culprit to its parent (an op
//      island to its module: an op in FP32 that still makes a NaN/Inf may take a value
//      that overflowed where an island's output re-entered the reduced dtype); a culprit
//      no island covers (NONFINITE -> FAIL elsewhere) gets an island of its own. A run that
//      names no culprit (a FAIL of the reference model, which has no per-op hooks) widens
//      the last culprit's island, or without one takes the next probe candidate. A module
//      island that left a finite FAIL where it was took its input rounded where it was
//      made: before its parent, the ops that made its inputs join it as op islands
//      (CellResult::island_input_makers, "decoder.out_mix:aten::add");
//   3. stop when the next set would keep more than `max_weight_share` of the weights in
//      FP32, or would be the whole model: the Advice says no island was found (after one
//      run with the whole model in FP32, which tells a precision problem from another);
//   4. shrink: drop each island whose removal still passes (a set already run is not
//      run again);
//   5. verify at other seeds (AdviseOptions::verify_seeds): another seed's inputs may need
//      more (attention logits one-hot at one seed, near a tie at another). A seed that
//      fails grows the islands from its run as in 2, and the grown set is run again at
//      the cell's seed and at the seeds that passed before. When no set holds at every
//      seed, the islands that passed at the cell's seed are the advice, not verified
//      (Advice::verified), and the note says where they fail.
// An FP16 overflow (a package's NONFINITE cell under the FP16 emulation) passes only with
// headroom: a passing set is run once more with FP16's range kAdviceFp16HeadroomBits
// smaller, and an overflow there is a failure to grow from. When no set passes that way
// within the budget, the last set that passed without it is returned, not verified, and
// the note says so.
// Every step is a real run of the cell under a policy written to a file, the same file
// form a matrix accepts, judged by the bound that judged the cell.
#pragma once

#include <functional>
#include <string>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "runners/cell_runner.h"

namespace framegate {

// How many doublings below FP16's largest value an overflow's cure must keep its values.
constexpr int kAdviceFp16HeadroomBits = 2;

struct AdviseOptions {
  CellRunOptions run;  // golden_dir, threads of the judged runs
  int max_runs = 12;   // runs of the cell in all, the first observed one included
  // Other seeds (of 0-7, kAdviceSeedRange) the passing islands are run at, at most this
  // many, those whose goldens golden_dir holds (by default all of them: the seeds a user
  // made goldens for are those the advice will be checked at): each gets a run beyond
  // max_runs; islands that fail one grow from that run within max_runs (AdvisePrecision).
  int verify_seeds = 7;
  // The largest share of the model's weights the islands may keep in FP32.
  double max_weight_share = 0.5;
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

// The seeds 0..kAdviceSeedRange-1 are those AdviseOptions::verify_seeds looks for goldens of.
constexpr uint64_t kAdviceSeedRange = 8;

// The parent module path ("a.b.c" -> "a.b"; "a" -> "*"; "*" -> "").
std::string ParentModule(const std::string& path);

}  // namespace framegate
