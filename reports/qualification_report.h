// The reports of a hardware qualification (`framegate qualify`, harness/qualification.h):
// the terminal summary, the JSON document, JUnit XML (one test case per device) and a
// standalone HTML page. Input is the devices' verdicts as decided (checks/) or as stored
// (ResultStore::RunQualifications); nothing here decides a verdict. Every string from a
// device, a cell label, a module path or a detail is escaped (reports/markup.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/qualification.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "reports/terminal_report.h"

namespace framegate {

// The most severe verdict of `devices`; kPass when there are none.
DeviceVerdict WorstVerdict(const std::vector<DeviceQualification>& devices);

// One line per device, in the order given: "cpu:avx512  FAULTY  (3 reasons)" (device names
// padded to one width; a PASS without reasons has no count), then each reason indented on
// its own line, most severe first (QualificationReason::Describe). With style.color the
// verdict is green / yellow / bold red.
void WriteQualificationSummary(const std::vector<DeviceQualification>& devices, const TerminalStyle& style,
                               std::ostream& out);
std::string QualificationSummary(const std::vector<DeviceQualification>& devices);  // without colour

// {"devices": [DeviceQualificationToJson...], "verdict": "PASS"|"DEGRADED"|"FAULTY" (the
// worst)}, the devices in the order given.
nlohmann::json QualificationToJson(const std::vector<DeviceQualification>& devices);
// The devices of such a document. InvalidInput naming the device index and the first bad
// key; a "verdict" that is not the worst of the devices is InvalidInput too.
StatusOr<std::vector<DeviceQualification>> QualificationFromJson(const nlohmann::json& json);

// JUnit XML (the junit-10 layout of reports/junit_report.h):
//   <testsuites name="framegate qualify" tests failures errors="0" skipped="0" time>
//     <testsuite name="qualify <run_id>" ... hostname timestamp>
//       <testcase classname="qualify" name="<device>" time="<seconds>">
//         <properties> kind, verdict, cells, repeats </properties>
//         <failure message="<VERDICT>: <n> reasons" type="<VERDICT>"> one reason a line </failure>
// FAULTY and DEGRADED are <failure>; PASS has no child. `run` gives the suite's name,
// host and timestamp (any field may be empty).
std::string QualificationJunitXml(const std::vector<DeviceQualification>& devices, const RunInfo& run);

// A standalone page (inline CSS, no script, no network): the run's id, host, start and
// command, the overall verdict, and a table with one row per device: device, kind, verdict
// (coloured, data-verdict="FAULTY"), cells, repeats, seconds, and its reasons as a list.
std::string QualificationHtml(const std::vector<DeviceQualification>& devices, const RunInfo& run);

// Each writes its document atomically (reports/report_files.h). IoError naming the path.
Status WriteQualificationJson(const std::vector<DeviceQualification>& devices, const std::string& path);
Status WriteQualificationJunit(const std::vector<DeviceQualification>& devices, const RunInfo& run,
                               const std::string& path);
Status WriteQualificationHtml(const std::vector<DeviceQualification>& devices, const RunInfo& run,
                              const std::string& path);

}  // namespace framegate
