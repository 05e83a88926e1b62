// Rows of runs and devices, and the reads that assemble runs and histories (schema v2; runs.argv since v5).
// Internal to the store. Writers expect the caller's write transaction; readers may run
// inside SqliteDb::ReadTransaction for one consistent snapshot.
#pragma once

#include <string>
#include <vector>

#include "harness/run_record.h"
#include "harness/status.h"
#include "store/result_store.h"
#include "store/sqlite_db.h"

namespace framegate {

bool IsRunState(const std::string& state);  // running, finished, interrupted

// Inserts the run; for an existing run_id (a resume) only state and finished_at change.
Status UpsertRun(SqliteDb& db, const RunInfo& info);
// Inserts the devices the run does not have yet (by device string).
Status InsertDevices(SqliteDb& db, const std::string& run_id, const std::vector<DeviceInfo>& devices);
StatusOr<bool> RunExists(SqliteDb& db, const std::string& run_id);

// NotFound naming the file when the run does not exist.
StatusOr<RunInfo> ReadRunInfo(SqliteDb& db, const std::string& run_id);
StatusOr<std::vector<RunInfo>> ReadAllRuns(SqliteDb& db);  // oldest first
StatusOr<std::vector<DeviceInfo>> ReadDevices(SqliteDb& db, const std::string& run_id);
// Every cell of the run with all its fields, in recording order.
Status ReadRunCells(SqliteDb& db, const std::string& run_id, std::vector<CellResult>* cells);
// The cell's last `limit` results, oldest first, with samples (no probes).
Status ReadCellHistory(SqliteDb& db, const std::string& cell_id, int limit,
                       std::vector<HistoryPoint>* points);

}  // namespace framegate
