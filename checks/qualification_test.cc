#include "checks/qualification.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

// A pass with step errors `steps` (and a decode error 1e-7), the module norms {1, 2, 3}
// at every step scaled by `module_scale` from module `from` on at step `at`.
StepReplay Pass(std::vector<double> steps, const std::string& digest, int at = -1, size_t from = 0,
                double module_scale = 1) {
  StepReplay p;
  p.step_rel_l2 = std::move(steps);
  p.decode_rel_l2 = 1e-7;
  p.decode_min_psnr = 120;
  p.decode_psnr_bound = 60;
  p.digest = digest;
  p.modules = {"embed", "blocks.0.ff", "out"};
  for (size_t i = 0; i < p.step_rel_l2.size(); ++i) {
    std::vector<double> norms = {1.0, 2.0, 3.0};
    for (size_t j = from; j < 3 && static_cast<int>(i) == at; ++j) norms[j] *= module_scale;
    p.module_norms.push_back(norms);
  }
  p.seconds = 1;
  return p;
}

DevicePasses On(const std::string& device, std::vector<StepReplay> passes,
                const std::string& cell = "tiny fp32") {
  DevicePasses d{device, device, cell, {}};
  d.result.status = CellStatus::kPass;
  d.result.replays = std::move(passes);
  return d;
}

// Three healthy kernel paths: each a little off the golden, each repeating bitwise.
std::vector<DevicePasses> HealthyFleet() {
  std::vector<DevicePasses> runs;
  const std::vector<std::pair<std::string, double>> devices = {
      {"cpu:avx512", 0}, {"cpu:avx2", 2e-7}, {"cpu:default", 3e-7}};
  for (const auto& [device, e] : devices) {
    const std::vector<double> steps = {e, e, e};
    runs.push_back(On(device, {Pass(steps, device), Pass(steps, device), Pass(steps, device)}));
  }
  return runs;
}

TEST(QualifyDevicesTest, AHealthyFleetPasses) {
  for (const DeviceQualification& q : QualifyDevices(HealthyFleet())) {
    EXPECT_EQ(q.verdict, DeviceVerdict::kPass) << q.device;
    EXPECT_TRUE(q.reasons.empty());
    EXPECT_EQ(q.cells, 1);
    EXPECT_EQ(q.repeats, 3);
  }
}

TEST(QualifyDevicesTest, AMismatchThatRepeatsIsFaultyAtItsStepAndModule) {
  std::vector<DevicePasses> runs = HealthyFleet();
  const std::vector<double> steps = {0, 4e-3, 0};  // step 1 made the error
  runs[0].result.replays = {Pass(steps, "x", 1, 1, 1.5), Pass(steps, "x", 1, 1, 1.5),
                            Pass(steps, "x", 1, 1, 1.5)};
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  ASSERT_EQ(q[0].verdict, DeviceVerdict::kFaulty);
  EXPECT_EQ(q[0].reasons[0].kind, "persistent_mismatch");
  EXPECT_EQ(q[0].reasons[0].step, 1);
  EXPECT_EQ(q[0].reasons[0].module, "blocks.0.ff");
  EXPECT_EQ(q[1].verdict, DeviceVerdict::kPass);
  EXPECT_EQ(q[2].verdict, DeviceVerdict::kPass);
}

TEST(QualifyDevicesTest, APassThatDoesNotRepeatIsDegradedAtTheStepWhereItLeaves) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs[1].result.replays[2] = Pass({2e-7, 2e-7, 9e-2}, "other", 2, 2, 7.0);
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  EXPECT_EQ(q[0].verdict, DeviceVerdict::kPass);
  ASSERT_EQ(q[1].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[1].reasons[0].kind, "transient_mismatch");
  EXPECT_EQ(q[1].reasons[0].step, 2);
  EXPECT_EQ(q[1].reasons[0].module, "out");
}

TEST(QualifyDevicesTest, MismatchesThatDifferEveryPassAreTransientNotPersistent) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs[2].result.replays = {Pass({1e-2, 0, 0}, "a"), Pass({0, 1e-2, 0}, "b"), Pass({0, 0, 1e-2}, "c")};
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  EXPECT_EQ(q[2].verdict, DeviceVerdict::kDegraded);
  for (const QualificationReason& r : q[2].reasons) EXPECT_NE(r.kind, "persistent_mismatch");
}

TEST(QualifyDevicesTest, ANanOnlyOneDeviceMakesIsFaultyButOneEveryDeviceMakesIsNot) {
  std::vector<DevicePasses> runs = HealthyFleet();
  for (StepReplay& p : runs[1].result.replays) p.first_nonfinite_step = 1;
  std::vector<DeviceQualification> q = QualifyDevices(runs);
  ASSERT_EQ(q[1].verdict, DeviceVerdict::kFaulty);
  EXPECT_EQ(q[1].reasons[0].kind, "nonfinite");
  EXPECT_EQ(q[1].reasons[0].step, 1);
  for (DevicePasses& d : runs) d.result.replays[0].first_nonfinite_step = 1;
  q = QualifyDevices(runs);
  for (const QualificationReason& r : q[1].reasons) EXPECT_NE(r.kind, "nonfinite");
}

TEST(QualifyDevicesTest, ANanInSomePassesOnlyIsTransientSoDegraded) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs[1].result.replays[1].first_nonfinite_step = 5;  // pass 2 of 3
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  ASSERT_EQ(q[1].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[1].reasons[0].kind, "nonfinite");
  EXPECT_EQ(q[1].reasons[0].step, 5);
  EXPECT_NE(q[1].reasons[0].detail.find("NaN/Inf in 1 of 3 passes"), std::string::npos);
}

