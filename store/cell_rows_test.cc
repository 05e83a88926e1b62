#include "store/cell_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "harness/cell.h"
#include "store/result_store.h"
#include "store/test_db.h"

namespace framegate {
namespace {

TEST(CellRowsTest, SelectColumnCountMatchesTheColumnsItNames) {
  const std::string columns = kCellSelectColumns;
  EXPECT_EQ(std::count(columns.begin(), columns.end(), ',') + 1, kCellSelectColumnCount) << columns;
}

// The store's columns come from the cell's field list: every field has a column in the
// table the rows read it from, so a field added to VisitCellFields without a schema
// migration fails here, not at a user's first run.
TEST(CellRowsTest, EveryCellFieldHasItsColumn) {
  TestDb db("fields");
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(db.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  store->reset();
  const auto column_names = [&](const std::string& table) {
    std::set<std::string> names;
    sqlite3* raw = nullptr;
    sqlite3_open(db.path().c_str(), &raw);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(raw, ("PRAGMA table_info(" + table + ")").c_str(), -1, &stmt, nullptr);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      names.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(raw);
    return names;
  };
  const std::set<std::string> specs = column_names("cell_specs"), cells = column_names("cells");
  int fields = 0;
  VisitCellFields(Cell{}, [&](const CellField& field, const auto&) {
    ++fields;
    const bool in_specs = field.role == CellField::kIdentity || field.name == std::string("size");
    EXPECT_EQ((in_specs ? specs : cells).count(field.name), 1u) << field.name;
    EXPECT_NE(std::string(kCellSelectColumns).find(std::string(".") + field.name), std::string::npos)
        << field.name;
  });
  EXPECT_EQ(fields, 13);
}

}  // namespace
}  // namespace framegate
