#include "store/regression_accept.h"

namespace framegate {

StatusOr<Acceptance> RecordAcceptance(SqliteDb& db, Acceptance a) {
  if (a.reason.empty()) return Status::InvalidInput(db.path() + ": --accept needs a --reason");
  Status status = db.WriteTransaction([&]() -> Status {
    StatusOr<SqliteStatement> run = db.Prepare("SELECT started_at FROM runs WHERE run_id = ?");
    if (!run.ok()) return run.status();
    StatusOr<bool> found = run->Bind(1, a.since_run).Step();
    if (!found.ok()) return found.status();
    if (!*found) return Status::InvalidInput(db.path() + ": --since '" + a.since_run + "' is not a run id");
    a.since_started_at = run->Text(0);
    if (a.cell_id != kAcceptAllCells) {
      StatusOr<SqliteStatement> cell = db.Prepare("SELECT 1 FROM cell_specs WHERE cell_id = ?");
      if (!cell.ok()) return cell.status();
      StatusOr<bool> known = cell->Bind(1, a.cell_id).Step();
      if (!known.ok()) return known.status();
      if (!*known) return Status::InvalidInput(db.path() + ": --accept '" + a.cell_id + "' is not a cell id");
    }
    StatusOr<SqliteStatement> insert = db.Prepare(
        "INSERT INTO accepted_changes (cell_id, since_run, since_started_at, accepted_at, accepted_by, "
        "reason) VALUES (?, ?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.status();
    return insert->Bind(1, a.cell_id)
        .Bind(2, a.since_run)
        .Bind(3, a.since_started_at)
        .Bind(4, a.accepted_at)
        .Bind(5, a.accepted_by)
        .Bind(6, a.reason)
        .Run();
  });
  if (!status.ok()) return status;
  return a;
}

StatusOr<std::vector<Acceptance>> LoadAcceptances(SqliteDb& db) {
  StatusOr<SqliteStatement> stmt = db.Prepare(
      "SELECT cell_id, since_run, since_started_at, accepted_at, accepted_by, reason FROM accepted_changes "
      "ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  std::vector<Acceptance> all;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return all;
    all.push_back({stmt->Text(0), stmt->Text(1), stmt->Text(2), stmt->Text(3), stmt->Text(4), stmt->Text(5)});
  }
}

std::string Acceptances::Since(const std::string& cell_id) const {
  std::string since;
  for (const Acceptance& a : all_) {
    if ((a.cell_id == cell_id || a.cell_id == kAcceptAllCells) && a.since_started_at > since) {
      since = a.since_started_at;
    }
  }
  return since;
}

}  // namespace framegate
