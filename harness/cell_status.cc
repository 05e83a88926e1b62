#include "harness/cell_status.h"

namespace framegate {
namespace {

struct StatusInfo {
  CellStatus status;
  const char* name;
  bool is_failure;
};

constexpr StatusInfo kStatuses[] = {
    {CellStatus::kPass, "PASS", false},
    {CellStatus::kFail, "FAIL", true},
    {CellStatus::kNonfinite, "NONFINITE", true},
    {CellStatus::kBrokenFrames, "BROKEN_FRAMES", true},
    {CellStatus::kError, "ERROR", true},
    {CellStatus::kUnsupported, "UNSUPPORTED", false},
    {CellStatus::kUnresolved, "UNRESOLVED", true},
    {CellStatus::kTimeout, "TIMEOUT", true},
    {CellStatus::kCrash, "CRASH", true},
    {CellStatus::kXfail, "XFAIL", false},
    {CellStatus::kXpass, "XPASS", true},
};

const StatusInfo& Info(CellStatus status) { return kStatuses[static_cast<int>(status)]; }

}  // namespace

const char* StatusName(CellStatus status) { return Info(status).name; }

std::optional<CellStatus> ParseStatus(std::string_view name) {
  for (const StatusInfo& info : kStatuses) {
    if (name == info.name) return info.status;
  }
  return std::nullopt;
}

bool IsFailure(CellStatus status) { return Info(status).is_failure; }

CellStatus ApplyExpectedFailure(CellStatus status, bool expected_to_fail) {
  if (!expected_to_fail) return status;
  switch (status) {
    case CellStatus::kPass:
      return CellStatus::kXpass;
    case CellStatus::kUnsupported:
    case CellStatus::kUnresolved:
    case CellStatus::kXfail:
    case CellStatus::kXpass:
      return status;
    default:
      return CellStatus::kXfail;
  }
}

}  // namespace framegate
