// SchemaProblems: how a store file's schema departs from the schema its version defines.
// The expected schema is not a second list: it is built by running the migrations
// (store/schema.h) into an in-memory database and read back from sqlite_schema and the
// table_info / index_list pragmas, so it follows every new migration step by itself.
#pragma once

#include <string>
#include <vector>

#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

// One line per problem, in the schema's order, e.g. "table runs missing", "column
// cells.status missing", "column cells.cell_id is INTEGER NOT NULL, expected TEXT NOT
// NULL", "index runs_by_start missing", "UNIQUE (run_id, cell_id) on cells missing",
// "trigger series_points_cell_insert missing". Empty when every table, column, index,
// uniqueness constraint, view and trigger of schema `version` is there. Objects the schema
// does not define (a user's own table or index) are allowed. Precondition: 0 <= version
// <= kStoreSchemaVersion (ReadSchemaVersion's answer, a newer one refused).
StatusOr<std::vector<std::string>> SchemaProblems(SqliteDb& db, int version);

// Ok, or Corrupt naming the file, its version and the problems (all of them, on one line)
// when SchemaProblems finds any.
Status CheckSchema(SqliteDb& db, int version);

// Rows whose foreign key points at no row (PRAGMA foreign_key_check: a parent row deleted
// by hand with enforcement off), one line per child table and parent table, e.g. "cells: 1
// row refers to a missing cell_specs row (first: rowid 2)". Only the rows of `table` when
// it is not "". Empty when every reference resolves. Scans the tables (cost of a read of
// the whole file).
StatusOr<std::vector<std::string>> DanglingReferences(SqliteDb& db, const std::string& table = "");

}  // namespace framegate