TEST(QualifyDevicesTest, ConformanceOutsideTheBoundIsFaultyAndNearItDegraded) {
  std::vector<DevicePasses> runs = HealthyFleet();
  for (StepReplay& p : runs[0].result.replays) p.decode_violation = "min_psnr 20 < 26.8";
  for (StepReplay& p : runs[1].result.replays) p.decode_min_psnr = 63;
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  EXPECT_EQ(q[0].verdict, DeviceVerdict::kFaulty);
  EXPECT_EQ(q[0].reasons[0].kind, "conformance");
  EXPECT_EQ(q[1].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[1].reasons[0].kind, "near_budget");
}

TEST(QualifyDevicesTest, ASlowDeviceIsDegradedAgainstItsOwnKindOnly) {
  std::vector<DevicePasses> runs = HealthyFleet();
  for (StepReplay& p : runs[2].result.replays) p.seconds = 5;  // cpu:default: a kind of its own
  EXPECT_EQ(QualifyDevices(runs)[2].verdict, DeviceVerdict::kPass);
  runs[1].kind = runs[2].kind = "gpu-x";
  const std::vector<DeviceQualification> q = QualifyDevices(runs);
  ASSERT_EQ(q[2].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[2].reasons[0].kind, "slow");
  EXPECT_EQ(q[2].reasons[0].detail, "5.000 s, 5.00x the fastest gpu-x device");
  EXPECT_EQ(q[1].verdict, DeviceVerdict::kPass);
}

TEST(QualifyDevicesTest, TwoDevicesPassButSayTheyWereNotComparedWithAMajority) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs.pop_back();
  const std::vector<double> steps = {0, 4e-3, 0};  // a flip that repeats: no majority can tell
  runs[0].result.replays = {Pass(steps, "x"), Pass(steps, "x"), Pass(steps, "x")};
  for (const DeviceQualification& q : QualifyDevices(runs)) {
    EXPECT_EQ(q.verdict, DeviceVerdict::kPass) << q.device;
    ASSERT_EQ(q.reasons.size(), 1u) << q.device;
    EXPECT_EQ(q.reasons[0].kind, "not_compared");
    EXPECT_EQ(q.reasons[0].severity, DeviceVerdict::kPass);
    EXPECT_NE(q.reasons[0].detail.find("ran on 2 devices; agreement needs 3"), std::string::npos);
  }
}

// Two devices and the model's calibration: the steps are judged by its FP32 step budget.
std::vector<DevicePasses> TwoDevicesWithABudget(double budget) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs.erase(runs.begin());  // cpu:avx2, cpu:default
  for (DevicePasses& d : runs)
    for (StepReplay& p : d.result.replays) p.step_budget = budget;
  return runs;
}

TEST(QualifyDevicesTest, TwoDevicesWithACalibratedStepBudgetAreComparedWithIt) {
  for (const DeviceQualification& q : QualifyDevices(TwoDevicesWithABudget(2e-6))) {
    EXPECT_EQ(q.verdict, DeviceVerdict::kPass) << q.device;
    EXPECT_TRUE(q.reasons.empty()) << q.reasons[0].kind;  // no not_compared note: the steps were judged
  }
  std::vector<DevicePasses> runs = TwoDevicesWithABudget(2e-6);
  const std::vector<double> steps = {2e-7, 4e-3, 2e-7};  // step 1 made the error, every pass
  runs[1].result.replays = {Pass(steps, "x", 1, 1, 1.5), Pass(steps, "x", 1, 1, 1.5),
                            Pass(steps, "x", 1, 1, 1.5)};
  for (StepReplay& p : runs[1].result.replays) p.step_budget = 2e-6;
  std::vector<DeviceQualification> q = QualifyDevices(runs);
  EXPECT_EQ(q[0].verdict, DeviceVerdict::kPass);
  ASSERT_EQ(q[1].verdict, DeviceVerdict::kFaulty);
  EXPECT_EQ(q[1].reasons[0].kind, "step_conformance");
  EXPECT_EQ(q[1].reasons[0].step, 1);
  EXPECT_EQ(q[1].reasons[0].module, "blocks.0.ff");  // off the peer inside its budget
  EXPECT_NE(q[1].reasons[0].detail.find("rel_l2 0.004 against the golden, budget 2e-06"), std::string::npos)
      << q[1].reasons[0].detail;
  runs[1].result.replays[2] = Pass({2e-7, 2e-7, 2e-7}, "y");  // one pass clean: not repeatable
  runs[1].result.replays[2].step_budget = 2e-6;
  q = QualifyDevices(runs);
  EXPECT_EQ(q[1].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[0].verdict, DeviceVerdict::kPass);
}

TEST(QualifyDevicesTest, ACellThatCouldNotBeReplayedIsNotAPass) {
  std::vector<DevicePasses> runs = HealthyFleet();
  runs[0].result.replays.clear();
  runs[0].result.status = CellStatus::kError;
  runs[0].result.reason = "dtype_mismatch: ...";
  EXPECT_EQ(QualifyDevices(runs)[0].verdict, DeviceVerdict::kDegraded);
  runs[0].result.status = CellStatus::kUnsupported;  // unsupported is no finding, but nothing ran
  std::vector<DeviceQualification> q = QualifyDevices(runs);
  ASSERT_EQ(q[0].verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ(q[0].cells, 0);
  runs.push_back(On("cpu:avx512", HealthyFleet()[0].result.replays, "tiny bf16"));
  q = QualifyDevices(runs);
  EXPECT_EQ(q[0].verdict, DeviceVerdict::kPass);  // the unsupported cell aside, it passed
  EXPECT_EQ(q[0].cells, 1);
}

}  // namespace
}  // namespace framegate
