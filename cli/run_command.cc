// framegate run: the matrix runner's command line. Parses the flags (with --resume: the
// stored run's, runs.argv), hands the run to the run use case (runners/matrix_run.h:
// expand, begin, record each cell in the SQLite store, finish), and prints progress, the
// summary and a per-device verdict, and writes the reports asked for (report_command.h).
// LibTorch-free: the front executable serves it; its cells run in the pipeline
// executable's `run-cell` processes (run_cell_command.cc).
// Exit: 0 every cell passed (XFAIL and UNSUPPORTED count as passing), 1 a cell failed,
// 2 harness or usage error, 130 interrupted (SIGINT, SIGTERM, SIGHUP; resume with
// --resume RUN_ID).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "checks/verdict.h"
#include "cli/command.h"
#include "cli/command_table.h"
#include "cli/pipeline_options.h"
#include "cli/report_command.h"
#include "harness/build_info.h"
#include "harness/name_rules.h"
#include "harness/shell_quote.h"
#include "matrix/device_discovery.h"
#include "reports/terminal_report.h"
#include "runners/matrix_run.h"
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
  info.fingerprint = RunFingerprintJson(build, DetectCpu());
  info.tags = tags;
  info.command = command;
  return info;
}

namespace {

// `run`'s options and arguments on `app` (also used to parse a stored run's argv again).
void AddRunOptions(CLI::App* app, RunOptions* o) {
  app->add_option("MATRIX", o->matrix, "Matrix file or shipped name: local, smoke, nightly, qualification");
  AddPipelineOptions(app, &o->pipeline);
  AddGoldenDirOption(app, &o->golden_dir);
  app->add_option("--db", o->db, "SQLite results file")->capture_default_str();
  app->add_option("--shard", o->shard, "Run shard i of n (1-based): i/n");
  app->add_option("--tags", o->tags, "Tags of the run: nightly, qualification, ...")
      ->capture_default_str()
      ->check([](const std::string& tags) { return CheckNameList("tag", tags).message(); });
  app->add_option("--timeout", o->timeout, "Seconds per cell (default: the matrix's, else 600)");
  app->add_option("--resume", o->resume,
                  "Finish an interrupted run without redoing its cells, with the options it began with");
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
}

// Options that may differ on a resume: where the store is and which reports to write.
bool MayDifferOnResume(const std::string& name) {
  return name == "--resume" || name == "--db" || name == "--html" || name == "--junit" || name == "--json" ||
         name == "--bench-json";
}

// "--shard 2/2", "MATRIX nightly", "--fallback": an option as given.
std::string GivenText(const CLI::Option& option) {
  if (option.get_expected_max() == 0) return option.get_name();  // a flag
  return option.get_name() + " " + ShellCommand(option.results());
}

// The words after `framegate run` as this process was given them: its argv, from
// /proc/self/cmdline (the front execs the pipeline executable with the same argv).
StatusOr<std::vector<std::string>> GivenRunWords() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string word; std::getline(in, word, '\0');) argv.push_back(word);
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "run") return std::vector<std::string>(argv.begin() + i + 1, argv.end());
  }
  return Status::Internal("cannot read this process's command line (/proc/self/cmdline)");
}

// What --resume restores: the given words, and --golden-dir when its value came from the
// environment or the build (a resume elsewhere judges with the same goldens).
std::vector<std::string> ArgvToStore(std::vector<std::string> words, const CLI::App& app,
                                     const RunOptions& o) {
  if (app.count("--golden-dir") == 0) {
    words.push_back("--golden-dir");
    words.push_back(o.golden_dir);
  }
  return words;
}

// The options of the run `stored` (its argv parsed again) with this command's --db,
// --resume and report outputs. InvalidInput, one line, when an option given here
// conflicts with the stored one or the stored argv no longer parses. A run stored before
// schema 5 has no argv: the given options, with the stored shard and matrix when none is
// given (the runner checks both against the stored run).
Status RestoreStoredRun(const CLI::App& given_app, const RunOptions& given, const RunInfo& stored,
                        RunOptions* restored) {
  *restored = given;
  const std::string where = "--resume " + given.resume + ": ";
  if (stored.argv.empty()) {
    if (restored->shard.empty()) restored->shard = stored.shard;
    if (restored->matrix.empty() && !restored->adhoc) restored->matrix = stored.matrix_path;
    return Status::Ok();
  }
  RunOptions from_store;
  CLI::App root;
  CLI::App* app = root.add_subcommand("run");
  AddRunOptions(app, &from_store);
  std::vector<std::string> words = {"run"};
  words.insert(words.end(), stored.argv.begin(), stored.argv.end());
  std::reverse(words.begin(), words.end());  // CLI11 takes them last first
  try {
    root.parse(words);
  } catch (const CLI::ParseError& e) {
    return Status::InvalidInput(where + "the run's stored options no longer parse: " + e.what());
  }
  for (const CLI::Option* option : given_app.get_options()) {
    const std::string name = option->get_name();
    if (option->count() == 0 || name.empty() || MayDifferOnResume(name)) continue;
    const CLI::Option* before = app->get_option_no_throw(name);
    if (before == nullptr || before->results() != option->results()) {
      const std::string stored_text = before == nullptr || before->count() == 0
                                          ? "the run, which began without " + name
                                          : "the run's " + GivenText(*before);
      return Status::InvalidInput(where + GivenText(*option) + " conflicts with " + stored_text +
                                  " (--resume restores the run's options: give --db and reports only)");
    }
  }
  from_store.db = given.db;
  from_store.resume = given.resume;
  const ReportOutputs& out = given.reports;
  if (given_app.count("--html") > 0) from_store.reports.html_dir = out.html_dir;
  if (given_app.count("--junit") > 0) from_store.reports.junit_path = out.junit_path;
  if (given_app.count("--json") > 0) from_store.reports.json_path = out.json_path;
  if (given_app.count("--bench-json") > 0) from_store.reports.bench_json_path = out.bench_json_path;
  *restored = from_store;
  return Status::Ok();
}

