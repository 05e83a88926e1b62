#include "checks/verdict.h"

#include <cassert>

namespace framegate {
namespace {

std::string NonfiniteReason(const FrameHealth& h, const FirstNonfinite& first) {
  if (first.found) return first.Describe();
  if (h.first_nonfinite_step >= 0) {
    const NonfiniteCount& c = h.step_latents[h.first_nonfinite_step];
    return std::string(c.nan > 0 ? "NaN" : "Inf") + " in the latents after step " +
           std::to_string(h.first_nonfinite_step);
  }
  return std::string(h.decoded.nan > 0 ? "NaN" : "Inf") + " in the decoded frames (" +
         std::to_string(h.decoded.nan) + " NaN, " + std::to_string(h.decoded.inf) + " Inf)";
}

Verdict Decide(const VerdictInputs& in) {
  switch (in.run) {
    case RunEnd::kError:
      return {CellStatus::kError, in.error.Reason(), ErrorClassName(in.error.cls)};
    case RunEnd::kUnsupported:
      return {CellStatus::kUnsupported, in.unsupported, ""};
    case RunEnd::kTimeout:
      return {CellStatus::kTimeout, in.lost, ""};
    case RunEnd::kCrash:
      return {CellStatus::kCrash, in.lost, ""};
    case RunEnd::kFinished:
      break;
  }
  assert(in.health != nullptr && in.first_nonfinite != nullptr);
  const FrameHealth& h = *in.health;
  // What the run handed on (latents, decoded frames), not what a probe saw inside a module:
  // an Inf that a later op absorbs (rsqrt(inf) = 0) leaves finite, wrong frames, judged as
  // such with or without --probes; the probe's place stays in first_nonfinite.
  if (h.first_nonfinite_step >= 0 || h.decoded.any() || h.defect == FrameDefect::kNonfinite) {
    return {CellStatus::kNonfinite, NonfiniteReason(h, *in.first_nonfinite), ""};
  }
  if (h.defect != FrameDefect::kNone) {
    return {CellStatus::kBrokenFrames,
            std::string(FrameDefectName(h.defect)) + ": " + std::to_string(h.defect_frames) + " of " +
                std::to_string(h.frames.size()) + " frames",
            ""};
  }
  if (!in.fp8_out_of_range.empty()) {
    return {CellStatus::kFail, "FP8 storage cannot hold weights: " + in.fp8_out_of_range, ""};
  }
  if (!in.made_in_modules.empty()) return {CellStatus::kFail, "error made in " + in.made_in_modules, ""};
  if (in.metrics == nullptr) return {CellStatus::kUnresolved, in.unresolved, ""};
  if (in.tolerance != nullptr) {
    if (const auto v = FirstViolation(*in.tolerance, *in.metrics)) {
      return {CellStatus::kFail, v->Reason(), ""};
    }
  }
  if (in.compute_metrics != nullptr && in.compute_tolerance != nullptr) {
    if (const auto v = FirstViolation(*in.compute_tolerance, *in.compute_metrics)) {
      return {CellStatus::kFail, "compute part: " + v->Reason() + " against " + in.compute_reference, ""};
    }
  }
  return {CellStatus::kPass, "", ""};
}

}  // namespace

Verdict DecideVerdict(const VerdictInputs& in) {
  Verdict v = Decide(in);
  v.status = ApplyExpectedFailure(v.status, in.expected_to_fail);
  return v;
}

CellResult JudgedResult(const Cell& cell, const Verdict& verdict) {
  CellResult r;
  r.cell = cell;
  r.policy_used = cell.policy;
  r.status = verdict.status;
  r.reason = verdict.reason;
  r.error_class = verdict.error_class;
  return r;
}

}  // namespace framegate
