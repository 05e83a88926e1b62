#include "store/schema.h"

#include <algorithm>
#include <cassert>
#include <vector>

#include "store/packed_points.h"

namespace framegate {
namespace {

// Historical: the first schema, kept verbatim as the first migration step.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  git_sha TEXT NOT NULL DEFAULT '',
  framegate_version TEXT NOT NULL DEFAULT '',
  libtorch_version TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT '');
CREATE TABLE cells (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  cell_id TEXT NOT NULL,
  pipeline TEXT NOT NULL,
  device TEXT NOT NULL,
  policy TEXT NOT NULL,
  seed INTEGER NOT NULL,
  fault TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  generation_seconds TEXT NOT NULL DEFAULT '[]',
  UNIQUE (run_id, cell_id));
CREATE TABLE metrics (
  cell_row INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (cell_row, name)) WITHOUT ROWID;
)sql";

// Version 2's tables (version 3 adds series_points, version 4 columns and advice);
// docs/store.md explains every column and index.
constexpr const char* kSchemaV2Tables = R"sql(
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('running', 'finished', 'interrupted')),
  host TEXT NOT NULL DEFAULT '',
  git_sha TEXT NOT NULL DEFAULT '',
  framegate_version TEXT NOT NULL DEFAULT '',
  libtorch_version TEXT NOT NULL DEFAULT '',
  cuda_version TEXT NOT NULL DEFAULT '',
  blas TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT '',
  matrix_path TEXT NOT NULL DEFAULT '',
  matrix_sha256 TEXT NOT NULL DEFAULT '',
  command TEXT NOT NULL DEFAULT '',
  shard TEXT NOT NULL DEFAULT '');
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE devices (
  run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  device TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  capability TEXT NOT NULL DEFAULT '',
  memory_bytes INTEGER NOT NULL DEFAULT 0,
  driver TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, device)) WITHOUT ROWID;
