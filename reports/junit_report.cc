#include "reports/junit_report.h"

#include <cmath>
#include <sstream>

#include "reports/markup.h"
#include "reports/report_files.h"
#include "reports/run_summary.h"

namespace framegate {
namespace {

enum class JunitOutcome { kPassed, kFailure, kError, kSkipped };

JunitOutcome OutcomeOf(CellStatus status) {
  switch (status) {
    case CellStatus::kPass:
      return JunitOutcome::kPassed;
    case CellStatus::kFail:
    case CellStatus::kNonfinite:
    case CellStatus::kBrokenFrames:
    case CellStatus::kXpass:
      return JunitOutcome::kFailure;
    case CellStatus::kError:
    case CellStatus::kCrash:
    case CellStatus::kTimeout:
    case CellStatus::kUnresolved:
      return JunitOutcome::kError;
    case CellStatus::kUnsupported:
    case CellStatus::kXfail:
      return JunitOutcome::kSkipped;
  }
  return JunitOutcome::kError;
}

std::string DotsToUnderscores(std::string text) {
  for (char& c : text) {
    if (c == '.') c = '_';
  }
  return text;
}

// Seconds as JUnit wants them: a plain non-negative decimal.
std::string SecondsText(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "0";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6f", seconds);
  return buffer;
}

void Property(std::ostream& out, const char* indent, const std::string& name, const std::string& value) {
  out << indent << "<property name=\"" << XmlEscape(name) << "\" value=\"" << XmlEscape(value) << "\"/>\n";
}

void RunProperties(const RunRecord& run, std::ostream& out) {
  const RunInfo& i = run.info;
  const char* in = "      ";
  out << "    <properties>\n";
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"run_id", i.run_id},
                                    {"state", i.state},
                                    {"git_sha", i.git_sha},
                                    {"framegate_version", i.framegate_version},
                                    {"libtorch_version", i.libtorch_version},
                                    {"cuda_version", i.cuda_version},
                                    {"blas", i.blas},
                                    {"tags", i.tags},
                                    {"matrix", i.matrix_path},
                                    {"matrix_sha256", i.matrix_sha256},
                                    {"shard", i.shard},
                                    {"command", i.command}}) {
    Property(out, in, name, value);
  }
  for (const DeviceInfo& d : run.devices) Property(out, in, "device." + d.device, d.name);
  out << "    </properties>\n";
}

void CellProperties(const CellResult& r, std::ostream& out) {
  const char* in = "        ";
  out << "      <properties>\n";
  Property(out, in, "cell_id", r.cell.Id());
  Property(out, in, "pipeline", r.cell.Pipeline());
  Property(out, in, "device", r.cell.device);
  Property(out, in, "policy", r.cell.policy);
  Property(out, in, "policy_used", r.policy_used.empty() ? r.cell.policy : r.policy_used);
  Property(out, in, "seed", std::to_string(r.cell.seed));
  Property(out, in, "status", StatusName(r.status));
  for (const NamedMetric& m : ShownMetrics(r)) Property(out, in, m.name, NumberText(m.value));
  Property(out, in, "median_generation_seconds", NumberText(MedianGenerationSeconds(r)));
  Property(out, in, "load_seconds", NumberText(r.timings.load_seconds));
  Property(out, in, "peak_rss_bytes", std::to_string(r.timings.peak_rss_bytes));
  out << "      </properties>\n";
}

// The text inside <failure>/<error>: everything a person needs without the HTML report.
std::string Details(const CellResult& r) {
  std::ostringstream text;
  text << StatusName(r.status) << ": " << r.reason << "\n";
  if (!r.error_class.empty()) text << "error class: " << r.error_class << "\n";
  if (!r.error_module.empty() || !r.error_op.empty()) {
    text << "raised in: " << r.error_module << (r.error_op.empty() ? "" : " (" + r.error_op + ")") << "\n";
  }
  if (r.first_nonfinite.found) {
    text << "first non-finite: step " << r.first_nonfinite.step << " in " << r.first_nonfinite.module
         << (r.first_nonfinite.op.empty() ? "" : " at " + r.first_nonfinite.op) << "\n";
  }
  for (const NamedMetric& m : ShownMetrics(r)) text << m.name << " = " << NumberText(m.value) << "\n";
  if (!r.repro.empty()) text << "repro: " << r.repro << "\n";
  return text.str();
}

void Testcase(const CellResult& r, std::ostream& out) {
  out << "    <testcase classname=\"" << XmlEscape(JunitClassname(r.cell)) << "\" name=\""
      << XmlEscape(JunitTestName(r.cell)) << "\" time=\"" << SecondsText(MedianGenerationSeconds(r))
      << "\">\n";
  CellProperties(r, out);
  const std::string type = StatusName(r.status);
  switch (OutcomeOf(r.status)) {
    case JunitOutcome::kPassed:
      break;
    case JunitOutcome::kFailure:
    case JunitOutcome::kError: {
      const char* tag = OutcomeOf(r.status) == JunitOutcome::kFailure ? "failure" : "error";
      out << "      <" << tag << " message=\"" << XmlEscape(r.reason) << "\" type=\"" << type << "\">"
          << XmlEscape(Details(r)) << "</" << tag << ">\n";
      break;
    }
    case JunitOutcome::kSkipped: {
      std::string message = r.reason;
      if (r.status == CellStatus::kXfail) message = "expected failure (" + r.cell.xfail + "): " + message;
      out << "      <skipped message=\"" << XmlEscape(message) << "\"/>\n";
      break;
    }
  }
  std::string system_out;
  if (!r.repro.empty()) system_out += "repro: " + r.repro + "\n";
  if (!r.artifacts_dir.empty()) system_out += "artifacts: " + r.artifacts_dir + "\n";
  if (!system_out.empty()) out << "      <system-out>" << XmlEscape(system_out) << "</system-out>\n";
  out << "    </testcase>\n";
}

}  // namespace

std::string JunitClassname(const Cell& cell) {
  return DotsToUnderscores(cell.Pipeline()) + "." + DotsToUnderscores(cell.device);
}

std::string JunitTestName(const Cell& cell) {
  std::string name = cell.policy + " seed=" + std::to_string(cell.seed);
  for (const auto& [field, text] : VariantFields(cell)) name += " " + field + "=" + text;
  return name;
}

std::string JunitXml(const RunRecord& run) {
  int failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  for (const CellResult& r : run.cells) {
    const JunitOutcome outcome = OutcomeOf(r.status);
    failures += outcome == JunitOutcome::kFailure;
    errors += outcome == JunitOutcome::kError;
    skipped += outcome == JunitOutcome::kSkipped;
    const double median = MedianGenerationSeconds(r);
    if (median >= 0) seconds += median;
  }
  std::ostringstream counts;
  counts << "tests=\"" << run.cells.size() << "\" failures=\"" << failures << "\" errors=\"" << errors
         << "\" skipped=\"" << skipped << "\" time=\"" << SecondsText(seconds) << "\"";
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"framegate\" " << counts.str() << ">\n"
      << "  <testsuite name=\"framegate " << XmlEscape(run.info.run_id) << "\" " << counts.str()
      << " id=\"0\" package=\"framegate\" hostname=\"" << XmlEscape(run.info.host) << "\" timestamp=\""
      << XmlEscape(run.info.started_at) << "\">\n";
  RunProperties(run, out);
  for (const CellResult& r : run.cells) Testcase(r, out);
  out << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

Status WriteJunitReport(const RunRecord& run, const std::string& path) {
  return WriteFileAtomically(path, JunitXml(run));
}

}  // namespace framegate
