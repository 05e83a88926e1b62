// framegate qualify [MATRIX]: hardware qualification (runners/qualification_run.h,
// docs/qualification.md). Every cell of the matrix is replayed step by step on each of
// its devices, --repeats passes each; each device gets PASS, DEGRADED or FAULTY with its
// reasons, printed, stored (a run of the --db store with a qualification row per device)
// and written as --json, --junit and --html. Exit 0 every device PASS, 1 any DEGRADED or
// FAULTY, 2 bad input.
#include <cstdio>
#include <iostream>

#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/build_info.h"
#include "harness/shell_quote.h"
#include "matrix/device_discovery.h"
#include "matrix/matrix_spec.h"
#include "pipelines/sdc_injection.h"
#include "reports/qualification_report.h"
#include "runners/qualification_run.h"
#include "store/result_store.h"

namespace framegate {
namespace {

struct QualifyCliOptions {
  std::string matrix;
  std::string golden_dir;
  std::string db = "framegate.db";
  std::string json_path, junit_path, html_path;
  std::string inject_sdc;
  std::string tags;
  int repeats = 3;
  int threads = 1;
};

// The matrix when none is named: the GPU qualification on a host with a GPU, else this
// CPU's kernel paths.
std::string DefaultMatrix(const std::vector<DeviceInfo>& found) {
  for (const DeviceInfo& d : found) {
    if (d.device.rfind("cuda", 0) == 0) return "qualification";
  }
  return "kernel-paths";
}

int RunQualify(const QualifyCliOptions& o) {
  if (!o.inject_sdc.empty()) {
    StatusOr<SdcSpec> spec = ParseSdcSpec(o.inject_sdc);
    if (!spec.ok()) return ReportError(spec.status());
  }
  const std::vector<DeviceInfo> found = DiscoverDevices();
  StatusOr<MatrixSpec> matrix = LoadMatrix(o.matrix.empty() ? DefaultMatrix(found) : o.matrix, found);
  if (!matrix.ok()) return ReportError(matrix.status());
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(o.db);
  if (!store.ok()) return ReportError(store.status());
  const BuildInfo build = CollectBuildInfo();
  std::vector<std::string> words = {"framegate", "qualify", matrix->source, "--repeats",
                                    std::to_string(o.repeats)};
  if (!o.inject_sdc.empty()) words.insert(words.end(), {"--inject-sdc", o.inject_sdc});
  RunInfo info = NewRunInfo(o.tags.empty() ? "qualify" : "qualify," + o.tags, ShellCommand(words), build);
  info.matrix_path = matrix->source;
  info.matrix_sha256 = matrix->sha256;
  if (Status begun = (*store)->BeginRun(info, found); !begun.ok()) return ReportError(begun);

  QualifyOptions options;
  options.cells = matrix->cells;
  options.golden_dir = o.golden_dir;
  options.repeats = o.repeats;
  options.threads = o.threads;
  options.inject_sdc = o.inject_sdc;
  options.pipeline_executable = PipelineExecutablePath();
  FILE* text = o.json_path == "-" ? stderr : stdout;
  std::fprintf(text, "qualify %s: %zu cells, %d passes each (run %s)\n", matrix->name.c_str(),
               matrix->cells.size(), o.repeats, info.run_id.c_str());
  options.on_progress = [text](const std::string& line) {
    std::fprintf(text, "  %s\n", line.c_str());
    std::fflush(text);
  };
  StatusOr<QualifyOutcome> outcome = RunQualification(options);
  if (!outcome.ok()) {
    (void)(*store)->FinishRun(info.run_id, "interrupted", NowIso8601());
    return ReportError(outcome.status());
  }
  if (Status kept = (*store)->RecordQualification(info.run_id, outcome->devices); !kept.ok())
    return ReportError(kept);
  if (Status done = (*store)->FinishRun(info.run_id, "finished", NowIso8601()); !done.ok())
    return ReportError(done);

  std::fprintf(text, "%s", QualificationSummary(outcome->devices).c_str());
  std::fprintf(text, "qualified in %.1f s; stored as run %s in %s\n", outcome->seconds, info.run_id.c_str(),
               o.db.c_str());
  for (const auto& [path, content] :
       {std::make_pair(o.json_path, QualificationToJson(outcome->devices).dump(2) + "\n"),
        std::make_pair(o.junit_path, QualificationJunitXml(outcome->devices, info)),
        std::make_pair(o.html_path, QualificationHtml(outcome->devices, info))}) {
    if (path.empty()) continue;
    if (Status written = WriteOutputFile(path, content); !written.ok()) return ReportError(written);
  }
  for (const DeviceQualification& d : outcome->devices) {
    if (d.verdict != DeviceVerdict::kPass) return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

Command AddQualifyCommand(CLI::App& parent) {
  auto o = std::make_shared<QualifyCliOptions>();
  CLI::App* app = parent.add_subcommand("qualify", "");
  app->add_option("MATRIX", o->matrix,
                  "Matrix file or shipped name (default: qualification with a GPU, else kernel-paths)");
  AddGoldenDirOption(app, &o->golden_dir);
  app->add_option("--db", o->db, "SQLite results file")->capture_default_str();
  app->add_option("--repeats", o->repeats, "Step-replay passes per cell and device")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  AddOutputFileOption(app, "--json", &o->json_path, "Write the devices' verdicts as JSON");
  AddOutputFileOption(app, "--junit", &o->junit_path, "Write JUnit XML, one test case per device");
  AddOutputFileOption(app, "--html", &o->html_path, "Write an HTML page of the verdicts");
  app->add_option(
      "--inject-sdc", o->inject_sdc,
      "Testing aid: flip bits in op outputs on one device, DEVICE:RATE[:transient|persistent][:BITS] "
      "(docs/qualification.md)");
  app->add_option("--tag", o->tags, "Comma-separated tags of the stored run (besides 'qualify')");
  app->add_option("--threads", o->threads, "LibTorch threads of each cell process")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return {app, [o] { return RunQualify(*o); }};
}

}  // namespace framegate
