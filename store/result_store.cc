#include "store/result_store.h"

#include <chrono>
#include <ctime>
#include <set>
#include <thread>

#include "store/cell_rows.h"
#include "store/packed_points.h"
#include "store/qualification_rows.h"
#include "store/run_rows.h"
#include "store/schema.h"
#include "store/schema_check.h"

namespace framegate {
namespace {

// WAL must be set while no other connection holds the file; retry while one does.
Status EnableWal(SqliteDb& db) {
  Status status;
  for (int attempt = 0; attempt < 200; ++attempt) {
    StatusOr<SqliteStatement> stmt = db.Prepare("PRAGMA journal_mode = WAL");
    if (!stmt.ok()) return stmt.status();
    StatusOr<bool> row = stmt->Step();
    if (row.ok()) {
      if (*row && stmt->Text(0) == "wal") return Status::Ok();
      return Status::IoError(db.path() + ": cannot switch to WAL journal mode (got '" +
                             (*row ? stmt->Text(0) : std::string()) + "')");
    }
    status = row.status();
    if (!db.last_error_was_busy()) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

// The file's schema version. kUnsupported for a newer schema, kCorrupt for a file that is
// not framegate's or a negative version.
StatusOr<int> CheckNotNewer(SqliteDb& db) {
  StatusOr<int> version = ReadSchemaVersion(db);
  if (!version.ok()) return version.status();
  if (*version > kStoreSchemaVersion) return MigrateSchema(db);  // reports the newer version
  return version;
}

}  // namespace

std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

StatusOr<std::unique_ptr<ResultStore>> ResultStore::Open(const std::string& path, OpenMode mode) {
  if (mode == OpenMode::kReadOnly) return OpenReadOnly(path);
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(
      path, mode == OpenMode::kCreate ? SqliteDb::Mode::kReadWriteCreate : SqliteDb::Mode::kReadWrite);
  if (!db.ok()) return db.status();
  // Refuse someone else's file, a newer schema or a damaged one (a table, column, index or
  // trigger of its version missing) before changing anything in it: writing into a file
  // without its UNIQUE constraints or triggers would store wrong rows silently.
  StatusOr<int> version = CheckNotNewer(**db);
  if (!version.ok()) return version.status();
  FG_RETURN_IF_ERROR(CheckSchema(**db, *version));
  FG_RETURN_IF_ERROR(EnableWal(**db));
  FG_RETURN_IF_ERROR((*db)->Exec("PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536"));
  FG_RETURN_IF_ERROR(MigrateSchema(**db));
  FG_RETURN_IF_ERROR((*db)->Exec("PRAGMA foreign_keys = ON"));
  return std::unique_ptr<ResultStore>(new ResultStore(std::move(*db)));
}

StatusOr<std::unique_ptr<ResultStore>> ResultStore::OpenReadOnly(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  if (!db.ok()) return db.status();
  StatusOr<int> version = CheckNotNewer(**db);
  if (!version.ok()) return version.status();
  if (*version < kStoreSchemaVersion) {
    StatusOr<std::unique_ptr<SqliteDb>> copy = (*db)->CopyToMemory();
    if (!copy.ok()) return copy.status();
    FG_RETURN_IF_ERROR(MigrateSchema(**copy));
    db = std::move(copy);
  }
  return std::unique_ptr<ResultStore>(new ResultStore(std::move(*db)));
}

ResultStore::ResultStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

ResultStore::~ResultStore() = default;

Status ResultStore::BeginRun(const RunInfo& info, const std::vector<DeviceInfo>& devices) {
  if (info.run_id.empty()) return Status::InvalidInput(path() + ": a run needs a run_id");
  if (!IsRunState(info.state)) {
    return Status::InvalidInput(path() + ": run " + info.run_id + " has state '" + info.state +
                                "' (running, finished or interrupted)");
  }
  return db_->WriteTransaction([&]() -> Status {
    FG_RETURN_IF_ERROR(UpsertRun(*db_, info));
    return InsertDevices(*db_, info.run_id, devices);
  });
}

Status ResultStore::RecordCell(const std::string& run_id, const CellResult& result) {
  return RecordCells(run_id, {result});
}

Status ResultStore::RecordCells(const std::string& run_id, const std::vector<CellResult>& results) {
  if (!writer_) {
    StatusOr<std::unique_ptr<CellRowWriter>> writer = CellRowWriter::Prepare(*db_);
    if (!writer.ok()) return writer.status();
    writer_ = std::move(*writer);
  }
  return db_->WriteTransaction([&]() -> Status {
    StatusOr<bool> known = RunExists(*db_, run_id);
    if (!known.ok()) return known.status();
    if (!*known) return Status::NotFound(path() + ": no run '" + run_id + "' (BeginRun first)");
    for (const CellResult& result : results) {
      StatusOr<int64_t> row = writer_->Write(run_id, result);
      if (!row.ok()) return row.status().WithContext("cell " + result.cell.Id());
    }
    if (before_commit_) before_commit_();
    return Status::Ok();
  });
}

Status ResultStore::FinishRun(const std::string& run_id, const std::string& state,
                              const std::string& finished_at) {
  if (state != "finished" && state != "interrupted") {
    return Status::InvalidInput(path() +
                                ": a run finishes as 'finished' or 'interrupted', "
                                "not '" +
                                state + "'");
  }
  return db_->WriteTransaction([&]() -> Status {
    StatusOr<SqliteStatement> update =
        db_->Prepare("UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ?");
    if (!update.ok()) return update.status();
    FG_RETURN_IF_ERROR(update->Bind(1, state).Bind(2, finished_at).Bind(3, run_id).Run());
    if (db_->Changes() == 0) return Status::NotFound(path() + ": no run '" + run_id + "'");
    return PackRunPoints(*db_, run_id);
  });
}

Status ResultStore::PackRun(const std::string& run_id) {
  return db_->WriteTransaction([&] { return PackRunPoints(*db_, run_id); });
}

Status ResultStore::RecordRunBlas(const std::string& run_id, const std::string& blas) {
  return db_->WriteTransaction([&]() -> Status {
    StatusOr<SqliteStatement> update =
        db_->Prepare("UPDATE runs SET blas = ? WHERE run_id = ? AND (blas IS NULL OR blas = '')");
    if (!update.ok()) return update.status();
    return update->Bind(1, blas).Bind(2, run_id).Run();
  });
}

StatusOr<std::set<std::string>> ResultStore::FinishedCellIds(const std::string& run_id) {
  StatusOr<SqliteStatement> stmt = db_->Prepare("SELECT cell_id FROM cells WHERE run_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  std::set<std::string> ids;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return ids;
    ids.insert(stmt->Text(0));
  }
}

StatusOr<RunInfo> ResultStore::LoadRunInfo(const std::string& run_id) { return ReadRunInfo(*db_, run_id); }

StatusOr<RunRecord> ResultStore::LoadRun(const std::string& run_id) {
  RunRecord record;
  Status status = db_->ReadTransaction([&]() -> Status {
    StatusOr<RunInfo> info = ReadRunInfo(*db_, run_id);
    if (!info.ok()) return info.status();
    record.info = std::move(*info);
    StatusOr<std::vector<DeviceInfo>> devices = ReadDevices(*db_, run_id);
    if (!devices.ok()) return devices.status();
    record.devices = std::move(*devices);
    return ReadRunCells(*db_, run_id, &record.cells);
  });
  if (!status.ok()) return status;
  return record;
}

StatusOr<std::vector<RunInfo>> ResultStore::ListRuns() { return ReadAllRuns(*db_); }

StatusOr<std::vector<HistoryPoint>> ResultStore::CellHistory(const std::string& cell_id, int limit) {
  std::vector<HistoryPoint> points;
  Status status = db_->ReadTransaction([&]() { return ReadCellHistory(*db_, cell_id, limit, &points); });
  if (!status.ok()) return status;
  return points;
}

Status ResultStore::RecordQualification(const std::string& run_id,
                                        const std::vector<DeviceQualification>& devices) {
  std::set<std::string> names;
  for (const DeviceQualification& device : devices) {
    if (device.device.empty()) {
      return Status::InvalidInput(path() + ": run " + run_id + ": a qualified device needs a name");
    }
    if (!names.insert(device.device).second) {
      return Status::InvalidInput(path() + ": run " + run_id + ": device " + device.device +
                                  " is qualified twice");
    }
  }
  const std::string recorded_at = NowIso8601();
  return db_->WriteTransaction([&]() -> Status {
    StatusOr<bool> known = RunExists(*db_, run_id);
    if (!known.ok()) return known.status();
    if (!*known) return Status::NotFound(path() + ": no run '" + run_id + "' (BeginRun first)");
    for (const DeviceQualification& device : devices) {
      Status written = WriteQualification(*db_, run_id, device, recorded_at);
      if (!written.ok()) return written.WithContext("device " + device.device);
    }
    return Status::Ok();
  });
}

StatusOr<std::vector<DeviceQualification>> ResultStore::RunQualifications(const std::string& run_id) {
  std::vector<DeviceQualification> devices;
  Status status = db_->ReadTransaction([&]() { return ReadRunQualifications(*db_, run_id, &devices); });
  if (!status.ok()) return status;
  return devices;
}

StatusOr<std::vector<DeviceVerdictPoint>> ResultStore::DeviceVerdicts(const std::string& device) {
  std::vector<DeviceVerdictPoint> points;
  Status status = db_->ReadTransaction([&]() { return ReadDeviceVerdicts(*db_, device, &points); });
  if (!status.ok()) return status;
  return points;
}

Status ResultStore::RecordGolden(const GoldenRecord& golden) {
  if (golden.path.empty() || golden.sha256.empty()) {
    return Status::InvalidInput(path() + ": a golden needs a path and a sha256");
  }
  return db_->WriteTransaction([&]() -> Status {
    StatusOr<SqliteStatement> insert = db_->Prepare(
        "INSERT OR IGNORE INTO goldens (path, sha256, config, provenance, recorded_at) "
        "VALUES (?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.status();
    insert->Bind(1, golden.path).Bind(2, golden.sha256).Bind(3, golden.config);
    return insert->Bind(4, golden.provenance.empty() ? "{}" : golden.provenance).Bind(5, NowIso8601()).Run();
  });
}

StatusOr<std::vector<GoldenRecord>> ResultStore::ListGoldens() {
  StatusOr<SqliteStatement> stmt =
      db_->Prepare("SELECT path, sha256, config, provenance FROM goldens ORDER BY path, sha256");
  if (!stmt.ok()) return stmt.status();
  std::vector<GoldenRecord> goldens;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return goldens;
    goldens.push_back({stmt->Text(0), stmt->Text(1), stmt->Text(2), stmt->Text(3)});
  }
}

}  // namespace framegate