CREATE TABLE cell_specs (
  cell_id TEXT PRIMARY KEY,
  pipeline TEXT NOT NULL,
  size TEXT NOT NULL,
  device TEXT NOT NULL,
  policy TEXT NOT NULL,
  seed INTEGER NOT NULL,
  fault TEXT NOT NULL,
  sampler TEXT NOT NULL,
  steps INTEGER NOT NULL,
  guidance REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE cells (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL REFERENCES cell_specs (cell_id),
  model_dir TEXT NOT NULL DEFAULT '',
  tolerance TEXT NOT NULL DEFAULT '',
  xfail TEXT NOT NULL DEFAULT '',
  requires TEXT NOT NULL DEFAULT '[]',
  policy_used TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  error_class TEXT NOT NULL DEFAULT '',
  golden TEXT NOT NULL DEFAULT '',
  artifacts_dir TEXT NOT NULL DEFAULT '',
  repro TEXT NOT NULL DEFAULT '',
  latency_median_s REAL,
  first_nonfinite_step INTEGER NOT NULL DEFAULT -1,
  decoded_nan INTEGER NOT NULL DEFAULT 0,
  decoded_inf INTEGER NOT NULL DEFAULT 0,
  frame_defects TEXT NOT NULL DEFAULT '',
  defect TEXT NOT NULL DEFAULT 'none',
  defect_frames INTEGER NOT NULL DEFAULT 0,
  nonfinite_found INTEGER NOT NULL DEFAULT 0,
  nonfinite_step INTEGER NOT NULL DEFAULT 0,
  nonfinite_module TEXT NOT NULL DEFAULT '',
  nonfinite_nan INTEGER NOT NULL DEFAULT 0,
  nonfinite_inf INTEGER NOT NULL DEFAULT 0,
  warmup INTEGER NOT NULL DEFAULT 0,
  load_seconds REAL,
  decode_seconds REAL,
  peak_rss_bytes INTEGER NOT NULL DEFAULT 0,
  peak_device_bytes INTEGER NOT NULL DEFAULT 0,
  UNIQUE (run_id, cell_id));
CREATE INDEX cells_by_cell_id ON cells (cell_id);
CREATE TABLE metrics (
  cell_row INTEGER PRIMARY KEY REFERENCES cells (id) ON DELETE CASCADE,
  min_psnr REAL,
  mean_ssim REAL,
  min_ssim REAL,
  max_abs REAL,
  rel_l2 REAL,
  temporal_rel_l2 REAL,
  latent_cosine REAL,
  has_fp64_ref INTEGER NOT NULL DEFAULT 0,
  fp64_error_ratio REAL);
CREATE TABLE samples (
  cell_row INTEGER NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  idx INTEGER NOT NULL,
  value,
  PRIMARY KEY (cell_row, kind, idx)) WITHOUT ROWID;
CREATE TABLE probes (
  cell_row INTEGER NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  module TEXT NOT NULL,
  dtype TEXT NOT NULL,
  absmax REAL,
  overflow_fraction REAL,
  underflow_fraction REAL,
  headroom_bits REAL,
  PRIMARY KEY (cell_row, idx)) WITHOUT ROWID;
CREATE TABLE goldens (
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  config TEXT NOT NULL,
  provenance TEXT NOT NULL DEFAULT '{}',
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (path, sha256)) WITHOUT ROWID;
CREATE VIEW cell_results AS
  SELECT c.id AS cell_row, c.run_id, r.started_at, r.git_sha, r.host, r.tags, c.cell_id,
         s.pipeline, s.device, d.name AS device_name, s.policy, c.policy_used, s.seed,
         s.fault, s.sampler, s.steps, s.guidance, c.status, c.reason, c.error_class,
         c.latency_median_s, m.min_psnr, m.mean_ssim, m.min_ssim, m.max_abs, m.rel_l2,
         m.temporal_rel_l2, m.latent_cosine, m.fp64_error_ratio
  FROM cells c
  JOIN runs r ON r.run_id = c.run_id
  JOIN cell_specs s ON s.cell_id = c.cell_id
  LEFT JOIN devices d ON d.run_id = c.run_id AND d.device = s.device
  LEFT JOIN metrics m ON m.cell_row = c.id;
)sql";

// v1 -> v2: move the v1 tables aside, create v2, copy every row over (identity to
// cell_specs, metric rows pivoted to columns, the JSON timing repeats to samples), drop v1.
constexpr const char* kMigrateV1ToV2 = R"sql(
ALTER TABLE runs RENAME TO v1_runs;
ALTER TABLE cells RENAME TO v1_cells;
ALTER TABLE metrics RENAME TO v1_metrics;
)sql";
constexpr const char* kCopyV1ToV2 = R"sql(
INSERT INTO runs (run_id, started_at, finished_at, state, host, git_sha, framegate_version,
                  libtorch_version, tags)
  SELECT run_id, started_at, finished_at,
         CASE WHEN state IN ('running', 'finished', 'interrupted') THEN state
              ELSE 'interrupted' END,
         host, git_sha, framegate_version, libtorch_version, tags FROM v1_runs;
INSERT OR IGNORE INTO cell_specs (cell_id, pipeline, size, device, policy, seed, fault,
                                  sampler, steps, guidance)
  SELECT cell_id, pipeline,
         CASE WHEN pipeline LIKE 'reference:%' THEN substr(pipeline, 11) ELSE 'tiny' END,
         device, policy, seed, fault, '', 0, 0.0 FROM v1_cells ORDER BY id;
INSERT INTO cells (id, run_id, cell_id, model_dir, policy_used, status, reason)
  SELECT id, run_id, cell_id,
         CASE WHEN pipeline LIKE 'model:%' THEN substr(pipeline, 7) ELSE '' END,
         policy, status, reason FROM v1_cells;
