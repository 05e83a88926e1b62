// framegate run: the matrix runner. Expands a matrix (or ad-hoc axes), runs every cell
// outside this process (a persistent worker per device, or a process per cell:
// runners/matrix_runner.h), records each finished cell in the SQLite store, prints the
// summary and a per-device verdict, and writes the reports asked for (report_command.h).
// LibTorch-free: the front executable serves it; its cells run in the pipeline
// executable's `run-cell` processes (run_cell_command.cc).
// Exit: 0 every cell passed (XFAIL and UNSUPPORTED count as passing), 1 a cell failed,
// 2 harness or usage error, 130 interrupted (resume with --resume RUN_ID).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "checks/verdict.h"
#include "cli/command.h"
#include "cli/command_table.h"
#include "cli/output_file.h"
#include "cli/pipeline_options.h"
#include "cli/report_command.h"
#include "harness/build_info.h"
#include "harness/cell_result_json.h"
#include "harness/name_rules.h"
#include "harness/sha256.h"
#include "matrix/device_discovery.h"
#include "matrix/matrix_spec.h"
#include "matrix/shard.h"
#include "matrix/unsupported.h"
#include "reports/terminal_report.h"
#include "runners/matrix_runner.h"
#include "store/result_store.h"

namespace framegate {
namespace {

constexpr int kExitInterrupted = 130;
std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop = true; }

struct RunOptions {
  std::string matrix;
  PipelineCliOptions pipeline;
  bool adhoc = false;
  std::string db = "framegate.db";
  std::string golden_dir;
  std::string shard;
  std::string tags = "local";
  std::string resume;
  std::string artifacts;
  double timeout = 0;
  int repeats = 0, warmup = -1, threads = 0;
  bool fallback = false, deterministic = false, fp64_ref = false, probes = false;
  std::string isolation = "worker";
  int worker_cells = 100;
  int64_t worker_rss_mib = 8192;
  ReportOutputs reports;
};

std::string NewRunId() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  std::random_device rd;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", rd());
  return std::string(stamp) + "-" + hex;
}

std::string Hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

RunInfo NewRunInfo(const std::string& tags, const std::string& command, const BuildInfo& build) {
  RunInfo info;
  info.run_id = NewRunId();
  info.started_at = NowIso8601();
  info.host = Hostname();
  info.git_sha = build.git_sha;
  info.framegate_version = build.framegate_version;
  info.libtorch_version = build.libtorch_version;
  info.blas = build.blas;
  info.tags = tags;
  info.command = command;
  return info;
}

