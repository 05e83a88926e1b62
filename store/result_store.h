// ResultStore: the SQLite results store (one file, schema in docs/store.md). The runner
// writes through it, the reports and the store commands read through it.
//
//   StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open("framegate.db");
//   store->BeginRun(info, devices);
//   for (...) store->RecordCell(info.run_id, result);  // one transaction per cell
//   store->FinishRun(info.run_id, "finished", NowIso8601());
//
// Durability: WAL journal, synchronous=NORMAL. A process killed at any point (SIGKILL)
// loses at most the cell whose transaction had not committed; the file stays consistent.
// Concurrency: any number of processes may open and write one file at once; a writer
// waits for the others (busy timeout 30 s, then whole-transaction retries) instead of
// failing with "database is locked". One ResultStore per thread.
// Errors: every call returns a Status whose message names the file. Open() gives
// kCorrupt for a file that is not a framegate database or has a negative schema version,
// kUnsupported for one written by a newer framegate (schema version above
// kStoreSchemaVersion), and in the writable modes kCorrupt for a damaged schema (a table,
// column, index, constraint or trigger of its version missing: store/schema_check.h);
// none of them is modified.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/cell_result.h"
#include "harness/qualification.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

class CellRowWriter;

// A golden file the runs compared against, with where it came from.
struct GoldenRecord {
  std::string path;
  std::string sha256;
  std::string config;      // the GoldenKey canonical string
  std::string provenance;  // JSON object (versions, device, command, created_at)
};

// One point of a cell's history: the cell's result in one run, with the run's facts.
// Everything but the probes is loaded (LoadRun has those).
struct HistoryPoint {
  std::string run_id;
  std::string started_at;
  std::string git_sha;
  std::string host;
  std::string tags;
  std::string device_name;  // the device's model from the run's devices, "" if unknown
  CellResult result;        // the result, without probes
  double latency_median_s;  // NaN without timing repeats
};

// One qualification verdict of a device, with the run that gave it (DeviceVerdicts).
struct DeviceVerdictPoint {
  std::string run_id;
  std::string started_at;   // the run's
  std::string git_sha;      // the run's
  std::string host;         // the run's: "cuda:0" names a device only together with its host
  std::string recorded_at;  // when RecordQualification stored it (ISO 8601 UTC)
  DeviceQualification qualification;
};

class ResultStore {
 public:
  enum class OpenMode {
    kCreate,    // create the file when missing
    kExisting,  // NotFound when missing (read commands: a mistyped path creates nothing)
    // Read-only: never writes the file. A file at an older schema version is copied into
    // memory and migrated there (merge reads shard files this way).
    kReadOnly,
  };
  // Opens, creates or migrates to kStoreSchemaVersion.
  static StatusOr<std::unique_ptr<ResultStore>> Open(const std::string& path,
                                                     OpenMode mode = OpenMode::kCreate);

  const std::string& path() const { return db_->path(); }
  SqliteDb& db() { return *db_; }

  // Records a run as `info.state` (normally "running") with its devices. InvalidInput
  // for an empty run_id or an unknown state; re-beginning an existing run_id (resume)
  // keeps its row and adds devices not yet known.
  Status BeginRun(const RunInfo& info, const std::vector<DeviceInfo>& devices);
  // Records one cell's result in one transaction (cell, metrics, samples, probes, advice).
  // A cell id already recorded in this run is replaced, never duplicated. NotFound when
  // the run was never begun.
  Status RecordCell(const std::string& run_id, const CellResult& result);
  // Records several results in ONE transaction (bulk import, merge, benchmarks): all or
  // none of them are stored.
  Status RecordCells(const std::string& run_id, const std::vector<CellResult>& results);
  // state: "finished" or "interrupted"; packs the run's points for `regressions`
  // (store/packed_points.h). NotFound for an unknown run.
  Status FinishRun(const std::string& run_id, const std::string& state, const std::string& finished_at);
  // Packs the run's points again (merge, after adding cells to a finished run).
  Status PackRun(const std::string& run_id);
  // Sets the run's BLAS library when it has none yet: a runner that loads no LibTorch
  // learns it from the first cell process. NotFound for an unknown run.
  Status RecordRunBlas(const std::string& run_id, const std::string& blas);
  // The cell ids recorded in the run (what --resume skips).
  StatusOr<std::set<std::string>> FinishedCellIds(const std::string& run_id);
  // The whole run: info, devices, and every cell with all its fields, in the order they
  // were recorded. NotFound for an unknown run.
  StatusOr<RunRecord> LoadRun(const std::string& run_id);
  StatusOr<RunInfo> LoadRunInfo(const std::string& run_id);
  // Every run, oldest first (by started_at, then run_id).
  StatusOr<std::vector<RunInfo>> ListRuns();
  // The cell's last `limit` results, oldest first.
  StatusOr<std::vector<HistoryPoint>> CellHistory(const std::string& cell_id, int limit);
  // Records the verdict of each device of a `framegate qualify` run (begun with BeginRun,
  // its command saying qualify) in ONE transaction: all rows or none. A device the run
  // already has a verdict for is replaced, never duplicated. NotFound when the run was
  // never begun; InvalidInput (nothing stored) for a device with an empty name or named
  // twice in `devices`.
  Status RecordQualification(const std::string& run_id, const std::vector<DeviceQualification>& devices);
  // The run's verdicts, by device name; empty when it has none. Corrupt naming the file,
  // run and device when a stored row's reasons are not their JSON form.
  StatusOr<std::vector<DeviceQualification>> RunQualifications(const std::string& run_id);
  // Every verdict of `device` over time, oldest run first (by the run's started_at, then
  // run_id); empty when it was never qualified. The one query, on the device_verdicts view:
  //   SELECT * FROM device_verdicts WHERE device = ? ORDER BY started_at, run_id
  // Corrupt as RunQualifications.
  StatusOr<std::vector<DeviceVerdictPoint>> DeviceVerdicts(const std::string& device);
  // Records a golden; recording the same (path, sha256) twice keeps one row.
  Status RecordGolden(const GoldenRecord& golden);
  StatusOr<std::vector<GoldenRecord>> ListGoldens();

  // Test only: called inside RecordCells' transaction after every row is written and
  // before the commit, so that a test can kill the process with a transaction open.
  void TEST_SetBeforeCommitHook(std::function<void()> hook) { before_commit_ = std::move(hook); }

  ~ResultStore();

 private:
  explicit ResultStore(std::unique_ptr<SqliteDb> db);
  static StatusOr<std::unique_ptr<ResultStore>> OpenReadOnly(const std::string& path);
  std::unique_ptr<SqliteDb> db_;
  std::unique_ptr<CellRowWriter> writer_;  // prepared on the first RecordCell
  std::function<void()> before_commit_;
};

// "2024-05-01T03:00:00Z": the current UTC time, as runs.started_at is written.
std::string NowIso8601();

}  // namespace framegate
