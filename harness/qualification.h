// Hardware qualification (`framegate qualify`, docs/qualification.md): one verdict per
// device, with its reasons, as a plain value. checks/qualification.h decides it, the
// store keeps it, the reports print it.
#pragma once

#include <string>
#include <vector>

namespace framegate {

// PASS: nothing found. DEGRADED: a transient mismatch, a slow device, conformance near
// its budget. FAULTY: a persistent mismatch, a NaN/Inf only this device makes, a cell
// outside its conformance budget. Ordered by severity.
enum class DeviceVerdict { kPass = 0, kDegraded = 1, kFaulty = 2 };
const char* DeviceVerdictName(DeviceVerdict verdict);  // "PASS", "DEGRADED", "FAULTY"
// kPass for "PASS", ...; false for another text.
bool ParseDeviceVerdict(const std::string& text, DeviceVerdict* verdict);

// One finding about a device. `kind` is one of:
//   persistent_mismatch  the device disagrees with its peers, the same way every repeat
//   transient_mismatch   a repeat disagrees with the device's other repeats
//   nonfinite            a NaN/Inf that no peer of the device makes
//   conformance          a step (or the decode) outside the cell's conformance budget
//   near_budget          conformance within a factor 2 of the budget
//   slow                 the device's time is above 1.1x its kind's fastest
//   not_run              a cell that did not run on the device (error, unsupported)
struct QualificationReason {
  std::string kind;
  DeviceVerdict severity = DeviceVerdict::kPass;
  std::string cell;    // the cell's label ("reference:tiny fp32 seed 0"), "" for the device
  int step = kNoStep;  // sampler step where the error is made; kDecodeStep for the decode
  std::string module;  // the first module seen deviating; "" when not observed
  std::string detail;  // one line with the numbers
  static constexpr int kNoStep = -2;
  static constexpr int kDecodeStep = -1;
  // "persistent_mismatch reference:tiny fp32 seed 0 step 3 (blocks.1.ff.0): <detail>"
  std::string Describe() const;
};

struct DeviceQualification {
  std::string device;  // "cpu:avx512", "cuda:0"
  std::string kind;    // what it is compared with ("cpu", "NVIDIA H100 80GB HBM3")
  DeviceVerdict verdict = DeviceVerdict::kPass;
  std::vector<QualificationReason> reasons;  // most severe first
  int cells = 0;                             // cells run on the device
  int repeats = 0;                           // passes per cell
  double seconds = 0;                        // the median pass time, summed over the cells
};

}  // namespace framegate