INSERT INTO metrics (cell_row, min_psnr, mean_ssim, min_ssim, max_abs, rel_l2,
                     temporal_rel_l2, latent_cosine, has_fp64_ref, fp64_error_ratio)
  SELECT cell_row,
         max(CASE WHEN name = 'min_psnr' THEN value END),
         max(CASE WHEN name = 'mean_ssim' THEN value END),
         max(CASE WHEN name = 'min_ssim' THEN value END),
         max(CASE WHEN name = 'max_abs' THEN value END),
         max(CASE WHEN name = 'rel_l2' THEN value END),
         max(CASE WHEN name = 'temporal_rel_l2' THEN value END),
         max(CASE WHEN name = 'latent_cosine' THEN value END),
         max(name = 'fp64_error_ratio'),
         max(CASE WHEN name = 'fp64_error_ratio' THEN value END)
  FROM v1_metrics WHERE cell_row IN (SELECT id FROM v1_cells) GROUP BY cell_row;
INSERT INTO samples (cell_row, kind, idx, value)
  SELECT c.id, 'generation_seconds', j.key, j.value
  FROM v1_cells c, json_each(c.generation_seconds) j WHERE json_valid(c.generation_seconds);
DROP TABLE v1_metrics;
DROP TABLE v1_cells;
DROP TABLE v1_runs;
)sql";

// v2 -> v3: series_points, the narrow copy of each cell result that `regressions` scans
// (status, latency and three accuracy metrics, clustered by run), filled from cells and
// metrics in key order. Triggers keep it in step with cells and metrics whoever writes
// them (the store, a merge, an edit in the sqlite3 shell).
constexpr const char* kMigrateV2ToV3 = R"sql(
CREATE TABLE series_points (
  run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  status TEXT NOT NULL,
  latency_median_s REAL,
  min_psnr REAL,
  mean_ssim REAL,
  rel_l2 REAL,
  PRIMARY KEY (run_id, cell_id)) WITHOUT ROWID;
INSERT INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr, mean_ssim,
                           rel_l2)
  SELECT c.run_id, c.cell_id, c.status, c.latency_median_s, m.min_psnr, m.mean_ssim, m.rel_l2
  FROM cells c LEFT JOIN metrics m ON m.cell_row = c.id ORDER BY c.run_id, c.cell_id;
CREATE TRIGGER series_points_cell_insert AFTER INSERT ON cells BEGIN
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
CREATE TRIGGER series_points_cell_update
  AFTER UPDATE OF run_id, cell_id, status, latency_median_s ON cells BEGIN
  DELETE FROM series_points WHERE run_id = old.run_id AND cell_id = old.cell_id;
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
)sql";
// The triggers that follow deleted cells and metrics writes into series_points (since
// version 3, unchanged by version 10, which recreates them after rebuilding the table).
constexpr const char* kSeriesPointsFollowers = R"sql(
CREATE TRIGGER series_points_cell_delete AFTER DELETE ON cells BEGIN
  DELETE FROM series_points WHERE run_id = old.run_id AND cell_id = old.cell_id;
END;
CREATE TRIGGER series_points_metrics_insert AFTER INSERT ON metrics BEGIN
  UPDATE series_points SET min_psnr = new.min_psnr, mean_ssim = new.mean_ssim,
                           rel_l2 = new.rel_l2
    WHERE (run_id, cell_id) = (SELECT run_id, cell_id FROM cells WHERE id = new.cell_row);
END;
CREATE TRIGGER series_points_metrics_update
  AFTER UPDATE OF min_psnr, mean_ssim, rel_l2 ON metrics BEGIN
  UPDATE series_points SET min_psnr = new.min_psnr, mean_ssim = new.mean_ssim,
                           rel_l2 = new.rel_l2
    WHERE (run_id, cell_id) = (SELECT run_id, cell_id FROM cells WHERE id = new.cell_row);
END;
CREATE TRIGGER series_points_metrics_delete AFTER DELETE ON metrics BEGIN
  UPDATE series_points SET min_psnr = NULL, mean_ssim = NULL, rel_l2 = NULL
    WHERE (run_id, cell_id) = (SELECT run_id, cell_id FROM cells WHERE id = old.cell_row);
