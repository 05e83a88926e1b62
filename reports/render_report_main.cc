// framegate_render_report: test-only. Reads a run JSON (reports/json_report.h) and writes
// the reports the flags ask for; `framegate report` and `framegate run` call the same
// generators. Golden frames are read from .npy files (the real golden reader lives in
// the framegate binary). Exit 0 on success, 2 with one "error:" line otherwise.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "harness/cell_result_json.h"
#include "reports/benchmark_json.h"
#include "reports/html_report.h"
#include "reports/json_report.h"
#include "reports/junit_report.h"
#include "reports/qualification_report.h"
#include "reports/terminal_report.h"

namespace framegate {
namespace {

StatusOr<Video> ReadNpyGolden(const std::string& path) {
  if (path.size() < 4 || path.substr(path.size() - 4) != ".npy") {
    return Status::Unsupported(path + ": this tool reads .npy goldens only");
  }
  return ReadVideoNpy(path);
}

// History file: {"<cell_id>": [{"run_id": .., "date": .., "cell": <cell JSON>}, ...]}.
Status ReadHistory(const std::string& path, std::map<std::string, std::vector<CellHistoryPoint>>* history) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& [cell_id, points] : j.items()) {
      for (size_t i = 0; i < points.size(); ++i) {
        StatusOr<CellResult> cell = CellResultFromJson(points[i].at("cell"));
        if (!cell.ok()) {
          return Status::InvalidInput(path + ": " + cell_id + "[" + std::to_string(i) +
                                      "]: " + cell.status().message());
        }
        (*history)[cell_id].push_back({points[i].at("run_id").get<std::string>(),
                                       points[i].at("date").get<std::string>(), cell.value()});
      }
    }
  } catch (const std::exception& e) {
    return Status::InvalidInput(path + ": " + e.what());
  }
  return Status::Ok();
}

// Qualification file: the document of QualificationToJson ({"devices": [...], "verdict"}).
StatusOr<std::vector<DeviceQualification>> ReadQualification(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open");
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Status::InvalidInput(path + ": not JSON");
  StatusOr<std::vector<DeviceQualification>> devices = QualificationFromJson(json);
  if (!devices.ok()) return devices.status().WithContext(path);
  return devices;
}

int Fail(const Status& status) {
  std::cerr << "framegate_render_report: error: " << status.message() << "\n";
  return 2;
}

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  using namespace framegate;
  CLI::App app{"Renders the reports of a framegate run JSON (test tool)."};
  std::string run_json, html_dir, junit_path, bench_path, json_path, history_path;
  std::string qualification_path, qualification_html, qualification_junit;
  bool summary = false;
  app.add_option("RUN_JSON", run_json, "run JSON (framegate run --json)")->required();
  app.add_option("--html", html_dir, "write the HTML report into this folder");
  app.add_option("--junit", junit_path, "write JUnit XML here");
  app.add_option("--bench-json", bench_path, "write Google Benchmark JSON here");
  app.add_option("--json", json_path, "write the run JSON again here");
  app.add_option("--history", history_path, "cell history JSON for the HTML trend plots");
  app.add_flag("--summary", summary, "print the terminal summary");
  app.add_option("--qualification", qualification_path, "qualification JSON (qualify --json) to render");
  app.add_option("--qualification-html", qualification_html, "write its HTML page here (RUN_JSON: the run)");
  app.add_option("--qualification-junit", qualification_junit, "write its JUnit XML here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "framegate_render_report: error: " << e.what() << "\n";
    return 2;
  }
  StatusOr<RunRecord> run = ReadJsonReport(run_json);
  if (!run.ok()) return Fail(run.status());
  if (!html_dir.empty()) {
    HtmlReportOptions options;
    options.read_golden = ReadNpyGolden;
    if (!history_path.empty()) {
      const Status status = ReadHistory(history_path, &options.history);
      if (!status.ok()) return Fail(status);
    }
    const Status status = WriteHtmlReport(run.value(), options, html_dir);
    if (!status.ok()) return Fail(status);
  }
  if (!junit_path.empty()) {
    const Status status = WriteJunitReport(run.value(), junit_path);
    if (!status.ok()) return Fail(status);
  }
  if (!bench_path.empty()) {
    const Status status = WriteBenchmarkJson(run.value(), bench_path);
    if (!status.ok()) return Fail(status);
  }
  if (!json_path.empty()) {
    const Status status = WriteJsonReport(run.value(), json_path);
    if (!status.ok()) return Fail(status);
  }
  if (summary) WriteTerminalSummary(run.value(), DetectTerminalStyle(1), std::cout);
  if (!qualification_path.empty()) {
    StatusOr<std::vector<DeviceQualification>> devices = ReadQualification(qualification_path);
    if (!devices.ok()) return Fail(devices.status());
    Status status = Status::Ok();
    if (!qualification_html.empty()) status = WriteQualificationHtml(*devices, run->info, qualification_html);
    if (status.ok() && !qualification_junit.empty()) {
      status = WriteQualificationJunit(*devices, run->info, qualification_junit);
    }
    if (!status.ok()) return Fail(status);
    if (summary) WriteQualificationSummary(*devices, DetectTerminalStyle(1), std::cout);
  }
  return 0;
}
