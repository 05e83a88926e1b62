// SqliteDb: the thin layer over the SQLite C API that the store uses. Every value goes
// through a bound parameter (never formatted into SQL). Errors come back as Status values
// whose message names the database file. Not thread-safe: one SqliteDb per thread.
//
// Concurrency contract (several processes writing one file): the connection waits up to
// kBusyTimeoutMs for a lock (busy_timeout), and WriteTransaction() starts with BEGIN
// IMMEDIATE (so a writer never has to upgrade a read lock, which SQLite refuses without
// waiting) and retries the whole transaction when SQLite still answers BUSY/LOCKED.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "harness/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace framegate {

constexpr int kBusyTimeoutMs = 30000;

class SqliteDb;

// A prepared statement. Bind* are 1-based as in SQLite. Step() returns true while a row
// is available, false when done, and the error (naming the file) on failure.
class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, double value);  // NaN is stored as NULL by SQLite
  SqliteStatement& Bind(int index, const std::string& value);
  // A string that outlives the statement's use of it (a literal): bound without a copy.
  SqliteStatement& BindStatic(int index, const char* value);
  SqliteStatement& BindNull(int index);
  SqliteStatement& BindBlob(int index, std::string_view bytes);
  StatusOr<bool> Step();
  // Runs a statement that returns no rows (or ignores them), then resets it.
  Status Run();
  void Reset();  // rewinds for another Step() round; bindings stay

  int ColumnCount() const;
  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Real(int column) const;  // NULL reads as NaN
  std::string Text(int column) const;
  // The text without a copy; valid until the next Step/Reset or column call.
  std::string_view TextView(int column) const;
  // A BLOB column's bytes without a copy (empty for NULL); valid as TextView.
  std::string_view BlobView(int column) const;

 private:
  friend class SqliteDb;
  SqliteStatement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteDb* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// Binds parameters 1, 2, 3... in order: SqliteBinder(stmt) << run_id << count << 0.5;
class SqliteBinder {
 public:
  explicit SqliteBinder(SqliteStatement& stmt) : stmt_(stmt) {}
  SqliteBinder& operator<<(int value) { return *this << static_cast<int64_t>(value); }
  SqliteBinder& operator<<(int64_t value) {
    stmt_.Bind(next_++, value);
    return *this;
  }
  SqliteBinder& operator<<(double value) {
    stmt_.Bind(next_++, value);
    return *this;
  }
  SqliteBinder& operator<<(const std::string& value) {
    stmt_.Bind(next_++, value);
    return *this;
  }

 private:
  SqliteStatement& stmt_;
  int next_ = 1;
};

class SqliteDb {
 public:
  enum class Mode { kReadWriteCreate, kReadWrite, kReadOnly };
  // Opens (NotFound when the file does not exist and mode is not kReadWriteCreate;
  // InvalidInput, without opening it, when the path is not a regular file: a FIFO would
  // block) and sets busy_timeout. Does not check that the file is a framegate database.
  static StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, Mode mode);
  ~SqliteDb();

  const std::string& path() const { return path_; }
  // True for a CopyToMemory() copy (path() then names the file it was copied from).
  bool in_memory() const { return in_memory_; }
  sqlite3* handle() { return db_; }

  // A copy of the whole database in memory (sqlite3 backup API), named like this one.
  StatusOr<std::unique_ptr<SqliteDb>> CopyToMemory();

  StatusOr<SqliteStatement> Prepare(const std::string& sql);
  // Runs one or more statements without parameters (DDL, PRAGMAs).
  Status Exec(const std::string& sql);
  // The first column of the first row of `sql` as an integer (e.g. PRAGMA user_version).
  StatusOr<int64_t> QueryInt(const std::string& sql);
  // The rowid of the last INSERT on this connection; the rows the last statement changed.
  int64_t LastInsertRowId() const;
  int64_t Changes() const;

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT, rolling back when it returns an error.
  // When SQLite answers BUSY or LOCKED anywhere in it, the whole transaction is retried
  // (body must be safe to run again) for up to kBusyTimeoutMs in total.
  Status WriteTransaction(const std::function<Status()>& body);
  // Runs `body` inside a read transaction (BEGIN ... COMMIT): every query in it sees one
  // snapshot of the file, whatever other processes commit meanwhile.
  Status ReadTransaction(const std::function<Status()>& body);

  // The Status for SQLite result code `rc` on this connection: "<path>: <what>: <sqlite
  // message>"; kCorrupt for SQLITE_CORRUPT / SQLITE_NOTADB.
  Status Error(int rc, const std::string& what) const;
  // Whether the last error SQLite reported on this connection was BUSY or LOCKED.
  bool last_error_was_busy() const { return last_error_busy_; }

 private:
  friend class SqliteStatement;
  SqliteDb(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::string path_;
  bool in_memory_ = false;
  sqlite3* db_ = nullptr;
  mutable bool last_error_busy_ = false;
};

}  // namespace framegate