namespace {

RunInfo MakeRunInfo(const RunOptions& o, const MatrixSpec& spec, const std::string& command) {
  // The runner loads no LibTorch: the BLAS is the one the cell processes report.
  RunInfo info = NewRunInfo(o.tags, command, StaticBuildInfo());
  if (!o.resume.empty()) info.run_id = o.resume;
  info.matrix_path = o.adhoc ? "" : spec.source;
  info.matrix_sha256 = spec.sha256;
  info.shard = o.shard;
  return info;
}

StatusOr<MatrixSpec> CellsToRun(const RunOptions& o, const std::vector<DeviceInfo>& found) {
  if (!o.adhoc) return LoadMatrix(o.matrix.empty() ? "local" : o.matrix, found);
  MatrixSpec spec;
  spec.source = "(ad-hoc axes)";
  spec.name = "ad-hoc";
  spec.cells = o.pipeline.ToCells();
  for (const Cell& c : spec.cells) {
    FG_RETURN_IF_ERROR(CheckCellNames(c));  // unknown names are usage errors
  }
  return spec;
}

int RunMatrix(const RunOptions& o, const std::string& command) {
  const std::vector<DeviceInfo> found = DiscoverDevices();
  StatusOr<MatrixSpec> spec = CellsToRun(o, found);
  if (!spec.ok()) return ReportError(spec.status());
  std::vector<Cell> cells = spec->cells;
  if (!o.shard.empty()) {
    StatusOr<ShardSpec> shard = ParseShard(o.shard);
    if (!shard.ok()) return ReportError(shard.status());
    cells = ShardCells(cells, shard->index, shard->count);
  }
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(o.db);
  if (!store.ok()) return ReportError(store.status());
  RunInfo info = MakeRunInfo(o, *spec, command);
  std::set<std::string> done;
  if (!o.resume.empty()) {
    StatusOr<RunInfo> earlier = (*store)->LoadRunInfo(o.resume);
    if (!earlier.ok()) return ReportError(earlier.status());
    info = *earlier;
    info.state = "running";
    StatusOr<std::set<std::string>> ids = (*store)->FinishedCellIds(o.resume);
    if (!ids.ok()) return ReportError(ids.status());
    done = *ids;
  }
  std::vector<DeviceInfo> used;
  for (const DeviceInfo& d : found) {
    for (const Cell& c : cells) {
      if (c.device == d.device) {
        used.push_back(d);
        break;
      }
    }
  }
  Status begun = (*store)->BeginRun(info, used);
  if (!begun.ok()) return ReportError(begun);
  std::ostream& text = o.reports.Text();
  text << "run " << info.run_id << std::endl;

  const TerminalStyle style = DetectTerminalStyle(o.reports.TextFd());
  ProgressPrinter progress(text, static_cast<int>(cells.size()), style, SteadyNowSeconds);
  const auto record = [&](const CellResult& r) -> Status {
    FG_RETURN_IF_ERROR((*store)->RecordCell(info.run_id, r));
    progress.CellFinished(r);
    return Status::Ok();
  };
  std::vector<Cell> to_run;
  for (const Cell& c : cells) {
    if (done.count(c.Id())) continue;
    const StatusOr<std::string> reason = UnsupportedReason(c, found);  // resolved at load: ok
    if (!reason.ok()) return ReportError(reason.status());
    const std::string& unsupported = reason.value();
    if (unsupported.empty()) {
      to_run.push_back(c);
      continue;
    }
    VerdictInputs in;
    in.run = RunEnd::kUnsupported;
    in.unsupported = unsupported;
    in.expected_to_fail = c.expected_to_fail();
    CellResult r = JudgedResult(c, DecideVerdict(in));
    r.repro = CheckCommandFor(c, o.golden_dir);
    const Status s = record(r);
    if (!s.ok()) return ReportError(s);
  }
  CellProcessOptions p;
  p.framegate_binary = PipelineExecutablePath();
  CellRunOptions& cell = p.settings.run;
  cell.golden_dir = o.golden_dir;
  cell.artifacts_dir =
      o.artifacts.empty() ? "framegate-artifacts/" + info.run_id : o.artifacts + "/" + info.run_id;
  cell.repeats = o.repeats > 0 ? o.repeats : spec->repeats;
  cell.warmup = o.warmup >= 0 ? o.warmup : spec->warmup;
  cell.fp64_ref = o.fp64_ref;
  cell.probes = o.probes;
  p.settings.threads = o.threads;
  p.settings.deterministic = o.deterministic;
  p.timeout_seconds = o.timeout > 0 ? o.timeout : (spec->timeout_seconds > 0 ? spec->timeout_seconds : 600);
  p.fallback = o.fallback;
  p.isolation = *ParseCellIsolation(o.isolation);
  p.worker_max_cells = o.worker_cells;
  p.worker_max_rss_bytes = o.worker_rss_mib << 20;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  StatusOr<MatrixRunSummary> summary = RunCells(
      to_run, p, [&](const Cell& c) { progress.CellStarted(c); }, record, &g_stop);
  progress.Finish();
  if (summary.ok() && !summary->blas.empty()) {
    const Status blas = (*store)->RecordRunBlas(info.run_id, summary->blas);
    if (!blas.ok()) return ReportError(blas);
  }
  if (!summary.ok()) {
    (*store)->FinishRun(info.run_id, "interrupted", NowIso8601());
    return ReportError(summary.status());
  }
  const bool interrupted = summary->interrupted;
  Status finished = (*store)->FinishRun(info.run_id, interrupted ? "interrupted" : "finished", NowIso8601());
  if (!finished.ok()) return ReportError(finished);
  StatusOr<RunRecord> run = (*store)->LoadRun(info.run_id);
  if (!run.ok()) return ReportError(run.status());
  WriteTerminalSummary(*run, style, text);
  const nlohmann::json verdicts = DeviceVerdicts(*run, text);
  const Status written = WriteReports(*run, **store, o.reports, verdicts);
  if (!written.ok()) return ReportError(written);
  if (interrupted) {
    text << "interrupted: " << summary->finished << " cells recorded; finish with: " << command
         << " --resume " << info.run_id << "\n";
    return kExitInterrupted;
  }
  if (summary->harness_error) return kExitHarnessError;
  for (const CellResult& c : run->cells) {
    if (IsFailure(c.status)) return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

Command AddRunCommand(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", kRunSummary);
  app->add_option("MATRIX", o->matrix, "Matrix file or shipped name: local, smoke, nightly, qualification");
  AddPipelineOptions(app, &o->pipeline);
  AddGoldenDirOption(app, &o->golden_dir);
  app->add_option("--db", o->db, "SQLite results file")->capture_default_str();
  app->add_option("--shard", o->shard, "Run shard i of n (1-based): i/n");
  app->add_option("--tags", o->tags, "Tags of the run: nightly, qualification, ...")
      ->capture_default_str()
      ->check([](const std::string& tags) { return CheckNameList("tag", tags).message(); });
  app->add_option("--timeout", o->timeout, "Seconds per cell (default: the matrix's, else 600)");
  app->add_option("--resume", o->resume, "Finish an interrupted run without redoing its cells");
  app->add_option("--artifacts", o->artifacts, "Folder for the cells' frames (default: framegate-artifacts)");
  app->add_option("--repeats", o->repeats, "Timed runs per cell (default: the matrix's)");
  app->add_option("--warmup", o->warmup, "Untimed runs per cell (default: the matrix's)");
  app->add_flag("--fallback", o->fallback, "Retry NONFINITE/BROKEN_FRAMES cells with the next safer policy");
  app->add_flag("--deterministic", o->deterministic,
                "Deterministic algorithms, TF32 off (cuBLAS workspace: set CUBLAS_WORKSPACE_CONFIG)");
  app->add_flag("--fp64-ref", o->fp64_ref,
                "Also run each cell's config in FP64 on the CPU: fp64_error_ratio");
  app->add_flag("--probes", o->probes, "Record each module's range and headroom to overflow");
  app->add_option("--isolation", o->isolation,
                  "worker: a persistent process per device runs cell after cell, replaced after "
                  "a crash or hang; process: a new process per cell")
      ->check(CLI::IsMember({"worker", "process"}))
      ->capture_default_str();
  app->add_option("--worker-cells", o->worker_cells, "Replace a worker after this many cells (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--worker-rss-mib", o->worker_rss_mib,
                  "Replace a worker once its resident memory passes this many MiB (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddThreadsOption(app, &o->threads);
  o->reports.AddTo(app);
  app->callback([app, o] {
    const bool axes = app->count("--size") + app->count("--model") + app->count("--policy") +
                          app->count("--fault") + app->count("--seed") >
                      0;
    o->adhoc = o->matrix.empty() && axes;
    if (!o->matrix.empty() && axes) {
      throw CLI::ValidationError("MATRIX", "give a matrix or ad-hoc axes, not both");
    }
  });
  return {app, [o] {
            std::string line = "framegate run";
            if (!o->matrix.empty()) line += " " + o->matrix;
            if (o->adhoc) {
              const Cell c = o->pipeline.ToCells().front();
              line += (c.model_dir.empty() ? " --size " + c.size : " --model " + c.model_dir) + " --policy " +
                      o->pipeline.policy + " --seed " + std::to_string(c.seed);
              if (!c.fault.empty()) line += " --fault " + c.fault;
            }
            line += " --db " + o->db;
            return RunMatrix(*o, line);
          }};
}

}  // namespace framegate
