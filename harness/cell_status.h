// CellStatus: how one cell ended. Each status is data (LLVM lit's ResultCode): a name
// and whether it fails the run. Names are fixed; the store, the reports and the JSON use
// exactly these strings.
//   PASS           within tolerance of the golden, frames healthy
//   FAIL           a tolerance was exceeded (reason names the metric, value, bound)
//   NONFINITE      NaN/Inf in the latents or the decoded frames (with step and module)
//   BROKEN_FRAMES  black, white, uniform or frozen frames (reason starts with the kind)
//   ERROR          the pipeline raised (reason starts with the error class)
//   UNSUPPORTED    the device cannot run the policy (with why); not a failure
//   UNRESOLVED     the cell could not be judged (no golden): a failure
//   TIMEOUT/CRASH  the cell's process hung or died
//   XFAIL/XPASS    a cell declared expected-to-fail failed / passed
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace framegate {

// How a cell's run ended, before it is judged: the pipeline reports the first three, the
// runner the last two for a cell process that ended without a result. DecideVerdict
// (checks/verdict.h) turns it, with what the run produced, into the CellStatus.
enum class RunEnd {
  kFinished,     // the pipeline produced frames
  kError,        // the pipeline raised (a classified error)
  kUnsupported,  // the device cannot run the policy
  kTimeout,      // the cell's process ran past its timeout and was killed
  kCrash,        // the cell's process died (signal or exit) without a result
};

enum class CellStatus {
  kPass,
  kFail,
  kNonfinite,
  kBrokenFrames,
  kError,
  kUnsupported,
  kUnresolved,
  kTimeout,
  kCrash,
  kXfail,
  kXpass,
};

const char* StatusName(CellStatus status);                     // "PASS", "BROKEN_FRAMES", ...
std::optional<CellStatus> ParseStatus(std::string_view name);  // exact names only
// Whether the status fails a run (exit 1): everything but PASS, UNSUPPORTED and XFAIL.
bool IsFailure(CellStatus status);
// The one place expected failures flip: for a cell declared xfail, a failing status
// becomes XFAIL and PASS becomes XPASS; UNSUPPORTED and UNRESOLVED stay as they are (the
// cell was not judged). Cells not declared xfail keep their status.
CellStatus ApplyExpectedFailure(CellStatus status, bool expected_to_fail);

}  // namespace framegate