END;
)sql";

// v3 -> v4: what model packages and the precision advisor add to a result. New cells
// columns (the cell's policy file, where an ERROR was raised, the op of the first
// non-finite value, what graph instrumentation saw), each probe's SQNR against the cell's
// FP32 run (NULL: not measured), the advisor's answer (one row per advised cell, its
// islands and runs as JSON), and the cell_results view with the module columns. Every
// statement is a schema change only: no row is rewritten.
constexpr const char* kMigrateV3ToV4 = R"sql(
ALTER TABLE cells ADD COLUMN policy_file TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN error_module TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN error_op TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN nonfinite_op TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN observed TEXT NOT NULL DEFAULT '';
ALTER TABLE probes ADD COLUMN sqnr_db REAL;
CREATE TABLE advice (
  cell_row INTEGER PRIMARY KEY REFERENCES cells (id) ON DELETE CASCADE,
  status_before TEXT NOT NULL,
  status_after TEXT NOT NULL,
  islands TEXT NOT NULL DEFAULT '[]',
  policy_name TEXT NOT NULL DEFAULT '',
  policy_toml TEXT NOT NULL DEFAULT '',
  fp32_weight_fraction REAL,
  runs TEXT NOT NULL DEFAULT '[]');
DROP VIEW cell_results;
CREATE VIEW cell_results AS
  SELECT c.id AS cell_row, c.run_id, r.started_at, r.git_sha, r.host, r.tags, c.cell_id,
         s.pipeline, s.device, d.name AS device_name, s.policy, c.policy_used, s.seed,
         s.fault, s.sampler, s.steps, s.guidance, c.status, c.reason, c.error_class,
         c.error_module, c.error_op, c.nonfinite_module, c.nonfinite_op,
         c.latency_median_s, m.min_psnr, m.mean_ssim, m.min_ssim, m.max_abs, m.rel_l2,
         m.temporal_rel_l2, m.latent_cosine, m.fp64_error_ratio
  FROM cells c
  JOIN runs r ON r.run_id = c.run_id
  JOIN cell_specs s ON s.cell_id = c.cell_id
  LEFT JOIN devices d ON d.run_id = c.run_id AND d.device = s.device
  LEFT JOIN metrics m ON m.cell_row = c.id;
)sql";

// v4 -> v5: the run's options as given (a JSON array of the words after `framegate run`),
// so that `--resume RUN_ID` restores the run it resumes. Older runs keep '[]'.
constexpr const char* kMigrateV4ToV5 = R"sql(
ALTER TABLE runs ADD COLUMN argv TEXT NOT NULL DEFAULT '[]';
)sql";

// v5 -> v6: which bound judged each cell (runners/cell_bound.h); older cells keep '' (their
// policy's profile judged them then).
constexpr const char* kMigrateV5ToV6 = R"sql(
ALTER TABLE cells ADD COLUMN judged_by TEXT NOT NULL DEFAULT '';
)sql";

// v6 -> v7: where a finite failure's error is made (FAIL, BROKEN_FRAMES): the op with the
// largest isolated error against what its precision predicts (harness/cell_result.h
// ErrorProducer). NULL errors: not attempted; '' module: not found (the note says why).
constexpr const char* kMigrateV6ToV7 = R"sql(
ALTER TABLE cells ADD COLUMN producer_module TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN producer_op TEXT NOT NULL DEFAULT '';
ALTER TABLE cells ADD COLUMN producer_error REAL;
ALTER TABLE cells ADD COLUMN producer_predicted REAL;
ALTER TABLE cells ADD COLUMN producer_note TEXT NOT NULL DEFAULT '';
)sql";

