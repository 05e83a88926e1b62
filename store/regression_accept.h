// Re-baselining: `regressions --accept CELL|--all --since RUN --reason TEXT` records that a
// change is intended. From then on `regressions` judges the cell's series (every cell's,
// for --all) from RUN on only: RUN's level is the new baseline, the nights before it are
// no longer the reference. Stored in accepted_changes (schema: the regression-alerts
// migration) with who, when and why; never deleted (a later acceptance supersedes).
#pragma once

#include <string>
#include <vector>

#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

constexpr const char* kAcceptAllCells = "*";

struct Acceptance {
  std::string cell_id;  // a cell id, or kAcceptAllCells
  std::string since_run;
  std::string since_started_at;  // filled from the run when recorded
  std::string accepted_at;       // ISO 8601 UTC
  std::string accepted_by;
  std::string reason;
};

// Records `a` in one transaction. InvalidInput (naming the file) for an unknown run, a
// cell id no run has, or an empty reason. Returns it with since_started_at filled.
StatusOr<Acceptance> RecordAcceptance(SqliteDb& db, Acceptance a);
// Every acceptance, oldest first.
StatusOr<std::vector<Acceptance>> LoadAcceptances(SqliteDb& db);

// The judged start of each cell's series: the newest acceptance for the cell or for all.
class Acceptances {
 public:
  Acceptances() = default;
  explicit Acceptances(std::vector<Acceptance> all) : all_(std::move(all)) {}
  // started_at of the run the cell is judged from; "" when nothing was accepted.
  std::string Since(const std::string& cell_id) const;

 private:
  std::vector<Acceptance> all_;
};

}  // namespace framegate
