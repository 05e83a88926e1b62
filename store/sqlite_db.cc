#include "store/sqlite_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

namespace framegate {

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::BindStatic(int index, const char* value) {
  sqlite3_bind_text(stmt_, index, value, -1, SQLITE_STATIC);
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  return *this;
}

StatusOr<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string sql = sqlite3_sql(stmt_) ? sqlite3_sql(stmt_) : "";
  sqlite3_reset(stmt_);
  return db_->Error(rc, "'" + sql.substr(0, 60) + "'");
}

Status SqliteStatement::Run() {
  StatusOr<bool> row = Step();
  while (row.ok() && *row) row = Step();
  Reset();
  return row.ok() ? Status::Ok() : row.status();
}

void SqliteStatement::Reset() { sqlite3_reset(stmt_); }

int SqliteStatement::ColumnCount() const { return sqlite3_column_count(stmt_); }

bool SqliteStatement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double SqliteStatement::Real(int column) const {
  const double value = sqlite3_column_double(stmt_, column);  // NULL reads as 0.0
  if (value == 0 && IsNull(column)) return std::numeric_limits<double>::quiet_NaN();
  return value;
}

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string_view SqliteStatement::TextView(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(text),
                          static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string_view SqliteStatement::BlobView(int column) const {
  const void* bytes = sqlite3_column_blob(stmt_, column);
  if (bytes == nullptr) return {};
  return std::string_view(static_cast<const char*>(bytes),
                          static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, Mode mode) {
  struct stat info;
  const bool exists = path != ":memory:" && stat(path.c_str(), &info) == 0;
  if (mode != Mode::kReadWriteCreate && !exists) {
    return Status::NotFound(path + ": no such database file");
  }
  // A FIFO would block the open (read-only) or every read; a directory or device is no
  // database either.
  if (exists && !S_ISREG(info.st_mode)) {
    return Status::InvalidInput(path + ": not a regular file (a database is one file)");
  }
  int flags = SQLITE_OPEN_NOMUTEX;
  if (mode == Mode::kReadOnly) {
    flags |= SQLITE_OPEN_READONLY;
  } else {
    flags |= SQLITE_OPEN_READWRITE;
    if (mode == Mode::kReadWriteCreate) flags |= SQLITE_OPEN_CREATE;
  }
  sqlite3* handle = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(path, handle));
  if (rc != SQLITE_OK) return db->Error(rc, "cannot open");
  sqlite3_busy_timeout(handle, kBusyTimeoutMs);
  sqlite3_extended_result_codes(handle, 0);
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::CopyToMemory() {
  sqlite3* memory = nullptr;
  if (sqlite3_open(":memory:", &memory) != SQLITE_OK) {
    sqlite3_close(memory);
    return Status::Internal(path_ + ": cannot open an in-memory database");
  }
  std::unique_ptr<SqliteDb> copy(new SqliteDb(path_, memory));
  copy->in_memory_ = true;
  sqlite3_backup* backup = sqlite3_backup_init(memory, "main", db_, "main");
  if (backup == nullptr) return copy->Error(sqlite3_errcode(memory), "copying into memory");
  const int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return Error(rc, "copying into memory");
  return copy;
}

Status SqliteDb::Error(int rc, const std::string& what) const {
  last_error_busy_ = (rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
  const std::string detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  const std::string message = path_ + ": " + what + ": " + detail;
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
    return Status::Corrupt(path_ + ": not a valid framegate database (" + detail + ")");
  }
  if (last_error_busy_) {
    return Status::IoError(message + " (another process held the lock for more than " +
                           std::to_string(kBusyTimeoutMs / 1000) + " s)");
  }
  if (rc == SQLITE_CANTOPEN || rc == SQLITE_IOERR || rc == SQLITE_FULL || rc == SQLITE_READONLY) {
    return Status::IoError(message);
  }
  return Status::Internal(message);
}

StatusOr<SqliteStatement> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing '" + sql.substr(0, 60) + "'");
  return SqliteStatement(this, stmt);
}

Status SqliteDb::Exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "'" + sql.substr(0, 60) + "'");
  return Status::Ok();
}

StatusOr<int64_t> SqliteDb::QueryInt(const std::string& sql) {
  StatusOr<SqliteStatement> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal(path_ + ": '" + sql + "' returned no row");
  return stmt->Int(0);
}

int64_t SqliteDb::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int64_t SqliteDb::Changes() const { return sqlite3_changes(db_); }

Status SqliteDb::WriteTransaction(const std::function<Status()>& body) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    last_error_busy_ = false;
    Status status = Exec("BEGIN IMMEDIATE");
    if (status.ok()) {
      status = body();
      if (status.ok()) status = Exec("COMMIT");
      if (!status.ok() && !sqlite3_get_autocommit(db_)) {
        const bool busy = last_error_busy_;
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        last_error_busy_ = busy;
      }
    }
    if (status.ok() || !last_error_busy_ || std::chrono::steady_clock::now() >= deadline) {
      return status;
    }
    // BUSY despite busy_timeout (e.g. WAL recovery by another connection): back off.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 10 * (attempt % 10)));
  }
}

Status SqliteDb::ReadTransaction(const std::function<Status()>& body) {
  if (!sqlite3_get_autocommit(db_)) return body();  // already inside one
  FG_RETURN_IF_ERROR(Exec("BEGIN"));
  Status status = body();
  const Status end = Exec(status.ok() ? "COMMIT" : "ROLLBACK");
  return status.ok() ? end : status;
}

}  // namespace framegate
