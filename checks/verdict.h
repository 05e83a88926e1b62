// The verdict: the one function that decides a cell's status and reason from how its run
// ended and what it produced. Nothing else assigns ERROR, UNSUPPORTED, TIMEOUT or CRASH.
// Order (first match wins):
//   1. the process hung               -> TIMEOUT "<what happened>"
//   2. the process died               -> CRASH "<signal or exit code>: <last stderr line>"
//   3. the pipeline raised            -> ERROR "<error class>: <message> (in <module>)"
//   4. the device cannot run it       -> UNSUPPORTED "<why>"
//   5. NaN/Inf in latents or frames   -> NONFINITE "NaN at step S in <module>" (first seen)
//   6. black/white/uniform/frozen     -> BROKEN_FRAMES "<kind>: N of T frames"
//   7. no golden to compare with      -> UNRESOLVED "<why> (make it: <command>)"
//   8. a tolerance bound broken       -> FAIL "<metric> <value> < <bound>", then the
//      compute part's                 -> FAIL "compute part: <metric> <value> < <bound>
//                                         against <its reference>"
//   9. otherwise                      -> PASS
// then expected failures flip (ApplyExpectedFailure), once, the reason kept.
#pragma once

#include <string>

#include "checks/tolerance.h"
#include "harness/cell_result.h"
#include "harness/error_class.h"

namespace framegate {

struct VerdictInputs {
  RunEnd run = RunEnd::kFinished;
  ClassifiedError error;                            // kError
  std::string unsupported;                          // kUnsupported
  std::string lost;                                 // kTimeout, kCrash: what happened to the process
  const FrameHealth* health = nullptr;              // kFinished
  const FirstNonfinite* first_nonfinite = nullptr;  // kFinished
  const ComparisonMetrics* metrics = nullptr;       // null when there is no golden
  std::string unresolved;                           // why there is no golden
  const ToleranceProfile* tolerance = nullptr;
  // The compute part of an FP8-storage policy (runners/cell_bound.h): its metrics
  // against the same weights computed in FP32, the profile that judges them, and that
  // reference in words, for the reason. Null when the policy has none.
  const ComparisonMetrics* compute_metrics = nullptr;
  const ToleranceProfile* compute_tolerance = nullptr;
  std::string compute_reference;  // "its fp8e4m3 weights computed in FP32"
  // The weights the policy's FP8 storage cannot hold (saturates or flushes) and that make
  // the error, in words ("" when none): a FAIL whatever the metrics, since the model run is
  // not the trained one.
  std::string fp8_out_of_range;
  // A cell within its bound whose error a few small modules make, in words ("" when not):
  // "decoder.blend (0.78% of the weights) kept in FP32 leaves 0.29 of the error ..."
  // (runners/cell_bound.h: kMadeInModulesErrorFactor). A FAIL: the bound is wider than
  // the damage.
  std::string made_in_modules;
  bool expected_to_fail = false;
};

struct Verdict {
  CellStatus status;
  std::string reason;
  std::string error_class;  // ERROR only
};

Verdict DecideVerdict(const VerdictInputs& in);

// The result of `cell` that carries only a verdict (a cell that did not run, or whose
// process ended without a result): status, reason and error class from `verdict`, the
// policy used the cell's.
CellResult JudgedResult(const Cell& cell, const Verdict& verdict);

}  // namespace framegate
