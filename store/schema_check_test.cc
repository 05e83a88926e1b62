#include "store/schema_check.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "store/db_check.h"
#include "store/result_store.h"
#include "store/schema.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

// A current-schema store file with one run of three cells.
void WriteStore(const std::string& path) {
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->BeginRun(SyntheticRunInfo("r1", "2024-05-01T03:00:00Z"), {}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*store)->RecordCell("r1", SyntheticCellResult(i, "cpu", 1)).ok());
}

std::vector<std::string> Problems(const std::string& path, int version = kStoreSchemaVersion) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  EXPECT_TRUE(db.ok());
  StatusOr<std::vector<std::string>> problems = SchemaProblems(**db, version);
  EXPECT_TRUE(problems.ok()) << problems.status().message();
  return problems.ok() ? *problems : std::vector<std::string>{"error"};
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rebuilds `table` from its own CREATE statement with `from` replaced by `to` (the way a
// hand-made or badly repaired file differs), keeping its rows, indexes and triggers.
void RewriteTable(const std::string& path, const std::string& table, const std::string& from,
                  const std::string& to) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  StatusOr<SqliteStatement> create = (*db)->Prepare("SELECT sql FROM sqlite_master WHERE name = ?");
  create->Bind(1, table);
  ASSERT_TRUE(*create->Step());
  std::string sql = create->Text(0);
  create->Reset();  // an open statement would lock the table against DROP
  ASSERT_NE(sql.find(from), std::string::npos) << sql;
  sql.replace(sql.find(from), from.size(), to);
  sql.replace(sql.find(table), table.size(), table + "_new");
  std::string attached;  // its indexes and triggers, dropped with it
  StatusOr<SqliteStatement> others = (*db)->Prepare(
      "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql "
      "IS NOT NULL");
  others->Bind(1, table);
  while (*others->Step()) attached += others->Text(0) + ";\n";
  const Status rebuilt =
      (*db)->Exec("PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON; BEGIN; " + sql +
                  "; INSERT INTO " + table + "_new SELECT * FROM " + table + "; DROP TABLE " + table +
                  "; ALTER TABLE " + table + "_new RENAME TO " + table + "; " + attached + "COMMIT;");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.message();
}

TEST(SchemaCheckTest, EverySchemaVersionAsMigratedHasNoProblems) {
  for (int version = 0; version <= kStoreSchemaVersion; ++version) {
    TestDb file("v" + std::to_string(version));
    StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(file.path(), SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(MigrateSchema(**db, version).ok());
    db->reset();
    EXPECT_EQ(Problems(file.path(), version), std::vector<std::string>{}) << version;
  }
  TestDb store("store");
  WriteStore(store.path());
  EXPECT_EQ(Problems(store.path()), std::vector<std::string>{});
  // A user's own table and index are not problems.
  ExecSql(store.path(), "CREATE TABLE notes (text TEXT); CREATE INDEX cells_by_status ON cells (status)");
  EXPECT_EQ(Problems(store.path()), std::vector<std::string>{});
}

TEST(SchemaCheckTest, MissingTablesIndexesTriggersAndViewsAreEachNamed) {
  TestDb file("damaged");
  WriteStore(file.path());
  ExecSql(file.path(),
          "DROP TABLE runs; DROP INDEX cells_by_cell_id; DROP TRIGGER series_points_cell_insert; "
          "DROP VIEW cell_results");
  EXPECT_EQ(Problems(file.path()),
            (std::vector<std::string>{"table runs missing", "index runs_by_start missing",
                                      "index cells_by_cell_id missing", "view cell_results missing",
                                      "trigger series_points_cell_insert missing"}));
}

TEST(SchemaCheckTest, WrongColumnTypesAndMissingConstraintsAreNamed) {
  TestDb file("types");
  WriteStore(file.path());
  RewriteTable(file.path(), "cells", "cell_id TEXT NOT NULL", "cell_id INTEGER NOT NULL");
  RewriteTable(file.path(), "cells", "UNIQUE (run_id, cell_id)", "CHECK (1)");
  ExecSql(file.path(), "ALTER TABLE advice DROP COLUMN policy_toml");
  RewriteTable(file.path(), "goldens", "PRIMARY KEY (path, sha256)", "PRIMARY KEY (path)");
  EXPECT_EQ(Problems(file.path()),
            (std::vector<std::string>{
                "column cells.cell_id is INTEGER NOT NULL, expected TEXT NOT NULL",
                "UNIQUE (run_id, cell_id) on cells missing",
                "column goldens.sha256 is TEXT NOT NULL, expected TEXT NOT NULL PRIMARY KEY",
                "PRIMARY KEY (path, sha256) on goldens missing",
                "column advice.policy_toml missing",
            }));
}

TEST(SchemaCheckTest, DbCheckReportsEveryProblemOnOneLine) {
  TestDb file("check");
  WriteStore(file.path());
  ASSERT_TRUE(CheckDatabase(file.path()).ok());
  ExecSql(file.path(), "DROP TABLE runs; DROP TABLE goldens");
  StatusOr<DbCheckReport> report = CheckDatabase(file.path());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), Status::Code::kCorrupt);
  EXPECT_EQ(report.status().message(), file.path() + ": schema version " +
                                           std::to_string(kStoreSchemaVersion) +
                                           " is damaged: table runs missing; index "
                                           "runs_by_start missing; table goldens missing (3 problems; "
                                           "nothing was changed)");
}

TEST(SchemaCheckTest, OpenRefusesADamagedSchemaBeforeChangingTheFile) {
  TestDb file("refused");
  WriteStore(file.path());
  RewriteTable(file.path(), "cells", "UNIQUE (run_id, cell_id)", "CHECK (1)");
  ExecSql(file.path(), "PRAGMA journal_mode = DELETE");
  const std::string before = Bytes(file.path());
  for (ResultStore::OpenMode mode : {ResultStore::OpenMode::kCreate, ResultStore::OpenMode::kExisting}) {
    StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(file.path(), mode);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Status::Code::kCorrupt);
    EXPECT_NE(store.status().message().find("UNIQUE (run_id, cell_id) on cells missing"), std::string::npos);
  }
  EXPECT_EQ(Bytes(file.path()), before);  // not even switched to WAL
}

}  // namespace
}  // namespace framegate
