#include "harness/qualification.h"

namespace framegate {

const char* DeviceVerdictName(DeviceVerdict verdict) {
  switch (verdict) {
    case DeviceVerdict::kPass:
      return "PASS";
    case DeviceVerdict::kDegraded:
      return "DEGRADED";
    case DeviceVerdict::kFaulty:
      return "FAULTY";
  }
  return "FAULTY";  // not reached: every enumerator is named above
}

bool ParseDeviceVerdict(const std::string& text, DeviceVerdict* verdict) {
  for (DeviceVerdict v : {DeviceVerdict::kPass, DeviceVerdict::kDegraded, DeviceVerdict::kFaulty}) {
    if (text == DeviceVerdictName(v)) {
      *verdict = v;
      return true;
    }
  }
  return false;
}

std::string QualificationReason::Describe() const {
  std::string text = kind;
  if (!cell.empty()) text += " " + cell;
  if (step == kDecodeStep) {
    text += " decode";
  } else if (step >= 0) {
    text += " step " + std::to_string(step);
  }
  if (!module.empty()) text += " (" + module + ")";
  if (!detail.empty()) text += ": " + detail;
  return text;
}

}  // namespace framegate
