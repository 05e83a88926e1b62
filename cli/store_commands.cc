// The store's subcommands: db (check, migrate), merge, history, compare, regressions. Each takes
// --db PATH (default framegate.db in the working folder). A missing, damaged or newer
// database is a one-line error and exit 2; a regression (compare, regressions) or a merge
// conflict is exit 1. docs/store.md describes them.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/output_file.h"
#include "reports/json_report.h"
#include "store/cell_history.h"
#include "store/db_check.h"
#include "store/qualification_history.h"
#include "store/regression_accept.h"
#include "store/regressions.h"
#include "store/result_store.h"
#include "store/run_compare.h"
#include "store/schema.h"
#include "store/store_merge.h"
#include "store/synthetic_results.h"

namespace framegate {
namespace {

constexpr const char* kDefaultDb = "framegate.db";

void AddDbOption(CLI::App* app, std::string* db) {
  app->add_option("--db", *db, "SQLite results database")->capture_default_str();
}

StatusOr<std::unique_ptr<ResultStore>> OpenExisting(const std::string& path) {
  return ResultStore::Open(path, ResultStore::OpenMode::kExisting);
}

int RunDbCheck(const std::string& path) {
  StatusOr<DbCheckReport> report = CheckDatabase(path);
  if (!report.ok()) return ReportError(report.status());
  std::cout << path << ": integrity ok, schema version " << report->schema_version
            << (report->schema_version < kStoreSchemaVersion
                    ? " (older: `framegate db migrate`, or any other store command, migrates it)"
                    : "")
            << ", journal " << report->journal_mode << "\n";
  for (const auto& [table, rows] : report->table_rows) {
    std::cout << "  " << table << ": " << rows << "\n";
  }
  return kExitOk;
}

// Migrates the file to this framegate's schema in place now, as an explicit step (any
// other command that opens the store would do it first, in one transaction).
int RunDbMigrate(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> file = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  if (!file.ok()) return ReportError(file.status());
  StatusOr<int> before = ReadSchemaVersion(**file);  // not an SQLite file: Corrupt
  if (!before.ok()) return ReportError(before.status());
  file->reset();
  // Open refuses a newer schema and migrates an older one in one transaction.
  StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(path);
  if (!store.ok()) return ReportError(store.status());
  std::cout << path << ": schema version " << *before;
  if (*before == kStoreSchemaVersion) {
    std::cout << ", already current\n";
  } else {
    std::cout << " -> " << kStoreSchemaVersion << "\n";
  }
  return kExitOk;
}

// Test-only (hidden): records synthetic cells one transaction each, printing
// "recorded <cell id>" after each commit, as the runner would; --resume skips the cells
// the run already has. The concurrency and kill tests drive it.
struct TestWriteOptions {
  std::string run_id;
  std::string device = "cpu";
  int cells = 10;
  // Lockstep with a test: before each commit print "committing <cell id>" and wait for a
  // line on stdin, so the test can SIGKILL a writer whose transaction is open.
  bool handshake = false;
  bool finish = false;
};

int RunDbTestWrite(const std::string& path, const TestWriteOptions& o) {
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(path);
  if (!store.ok()) return ReportError(store.status());
  RunInfo info = SyntheticRunInfo(o.run_id, NowIso8601());
  Status begun = (*store)->BeginRun(info, {{o.device, "synthetic", "", 0, ""}});
  if (!begun.ok()) return ReportError(begun);
  StatusOr<std::set<std::string>> done = (*store)->FinishedCellIds(o.run_id);
  if (!done.ok()) return ReportError(done.status());
  std::string cell_id;
  if (o.handshake) {
    (*store)->TEST_SetBeforeCommitHook([&cell_id]() {
      std::cout << "committing " << cell_id << std::endl;
      std::string line;
      std::getline(std::cin, line);
    });
  }
  for (int i = 0; i < o.cells; ++i) {
    const CellResult result = SyntheticCellResult(i, o.device, 1);
    cell_id = result.cell.Id();
    if (done->count(cell_id)) continue;
    Status recorded = (*store)->RecordCell(o.run_id, result);
    if (!recorded.ok()) return ReportError(recorded);
    std::cout << "recorded " << cell_id << std::endl;
  }
  if (!o.finish) return kExitOk;
  Status finished = (*store)->FinishRun(o.run_id, "finished", NowIso8601());
  return finished.ok() ? kExitOk : ReportError(finished);
}

// Test and benchmark only (hidden): records each run.json (`run --json`'s format) through
// the store's write path, as `framegate run` would have: the run, its devices, its cells
// in one transaction, then its final state. bench/alert_quality.py builds its nightly
// histories this way.
int RunDbTestImport(const std::string& path, const std::vector<std::string>& files) {
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(path);
  if (!store.ok()) return ReportError(store.status());
  for (const std::string& file : files) {
    StatusOr<RunRecord> run = ReadJsonReport(file);
    if (!run.ok()) return ReportError(run.status());
    RunInfo begun = run->info;
    begun.state = "running";
    begun.finished_at.clear();
    Status status = (*store)->BeginRun(begun, run->devices);
    if (status.ok()) status = (*store)->RecordCells(run->info.run_id, run->cells);
    if (status.ok() && run->info.state != "running") {
      status = (*store)->FinishRun(run->info.run_id, run->info.state, run->info.finished_at);
    }
    if (!status.ok()) return ReportError(status);
  }
  std::cout << "imported " << files.size() << " run" << (files.size() == 1 ? "" : "s") << "\n";
  return kExitOk;
}

}  // namespace

Command AddDbCommand(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("db", "Inspect the SQLite results database");
  app->require_subcommand(1);
  auto path = std::make_shared<std::string>(kDefaultDb);
  CLI::App* check =
      app->add_subcommand("check",
                          "Integrity, schema (every table, column, index, trigger of its version) and "
                          "references check, then row counts (read-only; a problem: one line, exit 2)");
  AddDbOption(check, path.get());
  CLI::App* migrate = app->add_subcommand(
      "migrate", "Bring the file to this framegate's schema now (else the next write does)");
  AddDbOption(migrate, path.get());
  auto write = std::make_shared<TestWriteOptions>();
  CLI::App* test_write = app->add_subcommand("test-write", "Test only: write synthetic cells");
  test_write->group("");  // hidden from --help
  AddDbOption(test_write, path.get());
  test_write->add_option("--run-id", write->run_id)->required();
  test_write->add_option("--cells", write->cells)->check(CLI::NonNegativeNumber);
  test_write->add_option("--device", write->device);
  test_write->add_flag("--handshake", write->handshake);
  test_write->add_flag("--finish", write->finish);
  auto imports = std::make_shared<std::vector<std::string>>();
  CLI::App* test_import = app->add_subcommand("test-import", "Test only: record run.json files");
  test_import->group("");  // hidden from --help
  AddDbOption(test_import, path.get());
  test_import->add_option("RUN_JSON", *imports, "run.json files (run --json)")->required();
  return {app, [=]() {
            if (test_write->parsed()) return RunDbTestWrite(*path, *write);
            if (test_import->parsed()) return RunDbTestImport(*path, *imports);
            if (migrate->parsed()) return RunDbMigrate(*path);
            return RunDbCheck(*path);
          }};
}

Command AddMergeCommand(CLI::App& parent) {
  CLI::App* app =
      parent.add_subcommand("merge", "Merge shard/fleet databases into OUT (idempotent; conflicts exit 1)");
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  app->add_option("OUT", *out, "Output database (created if missing)")->required();
  app->add_option("IN", *inputs, "Input databases")->required();
  return {app, [=]() {
            StatusOr<MergeCounts> merged = MergeStores(*out, *inputs);
            if (!merged.ok()) return ReportError(merged.status());
            const MergeCounts& counts = *merged;
            for (const std::string& line : counts.conflicts) {
              std::cerr << "framegate: conflict: " << line << "\n";
            }
            std::cout << "merged " << inputs->size() << " database" << (inputs->size() == 1 ? "" : "s")
                      << " into " << *out << ": " << counts.runs_added << " runs added, "
                      << counts.runs_updated << " updated, " << counts.cells_added << " cells added, "
                      << counts.cells_identical << " already present, " << counts.devices_added
                      << " devices, " << counts.goldens_added << " goldens, " << counts.qualifications_added
                      << " qualifications added, " << counts.conflicts.size() << " conflicts\n";
            return counts.conflicts.empty() ? kExitOk : kExitFailed;
          }};
}

namespace {

// `history --qualification --device DEVICE [--json FILE|-]`: every verdict `framegate
// qualify` gave the device, oldest first; exit 0 (also when it was never qualified).
int RunQualificationHistory(const std::string& db, const std::string& device, const std::string& json_path) {
  StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(db);
  if (!store.ok()) return ReportError(store.status());
  StatusOr<std::vector<DeviceVerdictPoint>> points = (*store)->DeviceVerdicts(device);
  if (!points.ok()) return ReportError(points.status());
  if (json_path != "-") std::cout << FormatDeviceVerdicts(device, *points);
  if (json_path.empty()) return kExitOk;
  const Status written = WriteOutputFile(json_path, DeviceVerdictsToJson(device, *points).dump(2) + "\n");
  return written.ok() ? kExitOk : ReportError(written);
}

}  // namespace

Command AddHistoryCommand(CLI::App& parent) {
  CLI::App* app =
      parent.add_subcommand("history",
                            "A cell's status, metrics and timings over runs (by cell id or --filter), "
                            "or a device's qualification verdicts (--qualification --device)");
  struct Options {
    std::string db = kDefaultDb, cell_id, filter;
    int limit = 30, max_cells = 50;
    std::string json_path;  // --json FILE ("-": stdout)
    bool qualification = false;
    std::string device;
  };
  auto o = std::make_shared<Options>();
  AddDbOption(app, &o->db);
  CLI::Option* id = app->add_option("CELL_ID", o->cell_id, "Cell id (16 hex digits)");
  app->add_option("--filter", o->filter, "KEY=GLOB[,KEY=GLOB...], e.g. policy=fp16*,device=cuda:*")
      ->excludes(id);
  app->add_option("--limit", o->limit, "Newest runs shown per cell")->check(CLI::PositiveNumber);
  app->add_option("--max-cells", o->max_cells, "Most cells a filter shows")->check(CLI::PositiveNumber);
  app->add_flag("--qualification", o->qualification,
                "Every verdict `framegate qualify` gave --device, oldest first");
  app->add_option("--device", o->device, "With --qualification: the device (cpu:avx512, cuda:0)");
  AddOutputFileOption(app, "--json", &o->json_path, "Write the history as JSON");
  return {
      app, [=]() {
        if (o->qualification || !o->device.empty()) {
          if (!o->qualification)
            return ReportError(Status::InvalidInput("history: --device needs --qualification"));
          if (o->device.empty())
            return ReportError(Status::InvalidInput("history: --qualification needs --device"));
          if (!o->cell_id.empty() || !o->filter.empty()) {
            return ReportError(Status::InvalidInput("history: --qualification takes no CELL_ID or --filter"));
          }
          return RunQualificationHistory(o->db, o->device, o->json_path);
        }
        if (o->cell_id.empty() == o->filter.empty()) {
          return ReportError(Status::InvalidInput("history: give a CELL_ID or --filter"));
        }
        StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(o->db);
        if (!store.ok()) return ReportError(store.status());
        std::vector<std::string> ids = {o->cell_id};
        if (!o->filter.empty()) {
          StatusOr<std::vector<std::string>> matched = MatchCellIds(**store, o->filter, o->max_cells);
          if (!matched.ok()) return ReportError(matched.status());
          if (matched->empty()) {
            return ReportError(Status::NotFound(o->db + ": no cell matches --filter '" + o->filter + "'"));
          }
          ids = *matched;
        }
        nlohmann::json all = nlohmann::json::array();
        for (const std::string& cell_id : ids) {
          StatusOr<std::vector<HistoryPoint>> points = (*store)->CellHistory(cell_id, o->limit);
          if (!points.ok()) return ReportError(points.status());
          if (points->empty()) {
            return ReportError(Status::NotFound(o->db + ": no cell '" + cell_id + "'"));
          }
          all.push_back(HistoryToJson(cell_id, *points));
          if (o->json_path != "-") std::cout << FormatHistory(cell_id, *points);
        }
        if (o->json_path.empty()) return kExitOk;
        const Status written = WriteOutputFile(o->json_path, nlohmann::json{{"cells", all}}.dump(2) + "\n");
        return written.ok() ? kExitOk : ReportError(written);
      }};
}

Command AddCompareCommand(CLI::App& parent) {
  CLI::App* app =
      parent.add_subcommand("compare",
                            "Compare two runs: newly failing cells, accuracy drift, latency (exit 1 on a "
                            "regression)");
  struct Options {
    std::string db = kDefaultDb, run_a, run_b;
    CompareOptions compare;
    std::string json_path;  // --json FILE ("-": stdout)
  };
  auto o = std::make_shared<Options>();
  AddDbOption(app, &o->db);
  app->add_option("RUN_A", o->run_a, "Baseline run id")->required();
  app->add_option("RUN_B", o->run_b, "Candidate run id")->required();
  app->add_option("--alpha", o->compare.alpha, "Mann-Whitney significance level")
      ->check(CLI::Range(1e-9, 0.5))
      ->capture_default_str();
  app->add_option("--min-effect", o->compare.min_effect,
                  "Smallest relative latency change that counts (0.05 = 5%)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  AddOutputFileOption(app, "--json", &o->json_path, "Write the comparison as JSON");
  return {app, [=]() {
            StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(o->db);
            if (!store.ok()) return ReportError(store.status());
            StatusOr<RunComparison> c = CompareRuns(**store, o->run_a, o->run_b, o->compare);
            if (!c.ok()) return ReportError(c.status());
            if (!o->json_path.empty()) {
              const Status written = WriteOutputFile(o->json_path, ComparisonToJson(*c).dump(2) + "\n");
              if (!written.ok()) return ReportError(written);
            }
            if (o->json_path != "-") std::cout << FormatComparison(*c);
            return c->regressions() > 0 ? kExitFailed : kExitOk;
          }};
}

// `regressions --accept CELL|--all --since RUN --reason TEXT [--by NAME]`: records the
// re-baselining and says so; exit 0.
int RunAccept(const std::string& db, Acceptance a) {
  StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(db);
  if (!store.ok()) return ReportError(store.status());
  if (a.since_run.empty()) return ReportError(Status::InvalidInput(db + ": --accept needs --since RUN"));
  if (a.accepted_by.empty()) {
    const char* user = std::getenv("USER");
    a.accepted_by = user != nullptr ? user : "";
  }
  a.accepted_at = NowIso8601();
  StatusOr<Acceptance> recorded = RecordAcceptance((*store)->db(), a);
  if (!recorded.ok()) return ReportError(recorded.status());
  std::cout << "accepted " << (a.cell_id == kAcceptAllCells ? "every cell" : "cell " + a.cell_id)
            << " from run " << recorded->since_run << " (" << recorded->since_started_at << ") by "
            << (recorded->accepted_by.empty() ? "(unknown)" : recorded->accepted_by) << ": "
            << recorded->reason << "; later nights are judged against that level\n";
  return kExitOk;
}

Command AddRegressionsCommand(CLI::App& parent) {
  CLI::App* app =
      parent.add_subcommand("regressions",
                            "Confirmed regressions, improvements, environment changes and flaky cells "
                            "across the history (exit 1 on a confirmed regression)");
  struct Options {
    std::string db = kDefaultDb;
    RegressionOptions regressions;
    std::string json_path;  // --json FILE ("-": stdout)
    Acceptance accept;
    bool accept_all = false;
  };
  auto o = std::make_shared<Options>();
  AddDbOption(app, &o->db);
  app->add_option("--since", o->regressions.since,
                  "First day of the window, YYYY-MM-DD (default: 14 days before the newest run); with "
                  "--accept: the RUN id the accepted change starts at");
  app->add_option("--baseline", o->regressions.baseline, "last-good, a run id or a tag")
      ->capture_default_str();
  app->add_option("--min-effect", o->regressions.min_effect,
                  "Smallest relative latency change that counts (the series' own noise decides above it)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  app->add_option("--confirm", o->regressions.confirm_values,
                  "Nights a latency or metric change must hold to be confirmed (status: 2 failing in a row)")
      ->check(CLI::Range(1, 30))
      ->capture_default_str();
  app->add_option("--fdr", o->regressions.fdr, "False discovery rate across all series and tracks")
      ->check(CLI::Range(1e-12, 0.5))
      ->capture_default_str();
  app->add_option("--environment-fdr", o->regressions.environment_fdr,
                  "False discovery rate of the changes tested where the environment fingerprint changed")
      ->check(CLI::Range(1e-12, 0.5))
      ->capture_default_str();
  CLI::Option* accept = app->add_option("--accept", o->accept.cell_id,
                                        "Re-baseline: the change of CELL_ID from --since RUN is intended");
  CLI::Option* all =
      app->add_flag("--all", o->accept_all, "With --accept semantics, for every cell")->excludes(accept);
  app->add_option("--reason", o->accept.reason, "Why the change is intended (stored)");
  app->add_option("--by", o->accept.accepted_by, "Who accepts it (default: $USER)");
  AddOutputFileOption(app, "--json", &o->json_path, "Write the regressions as JSON");
  return {app, [=]() {
            if (accept->count() > 0 || all->count() > 0) {
              Acceptance a = o->accept;
              if (o->accept_all) a.cell_id = kAcceptAllCells;
              a.since_run = o->regressions.since;
              return RunAccept(o->db, a);
            }
            StatusOr<std::unique_ptr<ResultStore>> store = OpenExisting(o->db);
            if (!store.ok()) return ReportError(store.status());
            StatusOr<RegressionReport> r = FindRegressions(**store, o->regressions);
            if (!r.ok()) return ReportError(r.status());
            if (!o->json_path.empty()) {
              const Status written = WriteOutputFile(o->json_path, RegressionsToJson(*r).dump(2) + "\n");
              if (!written.ok()) return ReportError(written);
            }
            if (o->json_path != "-") std::cout << FormatRegressions(*r);
            return r->regressions() > 0 ? kExitFailed : kExitOk;
          }};
}

}  // namespace framegate
