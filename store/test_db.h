// Test support for the store's tests: a database path in a fresh temporary folder
// (removed with its -wal/-shm files afterwards), and raw SQL on a file, bypassing the
// store, to set up or inspect what the store must cope with.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/test_temp_dir.h"

namespace framegate {

class TestDb {
 public:
  explicit TestDb(const std::string& name) : dir_("fg-store"), path_(dir_ / (name + ".db")) {}
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  TestTempDir dir_;
  std::string path_;
};

// Runs `sql` on the file with a plain connection; throws on error.
inline void ExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(path + ": " + sql + ": " + message);
}

// The first column of the first row of `sql`; throws on error or no row.
inline int64_t QueryInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* stmt = nullptr;
  int64_t value = 0;
  bool found = false;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
    found = true;
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (!found) throw std::runtime_error(path + ": no row for " + sql);
  return value;
}

}  // namespace framegate
