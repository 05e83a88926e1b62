// CheckDatabase: `framegate db check`. Opens the file read-only (never creates, migrates
// or repairs it), runs PRAGMA integrity_check, reads the schema version, checks that every
// table, column, index, uniqueness constraint, view and trigger of that version is there
// (store/schema_check.h), that every packed_points blob equals its run's series_points rows
// (store/packed_points.h) and counts the rows of every table.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/status.h"

namespace framegate {

struct DbCheckReport {
  std::string path;
  int schema_version = 0;    // may be older than kStoreSchemaVersion (migrated on next write)
  std::string journal_mode;  // "wal" for a file the store has opened
  std::vector<std::pair<std::string, int64_t>> table_rows;  // table name, rows; by name
};

// NotFound for a missing file; Corrupt naming the file and the first problem when it is
// not an SQLite database or integrity_check reports anything, naming the file and every
// schema problem when the schema departs from its version's, naming the run when a
// packed_points blob is damaged or differs from its rows; Unsupported for a schema
// newer than this framegate's.
StatusOr<DbCheckReport> CheckDatabase(const std::string& path);

}  // namespace framegate
