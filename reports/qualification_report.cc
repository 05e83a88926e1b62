#include "reports/qualification_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/qualification_json.h"
#include "reports/markup.h"
#include "reports/report_files.h"

namespace framegate {
namespace {

constexpr DeviceVerdict kVerdicts[] = {DeviceVerdict::kPass, DeviceVerdict::kDegraded,
                                       DeviceVerdict::kFaulty};

// The reasons, most severe first; equal severities keep their order.
std::vector<QualificationReason> MostSevereFirst(std::vector<QualificationReason> reasons) {
  std::stable_sort(reasons.begin(), reasons.end(),
                   [](const QualificationReason& a, const QualificationReason& b) {
                     return static_cast<int>(a.severity) > static_cast<int>(b.severity);
                   });
  return reasons;
}

std::string ReasonCount(size_t n) { return std::to_string(n) + (n == 1 ? " reason" : " reasons"); }

const char* AnsiColour(DeviceVerdict verdict) {
  switch (verdict) {
    case DeviceVerdict::kPass:
      return "\033[32m";  // green
    case DeviceVerdict::kDegraded:
      return "\033[33m";  // yellow
    case DeviceVerdict::kFaulty:
      return "\033[1;31m";  // bold red
  }
  return "";
}

const char* HtmlColour(DeviceVerdict verdict) {
  switch (verdict) {
    case DeviceVerdict::kPass:
      return "#2e7d32";
    case DeviceVerdict::kDegraded:
      return "#ef6c00";
    case DeviceVerdict::kFaulty:
      return "#c62828";
  }
  return "#212121";
}

// Seconds as JUnit wants them: a plain non-negative decimal.
std::string SecondsText(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "0";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6f", seconds);
  return buffer;
}

std::string Badge(DeviceVerdict verdict) {
  return std::string("<span class=\"verdict\" data-verdict=\"") + DeviceVerdictName(verdict) +
         "\" style=\"background:" + HtmlColour(verdict) + "\">" + DeviceVerdictName(verdict) + "</span>";
}

constexpr const char* kCss = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#212121}
h1{font-size:1.4em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eee}
.verdict{display:inline-block;color:#fff;padding:1px 6px;border-radius:3px;font-weight:600}
ul.reasons{margin:0;padding-left:1.2em}
ul.reasons li{font-family:ui-monospace,monospace;font-size:.9em}
)";

}  // namespace

DeviceVerdict WorstVerdict(const std::vector<DeviceQualification>& devices) {
  DeviceVerdict worst = DeviceVerdict::kPass;
  for (const DeviceQualification& d : devices) {
    if (static_cast<int>(d.verdict) > static_cast<int>(worst)) worst = d.verdict;
  }
  return worst;
}

void WriteQualificationSummary(const std::vector<DeviceQualification>& devices, const TerminalStyle& style,
                               std::ostream& out) {
  size_t width = 0;
  for (const DeviceQualification& d : devices) width = std::max(width, d.device.size());
  for (const DeviceQualification& d : devices) {
    out << d.device << std::string(width - d.device.size() + 2, ' ');
    if (style.color) {
      out << AnsiColour(d.verdict) << DeviceVerdictName(d.verdict) << "\033[0m";
    } else {
      out << DeviceVerdictName(d.verdict);
    }
    if (!d.reasons.empty()) out << "  (" << ReasonCount(d.reasons.size()) << ")";
    out << "\n";
    for (const QualificationReason& r : MostSevereFirst(d.reasons)) out << "    " << r.Describe() << "\n";
  }
}

std::string QualificationSummary(const std::vector<DeviceQualification>& devices) {
  std::ostringstream out;
  WriteQualificationSummary(devices, TerminalStyle{}, out);
  return out.str();
}

nlohmann::json QualificationToJson(const std::vector<DeviceQualification>& devices) {
  nlohmann::json list = nlohmann::json::array();
  for (const DeviceQualification& d : devices) list.push_back(DeviceQualificationToJson(d));
  return {{"devices", list}, {"verdict", DeviceVerdictName(WorstVerdict(devices))}};
}

StatusOr<std::vector<DeviceQualification>> QualificationFromJson(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("devices") || !json["devices"].is_array()) {
    return Status::InvalidInput("qualification JSON: 'devices' is missing or not an array");
  }
  std::vector<DeviceQualification> devices;
  for (size_t i = 0; i < json["devices"].size(); ++i) {
    StatusOr<DeviceQualification> device = DeviceQualificationFromJson(json["devices"][i]);
    if (!device.ok())
      return device.status().WithContext("qualification JSON: devices[" + std::to_string(i) + "]");
    devices.push_back(std::move(*device));
  }
  const std::string worst = DeviceVerdictName(WorstVerdict(devices));
  if (!json.contains("verdict") || json["verdict"] != worst) {
    return Status::InvalidInput("qualification JSON: 'verdict' is " +
                                (json.contains("verdict") ? json["verdict"].dump() : std::string("missing")) +
                                ", the devices' worst is " + worst);
  }
  return devices;
}

