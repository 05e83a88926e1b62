#include "harness/qualification.h"

#include <cmath>

#include <gtest/gtest.h>

#include "harness/qualification_json.h"

namespace framegate {
namespace {

TEST(QualificationTest, VerdictNamesRoundTripAndOthersAreRefused) {
  for (DeviceVerdict v : {DeviceVerdict::kPass, DeviceVerdict::kDegraded, DeviceVerdict::kFaulty}) {
    DeviceVerdict parsed = DeviceVerdict::kPass;
    ASSERT_TRUE(ParseDeviceVerdict(DeviceVerdictName(v), &parsed)) << DeviceVerdictName(v);
    EXPECT_EQ(parsed, v);
  }
  EXPECT_STREQ(DeviceVerdictName(DeviceVerdict::kDegraded), "DEGRADED");
  DeviceVerdict untouched = DeviceVerdict::kFaulty;
  for (const char* bad : {"", "pass", "FAIL", "PASS ", "FAULTY\n"}) {
    EXPECT_FALSE(ParseDeviceVerdict(bad, &untouched)) << bad;
    EXPECT_EQ(untouched, DeviceVerdict::kFaulty);
  }
}

TEST(QualificationTest, DescribeNamesCellStepModuleAndDetail) {
  QualificationReason r;
  r.kind = "persistent_mismatch";
  r.severity = DeviceVerdict::kFaulty;
  r.cell = "reference:tiny fp32 seed 0";
  r.step = 3;
  r.module = "blocks.1.ff.0";
  r.detail = "max_abs 0.25 in 3 of 3 repeats";
  EXPECT_EQ(r.Describe(),
            "persistent_mismatch reference:tiny fp32 seed 0 step 3 (blocks.1.ff.0): max_abs 0.25 in 3 of 3 "
            "repeats");
  r.step = QualificationReason::kDecodeStep;
  r.module.clear();
  EXPECT_EQ(r.Describe(),
            "persistent_mismatch reference:tiny fp32 seed 0 decode: max_abs 0.25 in 3 of 3 repeats");
  r.step = 0;
  EXPECT_EQ(r.Describe(),
            "persistent_mismatch reference:tiny fp32 seed 0 step 0: max_abs 0.25 in 3 of 3 repeats");
  QualificationReason device_wide;  // a reason about the whole device: no cell, no step
  device_wide.kind = "slow";
  device_wide.detail = "12.1 s, 1.4x the fastest cpu";
  EXPECT_EQ(device_wide.Describe(), "slow: 12.1 s, 1.4x the fastest cpu");
  device_wide.detail.clear();
  EXPECT_EQ(device_wide.Describe(), "slow");
}

TEST(QualificationJsonTest, ADeviceRoundTripsEveryField) {
  DeviceQualification device;
  device.device = "cpu:avx512";
  device.kind = "cpu";
  device.verdict = DeviceVerdict::kFaulty;
  device.cells = 8;
  device.repeats = 3;
  device.seconds = 12.5;
  device.reasons = {{"persistent_mismatch", DeviceVerdict::kFaulty, "reference:tiny fp32 seed 0", 3,
                     "blocks.<1>.ff&0", "max_abs 0.25"},
                    {"nonfinite", DeviceVerdict::kFaulty, "reference:tiny bf16 seed 1",
                     QualificationReason::kDecodeStep, "", "NaN in 12 pixels"},
                    {"slow", DeviceVerdict::kDegraded, "", QualificationReason::kNoStep, "", "1.4x"}};
  const nlohmann::json json = DeviceQualificationToJson(device);
  EXPECT_EQ(json["verdict"], "FAULTY");
  EXPECT_EQ(json["reasons"][0]["step"], 3);
  EXPECT_EQ(json["reasons"][1]["step"], -1);
  EXPECT_TRUE(json["reasons"][2]["step"].is_null());
  EXPECT_EQ(json["reasons"][2]["severity"], "DEGRADED");
  StatusOr<DeviceQualification> back = DeviceQualificationFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(DeviceQualificationToJson(*back), json);
  EXPECT_EQ(back->reasons[2].step, QualificationReason::kNoStep);
  EXPECT_EQ(back->reasons[0].module, "blocks.<1>.ff&0");
  device.seconds = std::nan("");  // not measured: null, read back as NaN
  StatusOr<DeviceQualification> unmeasured = DeviceQualificationFromJson(DeviceQualificationToJson(device));
  ASSERT_TRUE(unmeasured.ok());
  EXPECT_TRUE(std::isnan(unmeasured->seconds));
}

TEST(QualificationJsonTest, MalformedJsonNamesTheKey) {
  DeviceQualification device;
  device.device = "cpu:default";
  device.reasons = {{"slow", DeviceVerdict::kDegraded, "", 0, "", ""}};
  nlohmann::json json = DeviceQualificationToJson(device);
  json["verdict"] = "BROKEN";
  StatusOr<DeviceQualification> bad = DeviceQualificationFromJson(json);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "'verdict' is 'BROKEN', not PASS, DEGRADED or FAULTY");
  json = DeviceQualificationToJson(device);
  json["reasons"][0]["step"] = -7;
  bad = DeviceQualificationFromJson(json);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reason 0: 'step' is -7"), std::string::npos)
      << bad.status().message();
  json = DeviceQualificationToJson(device);
  json.erase("cells");
  EXPECT_EQ(DeviceQualificationFromJson(json).status().message(), "'cells' is missing or not an integer");
  EXPECT_FALSE(QualificationReasonsFromJson(nlohmann::json::object()).ok());
}

}  // namespace
}  // namespace framegate
