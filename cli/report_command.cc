// framegate report RUN_ID: the summary, per-device verdict and reports of a stored run,
// read from the SQLite store. `run` writes the same reports at its end (report_command.h).
// Exit: 0 written, 2 the store or an output could not be read or written.
#include "cli/report_command.h"

#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "cli/command.h"
#include "cli/output_file.h"
#include "golden/golden_format.h"
#include "reports/benchmark_json.h"
#include "reports/html_report.h"
#include "reports/json_report.h"
#include "reports/junit_report.h"
#include "reports/terminal_report.h"

namespace framegate {

void ReportOutputs::AddTo(CLI::App* app) {
  app->add_option("--html", html_dir, "Write the HTML report (frames, plots) into this folder");
  AddOutputFileOption(app, "--junit", &junit_path, "Write JUnit XML (one testcase per cell)");
  AddOutputFileOption(app, "--json", &json_path, "Write the run and its cells as JSON");
  AddOutputFileOption(app, "--bench-json", &bench_json_path,
                      "Write timings as Google Benchmark JSON (for compare.py)");
}

std::ostream& ReportOutputs::Text() const { return TextStream({junit_path, json_path, bench_json_path}); }

int ReportOutputs::TextFd() const { return &Text() == &std::cerr ? STDERR_FILENO : STDOUT_FILENO; }

namespace {

// Golden frames for the HTML report, read from the golden file a cell was judged with
// (without LibTorch: `report` runs in the front executable).
StatusOr<Video> ReadGoldenVideo(const std::string& path) {
  StatusOr<GoldenFrames> g = ReadGoldenFrames(path);
  if (!g.ok()) return g.status();
  return VideoFromFloat32(path, g->shape, g->values.data());
}

}  // namespace

Status WriteReports(const RunRecord& run, ResultStore& store, const ReportOutputs& out,
                    const nlohmann::json& device_verdicts) {
  if (!out.json_path.empty()) {
    nlohmann::json j = RunRecordToJson(run);
    j["run_id"] = run.info.run_id;
    j["device_verdicts"] = device_verdicts;
    FG_RETURN_IF_ERROR(WriteOutputFile(out.json_path, j.dump(2) + "\n"));
  }
  if (!out.junit_path.empty()) FG_RETURN_IF_ERROR(WriteOutputFile(out.junit_path, JunitXml(run)));
  if (!out.bench_json_path.empty()) {
    FG_RETURN_IF_ERROR(WriteOutputFile(out.bench_json_path, BenchmarkJson(run).dump(2) + "\n"));
  }
  if (!out.html_dir.empty()) {
    HtmlReportOptions options;
    options.read_golden = ReadGoldenVideo;
    for (const CellResult& c : run.cells) {
      StatusOr<std::vector<HistoryPoint>> history = store.CellHistory(c.cell.Id(), 20);
      if (!history.ok()) continue;
      for (const HistoryPoint& p : *history) {
        if (p.run_id == run.info.run_id) continue;
        options.history[c.cell.Id()].push_back({p.run_id, p.started_at, p.result});
      }
    }
    FG_RETURN_IF_ERROR(WriteHtmlReport(run, options, out.html_dir));
  }
  return Status::Ok();
}

nlohmann::json DeviceVerdicts(const RunRecord& run, std::ostream& out) {
  std::map<std::string, std::vector<const CellResult*>> failing;
  std::map<std::string, int> cells;
  for (const CellResult& c : run.cells) {
    ++cells[c.cell.device];
    if (IsFailure(c.status)) failing[c.cell.device].push_back(&c);
  }
  nlohmann::json verdicts = nlohmann::json::array();
  out << "\nPer-device verdict:\n";
  for (const auto& [device, n] : cells) {
    std::string name = device;
    for (const DeviceInfo& d : run.devices) {
      if (d.device == device && !d.name.empty()) name = device + " (" + d.name + ")";
    }
    nlohmann::json failed = nlohmann::json::array();
    for (const CellResult* c : failing[device]) {
      failed.push_back({{"cell_id", c->cell.Id()},
                        {"label", c->cell.Label()},
                        {"status", StatusName(c->status)},
                        {"policy", c->cell.policy}});
    }
    const bool qualified = failed.empty();
    out << "  " << name << ": " << (qualified ? "qualified" : "NOT QUALIFIED") << " (" << n << " cells";
    if (!qualified) out << ", " << failed.size() << " failing";
    out << ")\n";
    for (const auto& f : failed) {
      out << "    " << f["status"].get<std::string>() << "  " << f["label"].get<std::string>() << "\n";
    }
    verdicts.push_back(
        {{"device", device}, {"name", name}, {"qualified", qualified}, {"cells", n}, {"failing", failed}});
  }
  return verdicts;
}

namespace {

struct ReportOptions {
  std::string run_id;
  std::string db = "framegate.db";
  ReportOutputs outputs;
};

int RunReport(const ReportOptions& o) {
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(o.db, ResultStore::OpenMode::kExisting);
  if (!store.ok()) return ReportError(store.status());
  std::string run_id = o.run_id;
  if (run_id == "latest") {
    StatusOr<std::vector<RunInfo>> runs = (*store)->ListRuns();
    if (!runs.ok()) return ReportError(runs.status());
    if (runs->empty()) return ReportError(Status::NotFound(o.db + ": no runs"));
    run_id = runs->back().run_id;
  }
  StatusOr<RunRecord> run = (*store)->LoadRun(run_id);
  if (!run.ok()) return ReportError(run.status());
  std::ostream& text = o.outputs.Text();
  WriteTerminalSummary(*run, DetectTerminalStyle(o.outputs.TextFd()), text);
  const nlohmann::json verdicts = DeviceVerdicts(*run, text);
  const Status written = WriteReports(*run, **store, o.outputs, verdicts);
  return written.ok() ? kExitOk : ReportError(written);
}

}  // namespace

Command AddReportCommand(CLI::App& parent) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* app = parent.add_subcommand("report", "Summary and reports of a stored run");
  app->add_option("RUN", o->run_id, "Run id, or 'latest'")->required();
  app->add_option("--db", o->db, "SQLite results file")->capture_default_str();
  o->outputs.AddTo(app);
  return {app, [o] { return RunReport(*o); }};
}

}  // namespace framegate
