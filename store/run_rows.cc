#include "store/run_rows.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "store/cell_rows.h"

namespace framegate {
namespace {

constexpr const char* kRunColumns =
    "run_id, started_at, finished_at, state, host, git_sha, framegate_version, "
    "libtorch_version, cuda_version, blas, tags, matrix_path, matrix_sha256, command, shard, argv, "
    "fingerprint";
constexpr int kArgvColumn = 15;
constexpr int kFingerprintColumn = 16;

// runs.argv: a JSON array of strings.
std::string ArgvToJson(const std::vector<std::string>& argv) { return nlohmann::json(argv).dump(); }

// Corrupt, naming the file and the run, unless `text` is a JSON array of strings.
Status ArgvFromJson(const std::string& text, const std::string& where, std::vector<std::string>* argv) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::Corrupt(where + ": runs.argv is not a JSON array");
  argv->clear();
  for (const nlohmann::json& word : j) {
    if (!word.is_string()) return Status::Corrupt(where + ": runs.argv holds a non-string");
    argv->push_back(word.get<std::string>());
  }
  return Status::Ok();
}

StatusOr<RunInfo> ReadRunColumns(const SqliteStatement& row, const std::string& db_path) {
  RunInfo info;
  int i = 0;
  for (std::string* field :
       {&info.run_id, &info.started_at, &info.finished_at, &info.state, &info.host, &info.git_sha,
        &info.framegate_version, &info.libtorch_version, &info.cuda_version, &info.blas, &info.tags,
        &info.matrix_path, &info.matrix_sha256, &info.command, &info.shard}) {
    *field = row.Text(i++);
  }
  FG_RETURN_IF_ERROR(ArgvFromJson(row.Text(kArgvColumn), db_path + ": run " + info.run_id, &info.argv));
  info.fingerprint = row.Text(kFingerprintColumn);
  return info;
}

// Steps `stmt` to the end, calling `on_row` for each row.
template <typename OnRow>
Status ForEachRow(SqliteStatement& stmt, OnRow on_row) {
  for (;;) {
    StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    FG_RETURN_IF_ERROR(on_row(stmt));
  }
}

}  // namespace

bool IsRunState(const std::string& state) {
  return state == "running" || state == "finished" || state == "interrupted";
}

Status UpsertRun(SqliteDb& db, const RunInfo& info) {
  StatusOr<SqliteStatement> insert =
      db.Prepare(std::string("INSERT INTO runs (") + kRunColumns +
                 ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO "
                 "UPDATE SET state = excluded.state, finished_at = excluded.finished_at");
  if (!insert.ok()) return insert.status();
  int i = 1;
  for (const std::string* field :
       {&info.run_id, &info.started_at, &info.finished_at, &info.state, &info.host, &info.git_sha,
        &info.framegate_version, &info.libtorch_version, &info.cuda_version, &info.blas, &info.tags,
        &info.matrix_path, &info.matrix_sha256, &info.command, &info.shard}) {
    insert->Bind(i++, *field);
  }
  insert->Bind(i, ArgvToJson(info.argv));
  return insert->Bind(i + 1, info.fingerprint.empty() ? std::string("{}") : info.fingerprint).Run();
}

Status InsertDevices(SqliteDb& db, const std::string& run_id, const std::vector<DeviceInfo>& devices) {
  StatusOr<SqliteStatement> insert = db.Prepare(
      "INSERT OR IGNORE INTO devices (run_id, device, name, capability, memory_bytes, "
      "driver) VALUES (?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  for (const DeviceInfo& d : devices) {
    insert->Bind(1, run_id).Bind(2, d.device).Bind(3, d.name).Bind(4, d.capability);
    FG_RETURN_IF_ERROR(insert->Bind(5, d.memory_bytes).Bind(6, d.driver).Run());
  }
  return Status::Ok();
}

StatusOr<bool> RunExists(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> stmt = db.Prepare("SELECT 1 FROM runs WHERE run_id = ?");
  if (!stmt.ok()) return stmt.status();
  return stmt->Bind(1, run_id).Step();
}

StatusOr<RunInfo> ReadRunInfo(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE run_id = ?");
  if (!stmt.ok()) return stmt.status();
  StatusOr<bool> row = stmt->Bind(1, run_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::NotFound(db.path() + ": no run '" + run_id + "'");
  return ReadRunColumns(*stmt, db.path());
}

StatusOr<std::vector<RunInfo>> ReadAllRuns(SqliteDb& db) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY started_at, run_id");
  if (!stmt.ok()) return stmt.status();
  std::vector<RunInfo> runs;
  FG_RETURN_IF_ERROR(ForEachRow(*stmt, [&](const SqliteStatement& row) -> Status {
    StatusOr<RunInfo> info = ReadRunColumns(row, db.path());
    if (!info.ok()) return info.status();
    runs.push_back(std::move(*info));
    return Status::Ok();
  }));
  return runs;
}

