#include "checks/qualification.h"

#include "harness/printf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace framegate {
namespace {

using Severity = DeviceVerdict;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Step i's error in `pass`; the decode's for i == number of steps.
double ErrorAt(const StepReplay& pass, size_t i) {
  return i < pass.step_rel_l2.size() ? pass.step_rel_l2[i] : pass.decode_rel_l2;
}
int StepNumber(const StepReplay& pass, size_t i) {
  return i < pass.step_rel_l2.size() ? static_cast<int>(i) : QualificationReason::kDecodeStep;
}

// The first module of step `step` whose output norm in `a` differs from `b`'s by more
// than `tolerance(j)`; "" when none (or the calls do not line up).
template <typename Tolerance>
std::string FirstDeviatingModule(const StepReplay& a, const std::vector<double>& b, int step,
                                 Tolerance tolerance) {
  if (step < 0 || static_cast<size_t>(step) >= a.module_norms.size()) return "";
  const std::vector<double>& n = a.module_norms[static_cast<size_t>(step)];
  if (n.size() != b.size()) return "";
  for (size_t j = 0; j < n.size(); ++j) {
    if (!(std::fabs(n[j] - b[j]) <= tolerance(j)))
      return j < a.modules.size() ? a.modules[j] : "#" + std::to_string(j);
  }
  return "";
}

// The peers' view of one cell: each device's passes, and per step the fleet's median error.
struct CellFleet {
  std::vector<const DevicePasses*> devices;  // those with passes
  std::vector<double> median_error;          // per step, then the decode
  bool any_nonfinite(const DevicePasses* except) const {
    for (const DevicePasses* d : devices) {
      if (d == except) continue;
      for (const StepReplay& p : d->result.replays)
        if (p.first_nonfinite_step != -2) return true;
    }
    return false;
  }
  // The peers' median norm of each module at `step` and each peer's distance from it.
  std::vector<double> ModuleMedian(int step, const DevicePasses* self, std::vector<double>* spread) const {
    std::vector<std::vector<double>> rows;
    for (const DevicePasses* d : devices) {
      const StepReplay& p = d->result.replays.front();
      if (step >= 0 && static_cast<size_t>(step) < p.module_norms.size())
        rows.push_back(p.module_norms[step]);
    }
    std::vector<double> median;
    if (rows.empty()) return median;
    const size_t m = rows.front().size();
    for (const std::vector<double>& r : rows)
      if (r.size() != m) return {};
    spread->assign(m, 0.0);
    for (size_t j = 0; j < m; ++j) {
      std::vector<double> column;
      for (const std::vector<double>& r : rows) column.push_back(r[j]);
      median.push_back(Median(column));
    }
    for (const DevicePasses* d : devices) {
      if (d == self) continue;
      const std::vector<double>& r = d->result.replays.front().module_norms[step];
      for (size_t j = 0; j < m; ++j) (*spread)[j] = std::max((*spread)[j], std::fabs(r[j] - median[j]));
    }
    return median;
  }
};

void Add(DeviceQualification& q, const std::string& kind, Severity s, const DevicePasses& d, int step,
         const std::string& module, const std::string& detail) {
  QualificationReason r;
  r.kind = kind;
  r.severity = s;
  r.cell = d.cell;
  r.step = step;
  r.module = module;
  r.detail = detail;
  q.reasons.push_back(std::move(r));
}

// Whether every pass is bitwise the first (a wrong answer that repeats is persistent).
bool Repeatable(const std::vector<StepReplay>& passes) {
  for (const StepReplay& p : passes)
    if (p.digest != passes[0].digest) return false;
  return true;
}

// Repeatability: passes of one device that are not bitwise equal.
void CheckRepeats(const DevicePasses& d, DeviceQualification& q) {
  const std::vector<StepReplay>& passes = d.result.replays;
  for (size_t r = 1; r < passes.size(); ++r) {
    if (passes[r].digest == passes[0].digest) continue;
    const size_t n = passes[0].step_rel_l2.size() + 1;
    size_t i = 0;
    while (i + 1 < n && ErrorAt(passes[r], i) == ErrorAt(passes[0], i)) ++i;
    const int step = StepNumber(passes[0], i);
    const std::vector<double> zero;
    const std::string module =
        step >= 0 && static_cast<size_t>(step) < passes[0].module_norms.size()
            ? FirstDeviatingModule(passes[r], passes[0].module_norms[static_cast<size_t>(step)], step,
                                   [](size_t) { return 0.0; })
            : "";
    Add(q, "transient_mismatch", Severity::kDegraded, d, step, module,
        "pass " + std::to_string(r + 1) + " is not bitwise pass 1's" +
            Printf(": rel_l2 %.3g vs %.3g", ErrorAt(passes[r], i), ErrorAt(passes[0], i)));
    return;  // one reason per cell and kind
  }
}

// Step conformance: steps outside the budget the model's calibration sets on the device
// (StepReplay::step_budget, from its FP32 noise floor), with or without peers. Faulty when
// every pass is outside and the passes are bitwise equal. The module named is the first
// whose output norm is off a peer's that kept inside the budget by more than the budget.
void CheckStepConformance(const DevicePasses& d, const CellFleet& fleet, DeviceQualification& q) {
  const std::vector<StepReplay>& passes = d.result.replays;
  for (size_t i = 0; i < passes[0].step_rel_l2.size(); ++i) {
    int outside = 0;
    double worst = 0, budget = NAN;
    for (const StepReplay& p : passes) {
      if (std::isnan(p.step_budget) || i >= p.step_rel_l2.size()) continue;
      budget = p.step_budget;
      if (!(p.step_rel_l2[i] <= budget)) ++outside;
      worst = std::isnan(p.step_rel_l2[i]) ? p.step_rel_l2[i] : std::max(worst, p.step_rel_l2[i]);
    }
    if (outside == 0) continue;
    const int step = static_cast<int>(i);
    std::string module;
    for (const DevicePasses* peer : fleet.devices) {
      const StepReplay& other = peer->result.replays.front();
      if (peer == &d || i >= other.step_rel_l2.size() || !(other.step_rel_l2[i] <= budget) ||
          i >= other.module_norms.size())
        continue;
      const std::vector<double>& norms = other.module_norms[i];
      module = FirstDeviatingModule(passes[0], norms, step,
                                    [&](size_t j) { return budget * std::fabs(norms[j]); });
      break;
    }
    const bool persistent = Repeatable(passes) && outside == static_cast<int>(passes.size());
    Add(q, "step_conformance", persistent ? Severity::kFaulty : Severity::kDegraded, d, step, module,
        Printf("rel_l2 %.3g against the golden, budget %.3g (the calibration's FP32 step noise floor)", worst,
               budget) +
            " in " + std::to_string(outside) + " of " + std::to_string(passes.size()) + " passes");
    return;
  }
}

bool StepsHaveBudget(const DevicePasses& d) {
  for (const StepReplay& p : d.result.replays)
    if (std::isnan(p.step_budget)) return false;
  return true;
}

// Agreement: steps where this device is outside its peers' budget.
// With fewer than 3 devices there is no majority: the device gets a note (severity PASS)
// saying what was not compared, so that its PASS does not claim more than was looked at,
// unless the model's calibration bounds its steps (CheckStepConformance).
void CheckAgreement(const DevicePasses& d, const CellFleet& fleet, DeviceQualification& q) {
  if (fleet.devices.size() < 3) {
    if (StepsHaveBudget(d)) return;
    Add(q, "not_compared", Severity::kPass, d, QualificationReason::kNoStep, "",
        "the cell ran on " + std::to_string(fleet.devices.size()) +
            (fleet.devices.size() == 1 ? " device" : " devices") +
            "; agreement needs 3 (a majority), so a flip that repeats inside a denoising step is found only "
            "where it reaches the decode's bound");
    return;
  }
  const std::vector<StepReplay>& passes = d.result.replays;
  for (size_t i = 0; i < fleet.median_error.size(); ++i) {
    const double budget = kAgreementMultiplier * fleet.median_error[i] + kAgreementFloor;
    int outside = 0;
    double worst = 0;
    for (const StepReplay& p : passes) {
      if (!(ErrorAt(p, i) <= budget)) ++outside;
      worst = std::max(worst, ErrorAt(p, i));
    }
    if (outside == 0) continue;
    const int step = StepNumber(passes[0], i);
    std::vector<double> spread;
    const std::vector<double> median = fleet.ModuleMedian(step, &d, &spread);
    const std::string module = FirstDeviatingModule(passes[0], median, step, [&](size_t j) {
      return kModuleSpread * spread[j] + kAgreementFloor * std::fabs(median[j]);
    });
    const bool persistent = Repeatable(passes) && outside == static_cast<int>(passes.size());
    Add(q, persistent ? "persistent_mismatch" : "transient_mismatch",
        persistent ? Severity::kFaulty : Severity::kDegraded, d, step, module,
        Printf("rel_l2 %.3g against the golden, budget %.3g (2x the fleet median %.3g + 1e-6)", worst, budget,
               fleet.median_error[i]) +
            " in " + std::to_string(outside) + " of " + std::to_string(passes.size()) + " passes");
    return;
  }
}

// A NaN/Inf no other device makes on the cell: FAULTY in every pass, DEGRADED in some.
void CheckNonfinite(const DevicePasses& d, const CellFleet& fleet, DeviceQualification& q) {
  int passes = 0, step = -2;
  for (const StepReplay& p : d.result.replays) {
    if (p.first_nonfinite_step == -2) continue;
    ++passes;
    if (step == -2) step = p.first_nonfinite_step;
  }
  if (passes == 0 || fleet.any_nonfinite(&d)) return;
  const bool persistent = passes == static_cast<int>(d.result.replays.size());  // else transient
  Add(q, "nonfinite", persistent ? Severity::kFaulty : Severity::kDegraded, d, step, "",
      "NaN/Inf in " + std::to_string(passes) + " of " + std::to_string(d.result.replays.size()) +
          " passes; no other device makes one");
}

void CheckConformance(const DevicePasses& d, DeviceQualification& q) {
  int outside = 0;
  std::string violation;
  double worst_margin = INFINITY, psnr = 0, bound = 0;
  for (const StepReplay& p : d.result.replays) {
    if (!p.decode_violation.empty()) {
      ++outside;
      violation = p.decode_violation;
    }
    const double margin = p.decode_min_psnr - p.decode_psnr_bound;
    if (margin < worst_margin) worst_margin = margin, psnr = p.decode_min_psnr, bound = p.decode_psnr_bound;
  }
  const int n = static_cast<int>(d.result.replays.size());
  if (outside > 0) {
    const bool persistent = outside == n;
    Add(q, "conformance", persistent ? Severity::kFaulty : Severity::kDegraded, d,
        QualificationReason::kDecodeStep, "",
        violation + " (" + d.result.judged_by + ") in " + std::to_string(outside) + " of " +
            std::to_string(n) + " passes");
  } else if (worst_margin < kNearBudgetDb) {
    Add(q, "near_budget", Severity::kDegraded, d, QualificationReason::kDecodeStep, "",
        Printf("decode min_psnr %.2f dB is within %.2f dB of its bound %.2f", psnr, kNearBudgetDb, bound));
  }
}

// Speed: each device's time (the sum of its cells' median pass) against its kind's fastest.
void CheckSpeed(std::vector<DeviceQualification>& devices) {
  std::map<std::string, double> fastest;
  for (const DeviceQualification& q : devices) {
    if (q.seconds <= 0) continue;
    auto [it, added] = fastest.emplace(q.kind, q.seconds);
    if (!added) it->second = std::min(it->second, q.seconds);
  }
  for (DeviceQualification& q : devices) {
    const auto it = fastest.find(q.kind);
    if (q.seconds <= 0 || it == fastest.end() || q.seconds <= kSlowFactor * it->second) continue;
    QualificationReason r;
    r.kind = "slow";
    r.severity = Severity::kDegraded;
    r.detail =
        Printf("%.3f s, %.2fx the fastest %s device", q.seconds, q.seconds / it->second, q.kind.c_str());
    q.reasons.push_back(std::move(r));
  }
}

}  // namespace