// v7 -> v8, the regression-alerts migration (issue 24):
// runs.fingerprint, the run's environment beyond its columns (JSON object: build flags,
// compiler, CPU ISA, ...; older runs '{}'), and accepted_changes, the re-baselinings of
// `regressions --accept` (cell_id '*' = every cell) with who, when and why.
constexpr const char* kMigrateV7ToV8 = R"sql(
ALTER TABLE runs ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '{}';
CREATE TABLE accepted_changes (
  id INTEGER PRIMARY KEY,
  cell_id TEXT NOT NULL,
  since_run TEXT NOT NULL,
  since_started_at TEXT NOT NULL,
  accepted_at TEXT NOT NULL,
  accepted_by TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '');
)sql";

// v8 -> v9, hardware qualification (issue 23): one row per device a `framegate qualify`
// run judged, its verdict and reasons (JSON, harness/qualification_json.h); the view
// device_verdicts adds the run's start, git sha and host, for "every verdict of this
// device over time". Schema only: no row is rewritten.
constexpr const char* kMigrateV8ToV9 = R"sql(
CREATE TABLE qualifications (
  run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  device TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT '',
  verdict TEXT NOT NULL CHECK (verdict IN ('PASS', 'DEGRADED', 'FAULTY')),
  cells INTEGER NOT NULL DEFAULT 0,
  repeats INTEGER NOT NULL DEFAULT 0,
  seconds REAL,
  reasons TEXT NOT NULL DEFAULT '[]',
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (run_id, device)) WITHOUT ROWID;
CREATE INDEX qualifications_by_device ON qualifications (device);
CREATE VIEW device_verdicts AS
  SELECT q.device, r.started_at, q.run_id, r.git_sha, r.host, q.kind, q.verdict, q.cells,
         q.repeats, q.seconds, q.reasons, q.recorded_at
  FROM qualifications q JOIN runs r ON r.run_id = q.run_id;
)sql";

// v9 -> v10: series_points.cell_row, the cell's row in `cells` (the order a run recorded
// its cells: the order they ran in, near enough). `regressions` takes a cell's load for
// its environment test from the cells recorded just before and after it (regressions.cc,
// SetLoadFactors). The table is rebuilt in key order rather than altered and updated in
// place: on the 7.3M-cell benchmark year an in-place UPDATE left its pages split and the
// 14-day `regressions` query 15% slower until a VACUUM. Its triggers are dropped first
// (a rename would re-parse them) and recreated, the two that write points copying cell_row.
constexpr const char* kMigrateV9ToV10 = R"sql(
DROP TRIGGER series_points_cell_insert;
DROP TRIGGER series_points_cell_update;
DROP TRIGGER series_points_cell_delete;
DROP TRIGGER series_points_metrics_insert;
DROP TRIGGER series_points_metrics_update;
DROP TRIGGER series_points_metrics_delete;
ALTER TABLE series_points RENAME TO series_points_v9;
CREATE TABLE series_points (
  run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  status TEXT NOT NULL,
  latency_median_s REAL,
  min_psnr REAL,
  mean_ssim REAL,
  rel_l2 REAL,
  cell_row INTEGER,
  PRIMARY KEY (run_id, cell_id)) WITHOUT ROWID;
INSERT INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr, mean_ssim,
                           rel_l2, cell_row)
  SELECT p.run_id, p.cell_id, p.status, p.latency_median_s, p.min_psnr, p.mean_ssim, p.rel_l2, c.id
  FROM series_points_v9 p LEFT JOIN cells c ON c.run_id = p.run_id AND c.cell_id = p.cell_id
  ORDER BY p.run_id, p.cell_id;
DROP TABLE series_points_v9;
CREATE TRIGGER series_points_cell_insert AFTER INSERT ON cells BEGIN
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2, cell_row)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2, new.id
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
CREATE TRIGGER series_points_cell_update
  AFTER UPDATE OF run_id, cell_id, status, latency_median_s ON cells BEGIN
  DELETE FROM series_points WHERE run_id = old.run_id AND cell_id = old.cell_id;
  INSERT OR REPLACE INTO series_points (run_id, cell_id, status, latency_median_s, min_psnr,
                                        mean_ssim, rel_l2, cell_row)
    SELECT new.run_id, new.cell_id, new.status, new.latency_median_s, m.min_psnr,
           m.mean_ssim, m.rel_l2, new.id
    FROM (SELECT 1) LEFT JOIN metrics m ON m.cell_row = new.id;
