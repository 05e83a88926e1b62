#include "reports/qualification_report.h"

#include <sstream>

#include <gtest/gtest.h>

namespace framegate {
namespace {

// Three devices: one PASS, one DEGRADED, one FAULTY whose reasons come least severe first
// and whose module and detail need escaping.
std::vector<DeviceQualification> SampleDevices() {
  DeviceQualification pass{"cpu:default", "cpu", DeviceVerdict::kPass, {}, 8, 3, 10.5};
  DeviceQualification degraded{"cpu:avx2", "cpu", DeviceVerdict::kDegraded, {}, 8, 3, 11.0};
  degraded.reasons = {{"transient_mismatch", DeviceVerdict::kDegraded, "reference:tiny bf16 seed 1", 4, "",
                       "repeat 2 of 3 differs: max_abs 1.5e-05"}};
  DeviceQualification faulty{"cpu:avx512", "cpu", DeviceVerdict::kFaulty, {}, 8, 3, 14.25};
  faulty.reasons = {{"slow", DeviceVerdict::kDegraded, "", QualificationReason::kNoStep, "",
                     "14.2 s, 1.36x the fastest cpu"},
                    {"persistent_mismatch", DeviceVerdict::kFaulty, "reference:tiny fp32 seed 0", 3,
                     "blocks<1>.ff&0", "max_abs 0.25 \"x\" < 1"},
                    {"nonfinite", DeviceVerdict::kFaulty, "reference:tiny fp32 seed 1",
                     QualificationReason::kDecodeStep, "", "NaN in 12 pixels"}};
  return {pass, degraded, faulty};
}

RunInfo SampleRun() {
  RunInfo run;
  run.run_id = "2024-05-01T03:00:00Z-1a2b3c4d";
  run.host = "host<a>";
  run.started_at = "2024-05-01T03:00:00Z";
  run.command = "framegate qualify matrix/qualify.toml --repeats 3";
  return run;
}

// The <testcase ...>...</testcase> element for `device`.
std::string Testcase(const std::string& xml, const std::string& device) {
  const size_t begin = xml.find("<testcase classname=\"qualify\" name=\"" + device + "\"");
  if (begin == std::string::npos) return "";
  return xml.substr(begin, xml.find("</testcase>", begin) - begin);
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(QualificationReportTest, SummaryIsOneLinePerDeviceWithReasonsMostSevereFirst) {
  const std::string text = QualificationSummary(SampleDevices());
  EXPECT_EQ(
      text,
      "cpu:default  PASS\n"
      "cpu:avx2     DEGRADED  (1 reason)\n"
      "    transient_mismatch reference:tiny bf16 seed 1 step 4: repeat 2 of 3 differs: max_abs 1.5e-05\n"
      "cpu:avx512   FAULTY  (3 reasons)\n"
      "    persistent_mismatch reference:tiny fp32 seed 0 step 3 (blocks<1>.ff&0): max_abs 0.25 \"x\" < 1\n"
      "    nonfinite reference:tiny fp32 seed 1 decode: NaN in 12 pixels\n"
      "    slow: 14.2 s, 1.36x the fastest cpu\n");
  std::ostringstream coloured;
  WriteQualificationSummary(SampleDevices(), TerminalStyle{true, false}, coloured);
  EXPECT_NE(coloured.str().find("\033[1;31mFAULTY\033[0m"), std::string::npos) << coloured.str();
  EXPECT_EQ(QualificationSummary({}), "");
}

TEST(QualificationReportTest, JsonCarriesEveryFieldAndTheWorstVerdictAndRoundTrips) {
  const std::vector<DeviceQualification> devices = SampleDevices();
  const nlohmann::json json = QualificationToJson(devices);
  EXPECT_EQ(json["verdict"], "FAULTY");
  ASSERT_EQ(json["devices"].size(), 3u);
  const nlohmann::json& faulty = json["devices"][2];
  EXPECT_EQ(faulty["device"], "cpu:avx512");
  EXPECT_EQ(faulty["kind"], "cpu");
  EXPECT_EQ(faulty["verdict"], "FAULTY");
  EXPECT_EQ(faulty["cells"], 8);
  EXPECT_EQ(faulty["repeats"], 3);
  EXPECT_EQ(faulty["seconds"], 14.25);
  EXPECT_EQ(faulty["reasons"][1], (nlohmann::json{{"kind", "persistent_mismatch"},
                                                  {"severity", "FAULTY"},
                                                  {"cell", "reference:tiny fp32 seed 0"},
                                                  {"step", 3},
                                                  {"module", "blocks<1>.ff&0"},
                                                  {"detail", "max_abs 0.25 \"x\" < 1"}}));
  StatusOr<std::vector<DeviceQualification>> back = QualificationFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(QualificationToJson(*back), json);
  EXPECT_EQ(QualificationToJson({})["verdict"], "PASS");
  nlohmann::json lying = json;
  lying["verdict"] = "PASS";
  EXPECT_EQ(QualificationFromJson(lying).status().message(),
            "qualification JSON: 'verdict' is \"PASS\", the devices' worst is FAULTY");
  nlohmann::json broken = json;
  broken["devices"][1].erase("repeats");
  EXPECT_EQ(QualificationFromJson(broken).status().message(),
            "qualification JSON: devices[1]: 'repeats' is missing or not an integer");
}

TEST(QualificationReportTest, JunitHasOneTestcasePerDeviceAndFailuresForNonPass) {
  const std::string xml = QualificationJunitXml(SampleDevices(), SampleRun());
  EXPECT_NE(
      xml.find("<testsuites name=\"framegate qualify\" tests=\"3\" failures=\"2\" errors=\"0\" skipped=\"0\" "
               "time=\"35.750000\">"),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("hostname=\"host&lt;a&gt;\""), std::string::npos);
  EXPECT_EQ(Count(xml, "<testcase "), 3u);
  EXPECT_EQ(Count(xml, "<failure "), 2u);
  const std::string pass = Testcase(xml, "cpu:default");
  ASSERT_FALSE(pass.empty());
  EXPECT_EQ(pass.find("<failure"), std::string::npos);
  EXPECT_NE(pass.find("time=\"10.500000\""), std::string::npos);
  const std::string degraded = Testcase(xml, "cpu:avx2");
  EXPECT_NE(degraded.find("<failure message=\"DEGRADED: 1 reason\" type=\"DEGRADED\">transient_mismatch"),
            std::string::npos)
      << degraded;
  const std::string faulty = Testcase(xml, "cpu:avx512");
  EXPECT_NE(faulty.find("<property name=\"verdict\" value=\"FAULTY\"/>"), std::string::npos);
  EXPECT_NE(
      faulty.find("<failure message=\"FAULTY: 3 reasons\" type=\"FAULTY\">persistent_mismatch "
                  "reference:tiny fp32 seed 0 step 3 (blocks&lt;1&gt;.ff&amp;0): max_abs 0.25 &quot;x&quot; "
                  "&lt; 1\nnonfinite"),
      std::string::npos)
      << faulty;
  EXPECT_EQ(faulty.find("blocks<1>"), std::string::npos);
}

TEST(QualificationReportTest, HtmlListsEachDeviceWithItsColouredVerdictAndEscapedReasons) {
  const std::string html = QualificationHtml(SampleDevices(), SampleRun());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(
      html.find("3 devices: <span class=\"verdict\" data-verdict=\"FAULTY\" style=\"background:#c62828\">"
                "FAULTY</span> 1 PASS 1 DEGRADED 1 FAULTY"),
      std::string::npos)
      << html;
  EXPECT_EQ(Count(html, "<tr><td>"), 3u);
  EXPECT_NE(
      html.find("<tr><td>cpu:avx2</td><td>cpu</td><td><span class=\"verdict\" data-verdict=\"DEGRADED\" "
                "style=\"background:#ef6c00\">DEGRADED</span></td><td>8</td><td>3</td><td>11</td>"),
      std::string::npos)
      << html;
  EXPECT_NE(html.find("<li data-severity=\"FAULTY\">persistent_mismatch reference:tiny fp32 seed 0 step 3 "
                      "(blocks&lt;1&gt;.ff&amp;0): max_abs 0.25 &quot;x&quot; &lt; 1</li>"),
            std::string::npos);
  EXPECT_EQ(html.find("blocks<1>"), std::string::npos);
  EXPECT_NE(html.find("<td>host&lt;a&gt;</td>"), std::string::npos);
  // Most severe first: the slow reason comes after both FAULTY ones.
  EXPECT_LT(html.find(">nonfinite "), html.find(">slow: "));
}

}  // namespace
}  // namespace framegate
