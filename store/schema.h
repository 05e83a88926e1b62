// The store's schema, versioned with PRAGMA user_version, and its migrations.
//   version 0: an empty file
//   version 1: runs, cells (one denormalized row, timing repeats as a JSON array),
//              metrics as (cell_row, name, value) rows
//   version 2: runs with full provenance, devices, cell_specs, cells, typed metrics,
//              samples, probes, goldens, the cell_results view
//   version 3: series_points, a narrow per-run copy of each result's status, latency and
//              accuracy that `regressions` scans, kept in step by triggers (docs/store.md)
//   version 4: cells.policy_file, error_module, error_op, nonfinite_op, observed;
//              probes.sqnr_db; advice (the precision advisor's answer per cell); the
//              cell_results view with the error and non-finite module columns
//   version 5: runs.argv, the run's options as a JSON array of strings (what --resume
//              restores)
//   version 6: cells.judged_by, the bound that judged the cell ("profile bf16",
//              "calibration FILE (model sha256 ...)": runners/cell_bound.h)
//   version 7: cells.producer_module, producer_op, producer_error, producer_predicted,
//              producer_note: where a finite failure's error is made
//   version 8: runs.fingerprint (the run's environment
//              as JSON) and accepted_changes (`regressions --accept`)
//   version 9: qualifications (one `framegate qualify` verdict per run and device) and
//              the device_verdicts view
//   version 10: series_points.cell_row, the order a run recorded its cells in
//   version 11: packed_points, each run's series_points in one blob that `regressions`
//               reads instead of the rows (store/packed_points.h)
// A new file goes through every step from 0, so a fresh database and a migrated one are
// the same schema by construction.
#pragma once

#include <string>

#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

constexpr int kStoreSchemaVersion = 12;

// The version stored in the file, >= 0. Corrupt (naming the file) when it is not an
// SQLite database, an SQLite database with tables but no framegate version (someone
// else's), or a negative version (naming it). A version above kStoreSchemaVersion is
// returned: the caller refuses it as newer.
StatusOr<int> ReadSchemaVersion(SqliteDb& db);

// Brings the database to `target` (<= kStoreSchemaVersion) inside one write transaction,
// step by step from its current version; a no-op when it is there already. Unsupported,
// naming the file, when the file's version is newer than kStoreSchemaVersion. Safe when
// several processes open the same new file at once: the version is read again inside the
// transaction. Precondition: foreign key enforcement is off (SQLite ignores that pragma
// inside a transaction, and migrations drop tables).
Status MigrateSchema(SqliteDb& db, int target = kStoreSchemaVersion);

// The names of the sample kinds kept in `samples.kind`.
namespace sample_kind {
constexpr const char* kGenerationSeconds = "generation_seconds";  // one per timed repeat
constexpr const char* kStepSeconds = "step_seconds";              // per sampler step
constexpr const char* kFramePsnr = "frame_psnr";                  // per frame, dB
constexpr const char* kFrameSsim = "frame_ssim";                  // per frame
constexpr const char* kStepNan = "step_nan";                      // NaN count per step
constexpr const char* kStepInf = "step_inf";                      // Inf count per step
}  // namespace sample_kind

}  // namespace framegate