std::string QualificationJunitXml(const std::vector<DeviceQualification>& devices, const RunInfo& run) {
  int failures = 0;
  double seconds = 0;
  for (const DeviceQualification& d : devices) {
    failures += d.verdict != DeviceVerdict::kPass;
    if (d.seconds >= 0 && !std::isinf(d.seconds)) seconds += d.seconds;
  }
  std::ostringstream counts;
  counts << "tests=\"" << devices.size() << "\" failures=\"" << failures
         << "\" errors=\"0\" skipped=\"0\" time=\"" << SecondsText(seconds) << "\"";
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"framegate qualify\" " << counts.str() << ">\n"
      << "  <testsuite name=\"qualify " << XmlEscape(run.run_id) << "\" " << counts.str()
      << " id=\"0\" package=\"framegate\" hostname=\"" << XmlEscape(run.host) << "\" timestamp=\""
      << XmlEscape(run.started_at) << "\">\n";
  for (const DeviceQualification& d : devices) {
    out << "    <testcase classname=\"qualify\" name=\"" << XmlEscape(d.device) << "\" time=\""
        << SecondsText(d.seconds) << "\">\n"
        << "      <properties>\n";
    for (const auto& [name, value] : {std::pair<const char*, std::string>{"kind", d.kind},
                                      {"verdict", DeviceVerdictName(d.verdict)},
                                      {"cells", std::to_string(d.cells)},
                                      {"repeats", std::to_string(d.repeats)}}) {
      out << "        <property name=\"" << name << "\" value=\"" << XmlEscape(value) << "\"/>\n";
    }
    out << "      </properties>\n";
    if (d.verdict != DeviceVerdict::kPass) {
      std::string text;
      for (const QualificationReason& r : MostSevereFirst(d.reasons)) text += r.Describe() + "\n";
      out << "      <failure message=\"" << DeviceVerdictName(d.verdict) << ": "
          << ReasonCount(d.reasons.size()) << "\" type=\"" << DeviceVerdictName(d.verdict) << "\">"
          << XmlEscape(text) << "</failure>\n";
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

std::string QualificationHtml(const std::vector<DeviceQualification>& devices, const RunInfo& run) {
  const std::string title = "framegate qualify " + run.run_id;
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << HtmlEscape(title)
      << "</title><style>" << kCss << "</style></head><body>\n"
      << "<h1>" << HtmlEscape(title) << "</h1>\n<p class=\"overall\">" << devices.size()
      << (devices.size() == 1 ? " device: " : " devices: ") << Badge(WorstVerdict(devices));
  for (DeviceVerdict v : kVerdicts) {
    const auto n = std::count_if(devices.begin(), devices.end(),
                                 [&](const DeviceQualification& d) { return d.verdict == v; });
    out << " " << n << " " << DeviceVerdictName(v);
  }
  out << "</p>\n<table class=\"provenance\">";
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"run", run.run_id},
                                    {"started", run.started_at},
                                    {"host", run.host},
                                    {"git sha", run.git_sha},
                                    {"command", run.command}}) {
    if (!value.empty()) out << "<tr><th>" << name << "</th><td>" << HtmlEscape(value) << "</td></tr>";
  }
  out << "</table>\n<table class=\"devices\"><tr><th>device</th><th>kind</th><th>verdict</th><th>cells</th>"
         "<th>repeats</th><th>seconds</th><th>reasons</th></tr>\n";
  for (const DeviceQualification& d : devices) {
    out << "<tr><td>" << HtmlEscape(d.device) << "</td><td>" << HtmlEscape(d.kind) << "</td><td>"
        << Badge(d.verdict) << "</td><td>" << d.cells << "</td><td>" << d.repeats << "</td><td>"
        << NumberText(d.seconds) << "</td><td>";
    if (!d.reasons.empty()) {
      out << "<ul class=\"reasons\">";
      for (const QualificationReason& r : MostSevereFirst(d.reasons)) {
        out << "<li data-severity=\"" << DeviceVerdictName(r.severity) << "\">" << HtmlEscape(r.Describe())
            << "</li>";
      }
      out << "</ul>";
    }
    out << "</td></tr>\n";
  }
  out << "</table>\n</body></html>\n";
  return out.str();
}

Status WriteQualificationJson(const std::vector<DeviceQualification>& devices, const std::string& path) {
  return WriteFileAtomically(path, QualificationToJson(devices).dump(2) + "\n");
}

Status WriteQualificationJunit(const std::vector<DeviceQualification>& devices, const RunInfo& run,
                               const std::string& path) {
  return WriteFileAtomically(path, QualificationJunitXml(devices, run));
}

Status WriteQualificationHtml(const std::vector<DeviceQualification>& devices, const RunInfo& run,
                              const std::string& path) {
  return WriteFileAtomically(path, QualificationHtml(devices, run));
}

}  // namespace framegate
