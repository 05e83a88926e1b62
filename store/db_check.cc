#include "store/db_check.h"

#include "store/packed_points.h"
#include "store/schema.h"
#include "store/schema_check.h"
#include "store/sqlite_db.h"

namespace framegate {
namespace {

// Every row integrity_check returns; {"ok"} for a sound file.
StatusOr<std::vector<std::string>> IntegrityProblems(SqliteDb& db) {
  StatusOr<SqliteStatement> stmt = db.Prepare("PRAGMA integrity_check");
  if (!stmt.ok()) return stmt.status();
  std::vector<std::string> rows;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return rows;
    rows.push_back(stmt->Text(0));
  }
}

}  // namespace

StatusOr<DbCheckReport> CheckDatabase(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  if (!db.ok()) return db.status();
  DbCheckReport report;
  report.path = path;
  StatusOr<int> version = ReadSchemaVersion(**db);
  if (!version.ok()) return version.status();
  if (*version > kStoreSchemaVersion) {
    return Status::Unsupported(path + ": schema version " + std::to_string(*version) +
                               " is newer than this framegate's (" + std::to_string(kStoreSchemaVersion) +
                               ")");
  }
  report.schema_version = *version;
  StatusOr<std::vector<std::string>> problems = IntegrityProblems(**db);
  if (!problems.ok()) return problems.status();
  if (problems->size() != 1 || (*problems)[0] != "ok") {
    return Status::Corrupt(path + ": integrity check failed: " + problems->front() + " (" +
                           std::to_string(problems->size()) + " problem" +
                           (problems->size() == 1 ? "" : "s") + ")");
  }
  // A sound file can still lack a table, column, index or trigger (dropped, hand-made).
  FG_RETURN_IF_ERROR(CheckSchema(**db, *version));
  // A row whose parent was deleted by hand (cells without their cell_specs or run) is not
  // read back by any command: report it rather than "ok".
  StatusOr<std::vector<std::string>> dangling = DanglingReferences(**db);
  if (!dangling.ok()) return dangling.status();
  if (!dangling->empty()) {
    std::string list;
    for (const std::string& line : *dangling) list += (list.empty() ? "" : "; ") + line;
    return Status::Corrupt(path + ": dangling references: " + list);
  }
  // A blob `regressions` would read instead of its run's rows must equal them.
  if (*version >= 11) FG_RETURN_IF_ERROR(CheckPackedPoints(**db));
  StatusOr<SqliteStatement> mode = (*db)->Prepare("PRAGMA journal_mode");
  if (!mode.ok()) return mode.status();
  StatusOr<bool> row = mode->Step();
  if (!row.ok()) return row.status();
  report.journal_mode = *row ? mode->Text(0) : "";
  StatusOr<SqliteStatement> tables = (*db)->Prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
      "ORDER BY name");
  if (!tables.ok()) return tables.status();
  for (;;) {
    StatusOr<bool> more = tables->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::string name = tables->Text(0);
    // A table name cannot be a bound parameter: quote it as an identifier.
    std::string quoted;
    for (char ch : name) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    StatusOr<int64_t> count = (*db)->QueryInt("SELECT count(*) FROM \"" + quoted + "\"");
    if (!count.ok()) return count.status();
    report.table_rows.push_back({name, *count});
  }
  return report;
}

}  // namespace framegate