std::vector<DeviceQualification> QualifyDevices(const std::vector<DevicePasses>& runs) {
  std::vector<DeviceQualification> devices;
  std::map<std::string, size_t> index;
  std::map<std::string, CellFleet> fleets;
  for (const DevicePasses& d : runs) {
    if (index.emplace(d.device, devices.size()).second) {
      devices.push_back({});
      devices.back().device = d.device;
      devices.back().kind = d.kind;
    }
    if (!d.result.replays.empty()) fleets[d.cell].devices.push_back(&d);
  }
  for (auto& [cell, fleet] : fleets) {
    const size_t n = fleet.devices.front()->result.replays.front().step_rel_l2.size() + 1;
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> per_device;
      for (const DevicePasses* d : fleet.devices) {
        std::vector<double> per_pass;
        for (const StepReplay& p : d->result.replays) per_pass.push_back(ErrorAt(p, i));
        per_device.push_back(Median(per_pass));
      }
      fleet.median_error.push_back(Median(per_device));
    }
  }
  for (const DevicePasses& d : runs) {
    DeviceQualification& q = devices[index[d.device]];
    if (d.result.replays.empty()) {
      if (d.result.status == CellStatus::kUnsupported)
        continue;  // the device cannot run it: not qualified on it
      Add(q, "not_run", Severity::kDegraded, d, QualificationReason::kNoStep, "",
          std::string(StatusName(d.result.status)) + ": " + d.result.reason);
      continue;
    }
    ++q.cells;
    q.repeats = static_cast<int>(d.result.replays.size());
    std::vector<double> seconds;
    for (const StepReplay& p : d.result.replays) seconds.push_back(p.seconds);
    q.seconds += Median(seconds);
    const CellFleet& fleet = fleets[d.cell];
    CheckNonfinite(d, fleet, q);
    CheckRepeats(d, q);
    CheckAgreement(d, fleet, q);
    CheckStepConformance(d, fleet, q);
    CheckConformance(d, q);
  }
  CheckSpeed(devices);
  for (DeviceQualification& q : devices) {
    if (q.cells == 0) {  // nothing looked at: not a PASS
      QualificationReason r;
      r.kind = "not_run";
      r.severity = Severity::kDegraded;
      r.detail = "no cell of the matrix was replayed on this device";
      q.reasons.push_back(std::move(r));
    }
    std::stable_sort(
        q.reasons.begin(), q.reasons.end(),
        [](const QualificationReason& a, const QualificationReason& b) { return a.severity > b.severity; });
    q.verdict = q.reasons.empty() ? Severity::kPass : q.reasons.front().severity;
  }
  return devices;
}

}  // namespace framegate
