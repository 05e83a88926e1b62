// The run as JUnit XML, for CI systems (Jenkins, GitLab, GitHub test reporters). The
// layout follows the Ant/Jenkins "junit-10" schema; tests/data/junit.xsd is the schema
// it is validated against.
//   <testsuites name="framegate" tests failures errors skipped time>
//     <testsuite name="framegate <run_id>" ... hostname timestamp>   one per run
//       <properties> run provenance </properties>
//       <testcase classname="<pipeline>.<device>" name="<policy> seed=<N>[ fault=..]"
//                 time="<median generation seconds>">
//         <properties> device, policy, policy_used, status, cell_id, metrics </properties>
//         <failure|error|skipped message="<reason>" type="<STATUS>">details</...>
//         <system-out> the repro command, artifacts </system-out>
// Status mapping: failure = FAIL, NONFINITE, BROKEN_FRAMES, XPASS; error = ERROR, CRASH,
// TIMEOUT, UNRESOLVED; skipped = UNSUPPORTED, XFAIL; PASS has no child.
// classname keeps ':' ("reference:tiny.cuda:0"); a '.' inside the pipeline or device
// name becomes '_' so the one '.' separates them (Jenkins reads it as package.class).
#pragma once

#include <string>

#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

std::string JunitClassname(const Cell& cell);  // "reference:tiny.cpu"
std::string JunitTestName(const Cell& cell);   // "fp16 seed=0", "fp16 seed=0 fault=f2"

std::string JunitXml(const RunRecord& run);
// Writes JunitXml atomically. IoError naming the path.
Status WriteJunitReport(const RunRecord& run, const std::string& path);

}  // namespace framegate
