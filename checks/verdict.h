// The verdict: one function decides a cell's status and reason from what the run
// produced. Order (first match wins):
//   1. the pipeline raised            -> ERROR "<error class>: <message> (in <module>)"
//   2. the device cannot run it       -> UNSUPPORTED "<why>"
//   3. NaN/Inf in latents or frames   -> NONFINITE "NaN at step S in <module>" (first seen)
//   4. black/white/uniform/frozen     -> BROKEN_FRAMES "<kind>: N of T frames"
//   5. no golden to compare with      -> UNRESOLVED "<why> (make it: <command>)"
//   6. a tolerance bound broken       -> FAIL "<metric> <value> < <bound>"
//   7. otherwise                      -> PASS
// then expected failures flip (ApplyExpectedFailure), the reason kept.
#pragma once

#include <string>

#include "checks/tolerance.h"
#include "harness/cell_result.h"
#include "harness/error_class.h"

namespace framegate {

struct VerdictInputs {
  enum class Run { kFinished, kError, kUnsupported };
  Run run = Run::kFinished;
  ClassifiedError error;                            // kError
  std::string unsupported;                          // kUnsupported
  const FrameHealth* health = nullptr;              // kFinished
  const FirstNonfinite* first_nonfinite = nullptr;  // kFinished
  const ComparisonMetrics* metrics = nullptr;       // null when there is no golden
  std::string unresolved;                           // why there is no golden
  const ToleranceProfile* tolerance = nullptr;
  bool expected_to_fail = false;
};

struct Verdict {
  CellStatus status;
  std::string reason;
  std::string error_class;  // ERROR only
};

Verdict DecideVerdict(const VerdictInputs& in);

}  // namespace framegate