END;
)sql";

// v10 -> v11: packed_points, each run's series_points in one blob (store/packed_points.h),
// which `regressions` reads instead of the run's rows while it equals them; the triggers
// drop a run's blob when any of its points changes. Each is one DELETE by key: an IN list
// of old and new run made inserts 34% dearer (callgrind), these 16%, and the trigger for a
// point moved to another run is only coded into UPDATEs that set run_id. The step then
// packs every run.
constexpr const char* kMigrateV10ToV11 = R"sql(
CREATE TABLE packed_points (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
  points BLOB NOT NULL);
CREATE TRIGGER packed_points_point_insert AFTER INSERT ON series_points BEGIN
  DELETE FROM packed_points WHERE run_id = new.run_id;
END;
CREATE TRIGGER packed_points_point_update AFTER UPDATE ON series_points BEGIN
  DELETE FROM packed_points WHERE run_id = old.run_id;
END;
CREATE TRIGGER packed_points_point_move AFTER UPDATE OF run_id ON series_points BEGIN
  DELETE FROM packed_points WHERE run_id = new.run_id;
END;
CREATE TRIGGER packed_points_point_delete AFTER DELETE ON series_points BEGIN
  DELETE FROM packed_points WHERE run_id = old.run_id;
END;
)sql";

// v11 -> v12: the advice's note (why no island, or where the islands do not hold) and
// whether its islands were verified (at other seeds, with FP16 headroom); older advice
// reads as verified with no note, as it was shown. Schema only.
constexpr const char* kMigrateV11ToV12 = R"sql(
ALTER TABLE advice ADD COLUMN note TEXT NOT NULL DEFAULT '';
ALTER TABLE advice ADD COLUMN verified INTEGER NOT NULL DEFAULT 1;
)sql";

// cells.latency_median_s is derived from the generation_seconds samples.
Status FillLatencyMedians(SqliteDb& db) {
  StatusOr<SqliteStatement> read = db.Prepare(
      "SELECT cell_row, value FROM samples WHERE kind = 'generation_seconds' "
      "ORDER BY cell_row, idx");
  StatusOr<SqliteStatement> write = db.Prepare("UPDATE cells SET latency_median_s = ? WHERE id = ?");
  if (!read.ok()) return read.status();
  if (!write.ok()) return write.status();
  int64_t current = -1;
  std::vector<double> values;
  auto flush = [&]() -> Status {
    if (values.empty()) return Status::Ok();
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    const double median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    values.clear();
    return write->Bind(1, median).Bind(2, current).Run();
  };
  for (;;) {
    StatusOr<bool> row = read->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (read->Int(0) != current) {
      FG_RETURN_IF_ERROR(flush());
      current = read->Int(0);
    }
    values.push_back(read->Real(1));
  }
  return flush();
}

Status MigrateV0ToV1(SqliteDb& db) { return db.Exec(kSchemaV1); }

Status MigrateV1ToV2(SqliteDb& db) {
  FG_RETURN_IF_ERROR(db.Exec(kMigrateV1ToV2));
  FG_RETURN_IF_ERROR(db.Exec(kSchemaV2Tables));
  FG_RETURN_IF_ERROR(db.Exec(kCopyV1ToV2));
  return FillLatencyMedians(db);
}

Status MigrateV2ToV3(SqliteDb& db) {
  FG_RETURN_IF_ERROR(db.Exec(kMigrateV2ToV3));
  return db.Exec(kSeriesPointsFollowers);
}

Status MigrateV3ToV4(SqliteDb& db) { return db.Exec(kMigrateV3ToV4); }

Status MigrateV4ToV5(SqliteDb& db) { return db.Exec(kMigrateV4ToV5); }