StatusOr<std::vector<DeviceInfo>> ReadDevices(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> stmt = db.Prepare(
      "SELECT device, name, capability, memory_bytes, driver FROM devices WHERE run_id = ? "
      "ORDER BY device");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  std::vector<DeviceInfo> devices;
  FG_RETURN_IF_ERROR(ForEachRow(*stmt, [&](const SqliteStatement& row) {
    devices.push_back({row.Text(0), row.Text(1), row.Text(2), row.Int(3), row.Text(4)});
    return Status::Ok();
  }));
  return devices;
}

Status ReadRunCells(SqliteDb& db, const std::string& run_id, std::vector<CellResult>* cells) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT ") + kCellSelectColumns + ", " + kMetricSelectColumns + ", " +
                 kAdviceSelectColumns +
                 " FROM cells c JOIN cell_specs s ON s.cell_id = c.cell_id "
                 "LEFT JOIN metrics m ON m.cell_row = c.id "
                 "LEFT JOIN advice a ON a.cell_row = c.id WHERE c.run_id = ? ORDER BY c.id");
  if (!stmt.ok()) return stmt.status();
  StatusOr<std::unique_ptr<CellChildReader>> children = CellChildReader::Prepare(db);
  if (!children.ok()) return children.status();
  stmt->Bind(1, run_id);
  return ForEachRow(*stmt, [&](const SqliteStatement& row) -> Status {
    CellResult result;
    FG_RETURN_IF_ERROR(ReadCellColumns(row, 0, db.path(), &result));
    ReadMetricColumns(row, kCellSelectColumnCount, &result.metrics);
    FG_RETURN_IF_ERROR(
        ReadAdviceColumns(row, kCellSelectColumnCount + kMetricSelectColumnCount, db.path(), &result));
    FG_RETURN_IF_ERROR((*children)->ReadSamples(row.Int(0), &result));
    FG_RETURN_IF_ERROR((*children)->ReadProbes(row.Int(0), &result));
    cells->push_back(std::move(result));
    return Status::Ok();
  });
}

Status ReadCellHistory(SqliteDb& db, const std::string& cell_id, int limit,
                       std::vector<HistoryPoint>* points) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT r.run_id, r.started_at, r.git_sha, r.host, r.tags, d.name, ") +
                 kCellSelectColumns + ", " + kMetricSelectColumns + ", " + kAdviceSelectColumns +
                 " FROM cells c JOIN cell_specs s ON s.cell_id = c.cell_id "
                 "JOIN runs r ON r.run_id = c.run_id "
                 "LEFT JOIN devices d ON d.run_id = c.run_id AND d.device = s.device "
                 "LEFT JOIN metrics m ON m.cell_row = c.id "
                 "LEFT JOIN advice a ON a.cell_row = c.id "
                 "WHERE c.cell_id = ? ORDER BY r.started_at DESC, r.run_id DESC LIMIT ?");
  if (!stmt.ok()) return stmt.status();
  StatusOr<std::unique_ptr<CellChildReader>> children = CellChildReader::Prepare(db);
  if (!children.ok()) return children.status();
  stmt->Bind(1, cell_id).Bind(2, static_cast<int64_t>(limit));
  constexpr int kFirstCellColumn = 6;
  FG_RETURN_IF_ERROR(ForEachRow(*stmt, [&](const SqliteStatement& row) -> Status {
    HistoryPoint point;
    point.run_id = row.Text(0);
    point.started_at = row.Text(1);
    point.git_sha = row.Text(2);
    point.host = row.Text(3);
    point.tags = row.Text(4);
    point.device_name = row.Text(5);
    FG_RETURN_IF_ERROR(ReadCellColumns(row, kFirstCellColumn, db.path(), &point.result));
    point.latency_median_s = row.Real(kFirstCellColumn + 2);
    ReadMetricColumns(row, kFirstCellColumn + kCellSelectColumnCount, &point.result.metrics);
    FG_RETURN_IF_ERROR(ReadAdviceColumns(
        row, kFirstCellColumn + kCellSelectColumnCount + kMetricSelectColumnCount, db.path(), &point.result));
    FG_RETURN_IF_ERROR((*children)->ReadSamples(row.Int(kFirstCellColumn), &point.result));
    points->push_back(std::move(point));
    return Status::Ok();
  }));
  std::reverse(points->begin(), points->end());
  return Status::Ok();
}

}  // namespace framegate
