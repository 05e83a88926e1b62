// The qualification verdict (`framegate qualify`, docs/qualification.md): each device's
// step-replay passes of each cell, compared with its own other passes (repeatability),
// with the same cell on the other devices (agreement, by the fleet's median) and with the
// cell's bound (conformance), give the device PASS, DEGRADED or FAULTY with its reasons.
#pragma once

#include <string>
#include <vector>

#include "harness/cell_result.h"
#include "harness/qualification.h"

namespace framegate {

// The agreement budget of a step: kAgreementMultiplier x the fleet's median error on it
// (the calibration rule, checks/calibration.h, with the peers as the reference) plus
// kAgreementFloor, float32's own resolution. A module deviates from its peers when its
// output norm is further from their median than kModuleSpread x the peers' own distance
// plus kAgreementFloor relative.
constexpr double kAgreementMultiplier = 2.0;
constexpr double kAgreementFloor = 1e-6;
constexpr double kModuleSpread = 10.0;
constexpr double kSlowFactor = 1.1;     // slower than this x the kind's fastest: DEGRADED
constexpr double kNearBudgetDb = 6.02;  // decode PSNR within this of its bound: DEGRADED

// One cell on one device: its result, whose `replays` are the passes.
struct DevicePasses {
  std::string device;
  std::string kind;  // devices of one kind are compared for speed
  std::string cell;  // the cell without its device ("reference:tiny fp32 seed 0"): the peers' key
  CellResult result;
};

// The verdict of every device that appears in `runs`, in order of first appearance.
std::vector<DeviceQualification> QualifyDevices(const std::vector<DevicePasses>& runs);

}  // namespace framegate