Status MigrateV5ToV6(SqliteDb& db) { return db.Exec(kMigrateV5ToV6); }

Status MigrateV6ToV7(SqliteDb& db) { return db.Exec(kMigrateV6ToV7); }

Status MigrateV7ToV8(SqliteDb& db) { return db.Exec(kMigrateV7ToV8); }

Status MigrateV8ToV9(SqliteDb& db) { return db.Exec(kMigrateV8ToV9); }

Status MigrateV9ToV10(SqliteDb& db) {
  FG_RETURN_IF_ERROR(db.Exec(kMigrateV9ToV10));
  return db.Exec(kSeriesPointsFollowers);
}

Status MigrateV10ToV11(SqliteDb& db) {
  FG_RETURN_IF_ERROR(db.Exec(kMigrateV10ToV11));
  return PackAllRuns(db);
}

Status MigrateV11ToV12(SqliteDb& db) { return db.Exec(kMigrateV11ToV12); }

// kSteps[v] takes a database from version v to v + 1.
using MigrationStep = Status (*)(SqliteDb&);
constexpr MigrationStep kSteps[] = {MigrateV0ToV1, MigrateV1ToV2,  MigrateV2ToV3,   MigrateV3ToV4,
                                    MigrateV4ToV5, MigrateV5ToV6,  MigrateV6ToV7,   MigrateV7ToV8,
                                    MigrateV8ToV9, MigrateV9ToV10, MigrateV10ToV11, MigrateV11ToV12};
static_assert(sizeof(kSteps) / sizeof(kSteps[0]) == kStoreSchemaVersion,
              "one migration step per schema version");

Status NewerVersionError(const SqliteDb& db, int version) {
  return Status::Unsupported(db.path() + ": schema version " + std::to_string(version) +
                             " is newer than this framegate's (" + std::to_string(kStoreSchemaVersion) +
                             "); use the framegate that wrote it or a newer one");
}

}  // namespace

StatusOr<int> ReadSchemaVersion(SqliteDb& db) {
  // One statement, so one snapshot: read apart, another process's first migration could
  // commit between the version (0) and the table count (> 0).
  StatusOr<SqliteStatement> read = db.Prepare(
      "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)");
  if (!read.ok()) return read.status();
  StatusOr<bool> row = read->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal(db.path() + ": no row reading the schema version");
  const int64_t version = read->Int(0);
  const int64_t tables = read->Int(1);
  if (version < 0) {
    return Status::Corrupt(db.path() + ": schema version " + std::to_string(version) +
                           " is not a framegate schema version (0.." + std::to_string(kStoreSchemaVersion) +
                           ")");
  }
  if (version == 0 && tables > 0) {
    return Status::Corrupt(db.path() +
                           ": an SQLite database but not framegate's (tables but no "
                           "schema version)");
  }
  return static_cast<int>(version);
}

Status MigrateSchema(SqliteDb& db, int target) {
  if (target < 0 || target > kStoreSchemaVersion) {
    return Status::Internal(db.path() + ": no schema version " + std::to_string(target) + " to migrate to");
  }
  StatusOr<int> before = ReadSchemaVersion(db);
  if (!before.ok()) return before.status();
  if (*before > kStoreSchemaVersion) return NewerVersionError(db, *before);
  if (*before >= target) return Status::Ok();
  return db.WriteTransaction([&]() -> Status {
    StatusOr<int> version = ReadSchemaVersion(db);  // another process may have migrated
    if (!version.ok()) return version.status();
    if (*version > kStoreSchemaVersion) return NewerVersionError(db, *version);
    assert(*version >= 0);  // ReadSchemaVersion refuses a negative one
    for (int v = *version; v < target; ++v) {
      Status step = kSteps[v](db);
      if (!step.ok()) {
        return step.WithContext("migrating schema " + std::to_string(v) + " -> " + std::to_string(v + 1));
      }
    }
    return db.Exec("PRAGMA user_version = " + std::to_string(target));
  });
}

}  // namespace framegate
