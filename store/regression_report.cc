// The JSON and text forms of a RegressionReport (declared in regressions.h).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "store/regressions.h"

namespace framegate {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string Join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// "on NVIDIA L4 only (not on: NVIDIA H100)" / "on all 3 models (A, B, C)" / "on cpu".
std::string Where(const RegressionFinding& f) {
  if (f.clean_models.empty()) {
    if (f.models.size() == 1) return "on " + f.models[0];
    return "on all " + std::to_string(f.models.size()) + " models (" + Join(f.models) + ")";
  }
  const std::string only = f.models.size() == 1 ? " only" : "";
  return "on " + Join(f.models) + only + " (not on: " + Join(f.clean_models) + ")";
}

std::string Change(double before, double after) {
  char text[96];
  if (before != 0) {
    std::snprintf(text, sizeof(text), "%.6g -> %.6g (%+.1f%%)", before, after, 100 * (after / before - 1));
  } else {
    std::snprintf(text, sizeof(text), "%.6g -> %.6g", before, after);
  }
  return text;
}

std::string Detail(const RegressionFinding& f) {
  std::string streak = std::to_string(f.consecutive) + " run" + (f.consecutive == 1 ? "" : "s") +
                       " in a row since " + f.since_run + " (" +
                       (f.since_git_sha.empty() ? "no git sha" : f.since_git_sha) + ", " +
                       f.since_started_at.substr(0, 10) + ")";
  if (f.kind == "failing") {
    return streak + ", now " + f.last_status + (f.last_reason.empty() ? "" : ": " + f.last_reason);
  }
  if (f.kind == "worse" || f.kind == "better") return Change(f.baseline, f.current) + ", " + streak;
  std::string steps;
  for (const StepChange& s : f.steps) {
    steps +=
        (steps.empty() ? "" : ", ") + Change(s.before, s.after) + " at " + s.run_id + " (" + s.git_sha + ")";
  }
  return Change(f.baseline, f.current) + " in " + std::to_string(f.steps.size()) + " steps: " + steps;
}

}  // namespace

nlohmann::json RegressionsToJson(const RegressionReport& report) {
  nlohmann::json findings = nlohmann::json::array();
  for (const RegressionFinding& f : report.findings) {
    nlohmann::json steps = nlohmann::json::array();
    for (const StepChange& s : f.steps) {
      steps.push_back({{"run_id", s.run_id},
                       {"git_sha", s.git_sha},
                       {"before", Number(s.before)},
                       {"after", Number(s.after)}});
    }
    findings.push_back({{"alert", f.alert},
                        {"kind", f.kind},
                        {"track", f.track},
                        {"pending", f.pending},
                        {"family", f.family},
                        {"cell_ids", f.cell_ids},
                        {"models", f.models},
                        {"clean_models", f.clean_models},
                        {"devices", f.devices},
                        {"since_run", f.since_run},
                        {"since_git_sha", f.since_git_sha},
                        {"since_started_at", f.since_started_at},
                        {"consecutive", f.consecutive},
                        {"baseline", Number(f.baseline)},
                        {"current", Number(f.current)},
                        {"last_status", f.last_status},
                        {"last_reason", f.last_reason},
                        {"steps", steps}});
  }
  nlohmann::json flaky = nlohmann::json::array();
  for (const FlakyCell& c : report.flaky) {
    flaky.push_back({{"family", c.family},
                     {"cell_id", c.cell_id},
                     {"model", c.model},
                     {"statuses", c.statuses},
                     {"flips", c.flips}});
  }
  nlohmann::json alerts = nlohmann::json::array();
  for (const SeriesAlert& a : report.alerts) {
    alerts.push_back({{"kind", a.kind},
                      {"change", a.change},
                      {"confirmed", a.confirmed},
                      {"series", {{"cell_id", a.cell_id}, {"model", a.model}, {"family", a.family}}},
                      {"cell_id", a.cell_id},
                      {"track", a.track},
                      {"nights",
                       {{"since_run", a.since_run},
                        {"since_started_at", a.since_started_at},
                        {"since_git_sha", a.since_git_sha},
                        {"last_run", a.last_run},
                        {"count", a.nights}}},
                      {"magnitude",
                       {{"baseline", Number(a.baseline)},
                        {"current", Number(a.current)},
                        {"relative", Number(a.relative)},
                        {"sigmas", Number(a.sigmas)}}},
                      {"confidence", Number(a.confidence)},
                      {"changed", a.changed}});
  }
  return {{"since", report.since},
          {"baseline", report.baseline},
          {"runs", report.runs},
          {"series", report.series},
          {"accepted_series", report.accepted},
          {"regressions", report.regressions()},
          {"alerts", alerts},
          {"findings", findings},
          {"flaky", flaky}};
}

std::string FormatRegressions(const RegressionReport& report) {
  std::ostringstream out;
  out << "regressions since " << report.since << " (baseline " << report.baseline << "): " << report.runs
      << " runs, " << report.series << " series (cell x device model)\n";
  for (const RegressionFinding& f : report.findings) {
    const char* label = f.pending                  ? "pending     "
                        : f.alert == "regression"  ? "REGRESSION  "
                        : f.alert == "environment" ? "environment "
                                                   : "improvement ";
    out << label << f.kind << "  " << f.track << "  " << f.family << "  " << Where(f) << ", " << f.devices
        << " device series: " << Detail(f) << "\n";
  }
  if (!report.flaky.empty()) {
    out << "flaky (status flips without a code change; not counted):\n";
    for (const FlakyCell& c : report.flaky) {
      out << "  " << c.family << "  " << c.cell_id << "  on " << c.model << ": " << c.statuses << " ("
          << c.flips << " flips)\n";
    }
  }
  for (const SeriesAlert& a : report.alerts) {
    if (a.kind != "environment") continue;
    std::string changed;
    for (const std::string& c : a.changed) changed += (changed.empty() ? "" : "; ") + c;
    out << "  environment changed at " << a.since_run << " for " << a.cell_id << " on " << a.model << " ("
        << a.track << "): " << changed << "\n";
  }
  const int regressions = report.regressions();
  size_t pending = 0;
  for (const RegressionFinding& f : report.findings) pending += f.pending;
  out << "verdict: " << (regressions > 0 ? "REGRESSION" : "no regression") << " (" << regressions
      << " regression" << (regressions == 1 ? "" : "s") << ", " << pending << " pending, "
      << report.flaky.size() << " flaky"
      << (report.accepted > 0
              ? ", " + std::to_string(report.accepted) + " series judged from an accepted change"
              : "")
      << ")\n";
  return out.str();
}

}  // namespace framegate