// The request of the run `o` asks for; `words` are the command's own (GivenRunWords).
MatrixRunRequest RequestFor(const RunOptions& o, const CLI::App& app, const std::vector<std::string>& words) {
  MatrixRunRequest request;
  request.matrix = o.matrix.empty() ? "local" : o.matrix;
  request.adhoc = o.adhoc;
  if (o.adhoc) request.adhoc_cells = o.pipeline.ToCells();
  request.found = DiscoverDevices();
  request.shard = o.shard;
  // The runner loads no LibTorch: the BLAS is the one the cell processes report.
  request.new_run = NewRunInfo(o.tags, RunCommandLine(words), StaticBuildInfo());
  request.new_run.argv = ArgvToStore(words, app, o);
  request.resume_run_id = o.resume;
  CellProcessOptions& p = request.process;
  p.framegate_binary = PipelineExecutablePath();
  p.settings.run.golden_dir = o.golden_dir;
  p.settings.run.fp64_ref = o.fp64_ref;
  p.settings.run.probes = o.probes;
  p.settings.threads = o.threads;
  p.settings.deterministic = o.deterministic;
  p.fallback = o.fallback;
  p.isolation = *ParseCellIsolation(o.isolation);
  p.worker_max_cells = o.worker_cells;
  p.worker_max_rss_bytes = o.worker_rss_mib << 20;
  request.repeats = o.repeats;
  request.warmup = o.warmup;
  request.timeout_seconds = o.timeout;
  if (!o.artifacts.empty()) request.artifacts_root = o.artifacts;
  return request;
}

// Prints the stored run's summary, verdicts and reports; returns the run's exit code.
int ReportRun(const MatrixRunOutcome& outcome, ResultStore& store, const ReportOutputs& reports,
              TerminalStyle style) {
  std::ostream& text = reports.Text();
  StatusOr<RunRecord> run = store.LoadRun(outcome.run.run_id);
  if (!run.ok()) return ReportError(run.status());
  WriteTerminalSummary(*run, style, text);
  const nlohmann::json verdicts = DeviceVerdicts(*run, text);
  const Status written = WriteReports(*run, store, reports, verdicts);
  if (!written.ok()) return ReportError(written);
  if (outcome.interrupted) {
    text << "interrupted: " << outcome.cells_run
         << " cells recorded; finish with: " << ResumeCommandLine(outcome.run) << "\n";
    return kExitInterrupted;
  }
  if (outcome.harness_error) return kExitHarnessError;
  for (const CellResult& c : run->cells) {
    if (IsFailure(c.status)) return kExitFailed;
  }
  return kExitOk;
}

int RunMatrix(RunOptions o, const CLI::App& app) {
  StatusOr<std::vector<std::string>> words = GivenRunWords();
  if (!words.ok()) return ReportError(words.status());
  std::unique_ptr<ResultStore> store;
  if (!o.resume.empty()) {  // the run's options are the stored ones
    StatusOr<std::unique_ptr<ResultStore>> opened = ResultStore::Open(o.db, ResultStore::OpenMode::kExisting);
    if (!opened.ok()) return ReportError(opened.status());
    store = std::move(*opened);
    StatusOr<RunInfo> stored = store->LoadRunInfo(o.resume);
    if (!stored.ok()) return ReportError(stored.status());
    const RunOptions given = o;
    const Status restored = RestoreStoredRun(app, given, *stored, &o);
    if (!restored.ok()) return ReportError(restored);
  }
  const MatrixRunRequest request = RequestFor(o, app, *words);
  StatusOr<MatrixRunPlan> plan = PlanMatrixRun(request);  // a bad matrix creates no database
  if (!plan.ok()) return ReportError(plan.status());
  if (!store) {
    StatusOr<std::unique_ptr<ResultStore>> opened = ResultStore::Open(o.db);
    if (!opened.ok()) return ReportError(opened.status());
    store = std::move(*opened);
  }
  std::ostream& text = o.reports.Text();
  const TerminalStyle style = DetectTerminalStyle(o.reports.TextFd());
  std::unique_ptr<ProgressPrinter> progress;
  MatrixRunObservers observers;
  observers.on_begun = [&](const RunInfo& run, int cells) {
    text << "run " << run.run_id << std::endl;
    progress = std::make_unique<ProgressPrinter>(text, cells, style, SteadyNowSeconds);
  };
  observers.on_started = [&](const Cell& c) { progress->CellStarted(c); };
  observers.on_recorded = [&](const CellResult& r) { progress->CellFinished(r); };
  // SIGHUP too: a closed terminal or ssh session interrupts the run as Ctrl-C does.
  for (int stop_signal : {SIGINT, SIGTERM, SIGHUP}) std::signal(stop_signal, OnStopSignal);
  StatusOr<MatrixRunOutcome> outcome = RunMatrixIntoStore(request, *plan, *store, observers, &g_stop);
  if (progress) progress->Finish();
  if (!outcome.ok()) return ReportError(outcome.status());
  return ReportRun(*outcome, *store, o.reports, style);
}

}  // namespace

Command AddRunCommand(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", kRunSummary);
  AddRunOptions(app, o.get());
  return {app, [app, o] { return RunMatrix(*o, *app); }};
}

}  // namespace framegate
