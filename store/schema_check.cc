#include "store/schema_check.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <functional>
#include <memory>

#include "store/schema.h"

namespace framegate {
namespace {

// A table, index, view or trigger of sqlite_master (SQLite's own objects left out).
struct SchemaObject {
  std::string type, name, table;
};

struct ColumnShape {
  std::string name;
  std::string declared;  // "TEXT NOT NULL", "INTEGER PRIMARY KEY", "(no type)"
};

struct IndexShape {
  std::string name, origin;  // origin: c (CREATE INDEX), u (UNIQUE), pk (PRIMARY KEY)
  bool unique = false;
  std::string columns;  // "(run_id, cell_id)"
};

std::string Upper(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return text;
}

// SQLite names are case-insensitive (ASCII).
bool SameName(const std::string& a, const std::string& b) { return Upper(a) == Upper(b); }

// Runs `sql` with `param` bound to ?1 (when not null) and calls `row` for each row.
Status ForEachRow(SqliteDb& db, const std::string& sql, const std::string* param,
                  const std::function<void(const SqliteStatement&)>& row) {
  StatusOr<SqliteStatement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  if (param != nullptr) stmt->Bind(1, *param);
  for (;;) {
    StatusOr<bool> more = stmt->Step();
    if (!more.ok()) return more.status();
    if (!*more) return Status::Ok();
    row(*stmt);
  }
}

StatusOr<std::vector<SchemaObject>> ReadObjects(SqliteDb& db) {
  std::vector<SchemaObject> objects;
  FG_RETURN_IF_ERROR(ForEachRow(db,
                                "SELECT type, name, tbl_name FROM sqlite_master WHERE type IN "
                                "('table', 'index', 'view', 'trigger') AND name NOT LIKE 'sqlite_%' "
                                "ORDER BY rowid",
                                nullptr, [&](const SqliteStatement& row) {
                                  objects.push_back({row.Text(0), row.Text(1), row.Text(2)});
                                }));
  return objects;
}

StatusOr<std::vector<ColumnShape>> ReadColumns(SqliteDb& db, const std::string& table) {
  std::vector<ColumnShape> columns;
  FG_RETURN_IF_ERROR(ForEachRow(db, "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", &table,
                                [&](const SqliteStatement& row) {
                                  std::string declared =
                                      row.Text(1).empty() ? "(no type)" : Upper(row.Text(1));
                                  if (row.Int(2) != 0) declared += " NOT NULL";
                                  if (row.Int(3) != 0) declared += " PRIMARY KEY";
                                  columns.push_back({row.Text(0), declared});
                                }));
  return columns;
}

StatusOr<std::vector<IndexShape>> ReadIndexes(SqliteDb& db, const std::string& table) {
  std::vector<IndexShape> indexes;
  FG_RETURN_IF_ERROR(ForEachRow(db, "SELECT name, \"unique\", origin FROM pragma_index_list(?)", &table,
                                [&](const SqliteStatement& row) {
                                  indexes.push_back({row.Text(0), row.Text(2), row.Int(1) != 0, ""});
                                }));
  for (IndexShape& index : indexes) {
    std::vector<std::string> names;
    FG_RETURN_IF_ERROR(ForEachRow(db, "SELECT name FROM pragma_index_info(?) ORDER BY seqno", &index.name,
                                  [&](const SqliteStatement& row) { names.push_back(row.Text(0)); }));
    index.columns = "(";
    for (size_t i = 0; i < names.size(); ++i) index.columns += (i ? ", " : "") + names[i];
    index.columns += ")";
  }
  return indexes;
}

// The problems of one table that exists in both: its columns and its uniqueness
// constraints (automatic indexes, which have no stable name to look up).
Status TableProblems(SqliteDb& expected, SqliteDb& actual, const std::string& table,
                     std::vector<std::string>* problems) {
  StatusOr<std::vector<ColumnShape>> want = ReadColumns(expected, table);
  StatusOr<std::vector<ColumnShape>> have = ReadColumns(actual, table);
  if (!want.ok()) return want.status();
  if (!have.ok()) return have.status();
  for (const ColumnShape& column : *want) {
    auto found = std::find_if(have->begin(), have->end(),
                              [&](const ColumnShape& c) { return SameName(c.name, column.name); });
    if (found == have->end()) {
      problems->push_back("column " + table + "." + column.name + " missing");
    } else if (found->declared != column.declared) {
      problems->push_back("column " + table + "." + column.name + " is " + found->declared + ", expected " +
                          column.declared);
    }
  }
  StatusOr<std::vector<IndexShape>> want_indexes = ReadIndexes(expected, table);
  StatusOr<std::vector<IndexShape>> have_indexes = ReadIndexes(actual, table);
  if (!want_indexes.ok()) return want_indexes.status();
  if (!have_indexes.ok()) return have_indexes.status();
  for (const IndexShape& index : *want_indexes) {
    if (index.origin == "c") continue;  // a named index: checked as an object
    const bool enforced = std::any_of(have_indexes->begin(), have_indexes->end(), [&](const IndexShape& i) {
      return i.unique && i.columns == index.columns;
    });
    if (!enforced) {
      problems->push_back((index.origin == "pk" ? "PRIMARY KEY " : "UNIQUE ") + index.columns + " on " +
                          table + " missing");
    }
  }
  return Status::Ok();
}

// A named index that exists in both: same table, columns and uniqueness.
Status NamedIndexProblems(SqliteDb& expected, SqliteDb& actual, const SchemaObject& index,
                          std::vector<std::string>* problems) {
  StatusOr<std::vector<IndexShape>> want = ReadIndexes(expected, index.table);
  StatusOr<std::vector<IndexShape>> have = ReadIndexes(actual, index.table);
  if (!want.ok()) return want.status();
  if (!have.ok()) return have.status();
  auto named = [&](const IndexShape& i) { return SameName(i.name, index.name); };
  auto wanted = std::find_if(want->begin(), want->end(), named);
  auto found = std::find_if(have->begin(), have->end(), named);
  assert(wanted != want->end());
  if (found == have->end()) {
    problems->push_back("index " + index.name + " is not on table " + index.table);
  } else if (found->columns != wanted->columns || found->unique != wanted->unique) {
    problems->push_back("index " + index.name + " is " + (found->unique ? "UNIQUE " : "") + found->columns +
                        ", expected " + (wanted->unique ? "UNIQUE " : "") + wanted->columns);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> SchemaProblems(SqliteDb& db, int version) {
  StatusOr<std::unique_ptr<SqliteDb>> expected = SqliteDb::Open(":memory:", SqliteDb::Mode::kReadWriteCreate);
  if (!expected.ok()) return expected.status();
  FG_RETURN_IF_ERROR(MigrateSchema(**expected, version));
  StatusOr<std::vector<SchemaObject>> want = ReadObjects(**expected);
  StatusOr<std::vector<SchemaObject>> have = ReadObjects(db);
  if (!want.ok()) return want.status();
  if (!have.ok()) return have.status();
  std::vector<std::string> problems;
  for (const SchemaObject& object : *want) {
    auto found = std::find_if(have->begin(), have->end(), [&](const SchemaObject& o) {
      return o.type == object.type && SameName(o.name, object.name);
    });
    if (found == have->end()) {
      problems.push_back(object.type + " " + object.name + " missing");
    } else if (object.type == "table") {
      FG_RETURN_IF_ERROR(TableProblems(**expected, db, object.name, &problems));
    } else if (object.type == "index") {
      FG_RETURN_IF_ERROR(NamedIndexProblems(**expected, db, object, &problems));
    }
  }
  return problems;
}

StatusOr<std::vector<std::string>> DanglingReferences(SqliteDb& db, const std::string& table) {
  struct Dangling {
    std::string child, parent, first_row;
    int64_t rows = 0;
  };
  std::vector<Dangling> found;
  const std::string sql = table.empty() ? "SELECT \"table\", rowid, parent FROM pragma_foreign_key_check"
                                        : "SELECT \"table\", rowid, parent FROM pragma_foreign_key_check(?)";
  FG_RETURN_IF_ERROR(ForEachRow(db, sql, table.empty() ? nullptr : &table, [&](const SqliteStatement& row) {
    auto same = std::find_if(found.begin(), found.end(), [&](const Dangling& d) {
      return d.child == row.Text(0) && d.parent == row.Text(2);
    });
    if (same == found.end()) {
      found.push_back({row.Text(0), row.Text(2), row.IsNull(1) ? "" : row.Text(1), 0});
      same = found.end() - 1;
    }
    ++same->rows;
  }));
  std::vector<std::string> lines;
  for (const Dangling& d : found) {
    lines.push_back(d.child + ": " + std::to_string(d.rows) + (d.rows == 1 ? " row refers" : " rows refer") +
                    " to a missing " + d.parent + " row" +
                    (d.first_row.empty() ? "" : " (first: rowid " + d.first_row + ")"));
  }
  return lines;
}

Status CheckSchema(SqliteDb& db, int version) {
  StatusOr<std::vector<std::string>> problems = SchemaProblems(db, version);
  if (!problems.ok()) return problems.status();
  if (problems->empty()) return Status::Ok();
  std::string list;
  for (const std::string& problem : *problems) list += (list.empty() ? "" : "; ") + problem;
  return Status::Corrupt(db.path() + ": schema version " + std::to_string(version) + " is damaged: " + list +
                         " (" + std::to_string(problems->size()) + " problem" +
                         (problems->size() == 1 ? "" : "s") + "; nothing was changed)");
}

}  // namespace framegate
