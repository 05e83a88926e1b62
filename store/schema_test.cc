#include "store/schema.h"

#include <cmath>

#include <gtest/gtest.h>

#include "store/db_check.h"
#include "store/regressions.h"
#include "store/result_store.h"
#include "store/test_db.h"

namespace framegate {
namespace {

// A database as framegate's first schema wrote it, with rows in every v1 table.
void WriteVersion1File(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(MigrateSchema(**db, 1).ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
    INSERT INTO runs VALUES ('v1-run', '2023-01-01T00:00:00Z', '2023-01-01T01:00:00Z',
                             'finished', 'host-old', 'abcdef', '0.0.9', '1.12.1', 'nightly');
    INSERT INTO cells VALUES (1, 'v1-run', 'aaaa000011112222', 'reference:tiny', 'cpu', 'fp32',
                              0, '', 'PASS', '', '[0.5, 0.7, 0.6]');
    INSERT INTO cells VALUES (2, 'v1-run', 'bbbb000011112222', 'model:mymodel', 'cpu', 'bf16',
                              1, 'f1', 'FAIL', 'min_psnr 20 < 30', '[]');
    INSERT INTO metrics VALUES (1, 'min_psnr', 40.0), (1, 'rel_l2', 0.01),
                               (1, 'fp64_error_ratio', 1.1), (2, 'min_psnr', 20.0);
  )sql")
                  .ok());
}

// A database as schema version 3 wrote it: a run, an ERROR cell with a probe.
void WriteVersion3File(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(MigrateSchema(**db, 3).ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
    INSERT INTO runs (run_id, started_at, state) VALUES ('v3-run', '2024-01-01T00:00:00Z',
                                                         'finished');
    INSERT INTO cell_specs VALUES ('cccc000011112222', 'reference:tiny', 'tiny', 'cpu', 'fp8',
                                   0, '', '', 0, 0.0);
    INSERT INTO cells (id, run_id, cell_id, policy_used, status, reason, error_class)
      VALUES (1, 'v3-run', 'cccc000011112222', 'fp8', 'ERROR', 'dtype_mismatch: Half',
              'dtype_mismatch');
    INSERT INTO probes VALUES (1, 0, 'blocks.0.ff', 'float16', 100.0, 0.0, 0.0, 9.3);
  )sql")
                  .ok());
}

std::string SchemaText(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  StatusOr<SqliteStatement> stmt =
      (*db)->Prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name");
  std::string text;
  while (*stmt->Step()) text += stmt->Text(0) + " " + stmt->Text(1) + " " + stmt->Text(2) + "\n";
  return text;
}

TEST(SchemaTest, MigratesAVersion1DatabaseKeepingEveryRow) {
  TestDb file("v1");
  WriteVersion1File(file.path());
  ASSERT_EQ(QueryInt(file.path(), "PRAGMA user_version"), 1);

  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  StatusOr<RunRecord> run = (*store)->LoadRun("v1-run");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->info.state, "finished");
  EXPECT_EQ(run->info.host, "host-old");
  EXPECT_EQ(run->info.tags, "nightly");
  ASSERT_EQ(run->cells.size(), 2u);
  const CellResult& pass = run->cells[0];
  EXPECT_EQ(pass.status, CellStatus::kPass);
  EXPECT_EQ(pass.cell.size, "tiny");
  EXPECT_EQ(pass.timings.generation_seconds, (std::vector<double>{0.5, 0.7, 0.6}));
  ASSERT_TRUE(pass.metrics.has_value());
  EXPECT_DOUBLE_EQ(pass.metrics->video.min_psnr, 40.0);
  EXPECT_DOUBLE_EQ(pass.metrics->video.rel_l2, 0.01);
  EXPECT_TRUE(std::isnan(pass.metrics->video.mean_ssim));  // v1 had no mean_ssim row
  ASSERT_TRUE(pass.metrics->fp64_error_ratio.has_value());
  EXPECT_DOUBLE_EQ(*pass.metrics->fp64_error_ratio, 1.1);
  const CellResult& fail = run->cells[1];
  EXPECT_EQ(fail.status, CellStatus::kFail);
  EXPECT_EQ(fail.reason, "min_psnr 20 < 30");
  EXPECT_EQ(fail.cell.model_dir, "mymodel");
  EXPECT_EQ(fail.cell.fault, "f1");
  EXPECT_EQ(fail.cell.policy, "bf16");
  EXPECT_FALSE(fail.metrics->fp64_error_ratio.has_value());
  // The derived latency column is filled from the migrated repeats.
  StatusOr<std::vector<HistoryPoint>> history = (*store)->CellHistory("aaaa000011112222", 5);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_DOUBLE_EQ((*history)[0].latency_median_s, 0.6);
  // v2 -> v3 filled series_points from cells and metrics.
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points"), 2);
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT count(*) FROM series_points WHERE cell_id = "
                     "'aaaa000011112222' AND status = 'PASS' AND min_psnr = 40 "
                     "AND rel_l2 = 0.01 AND latency_median_s = 0.6"),
            1);
  // v3 -> v4 added the advice table (empty) and the new columns (defaults).
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM advice"), 0);
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT count(*) FROM cells WHERE policy_file = '' AND "
                     "error_module = '' AND error_op = '' AND nonfinite_op = '' "
                     "AND observed = ''"),
            2);
  EXPECT_FALSE(fail.advice.has_value());
  EXPECT_EQ(fail.error_module, "");
  // v4 -> v5: a run from before stored options has none (resume falls back to its shard).
  EXPECT_TRUE(run->info.argv.empty());
}

TEST(SchemaTest, MigratesAVersion3DatabaseToTheCurrentVersion) {
  TestDb file("v3");
  WriteVersion3File(file.path());
  ASSERT_EQ(QueryInt(file.path(), "PRAGMA user_version"), 3);
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  StatusOr<RunRecord> run = (*store)->LoadRun("v3-run");
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->cells.size(), 1u);
  const CellResult& error = run->cells[0];
  EXPECT_EQ(error.status, CellStatus::kError);
  EXPECT_EQ(error.error_class, "dtype_mismatch");
  EXPECT_EQ(error.error_module, "");
  EXPECT_EQ(error.observed, "");
  EXPECT_FALSE(error.advice.has_value());
  ASSERT_EQ(error.probes.size(), 1u);
  EXPECT_DOUBLE_EQ(error.probes[0].headroom_bits, 9.3);
  EXPECT_TRUE(std::isnan(error.probes[0].sqnr_db));  // not measured before v4
  // The migrated file takes v4 rows (a second cell: the v3 row's cell id is made up), and
  // the view and series_points follow them.
  CellResult advised = error;
  advised.error_module = "denoiser.embed.time_mlp.0";
  advised.error_op = "aten::linear";
  advised.advice = Advice{CellStatus::kError,
                          CellStatus::kPass,
                          {"denoiser.embed"},
                          "p",
                          "",
                          0.5,
                          {{{"denoiser.embed"}, CellStatus::kPass, ""}},
                          "",
                          0,
                          ""};
  ASSERT_TRUE((*store)->RecordCell("v3-run", advised).ok());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM advice"), 1);
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT count(*) FROM cell_results WHERE error_module = "
                     "'denoiser.embed.time_mlp.0' AND error_op = 'aten::linear'"),
            1);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points WHERE status = 'ERROR'"), 2);
}

// A database as schema version 4 wrote it: an interrupted sharded run with one cell.
void WriteVersion4File(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(MigrateSchema(**db, 4).ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
    INSERT INTO runs (run_id, started_at, state, command, shard)
      VALUES ('v4-run', '2024-06-01T00:00:00Z', 'interrupted', 'framegate run nightly', '2/2');
    INSERT INTO cell_specs VALUES ('dddd000011112222', 'reference:tiny', 'tiny', 'cpu', 'fp32',
                                   0, '', '', 0, 0.0);
    INSERT INTO cells (id, run_id, cell_id, policy_used, status)
      VALUES (1, 'v4-run', 'dddd000011112222', 'fp32', 'PASS');
  )sql")
                  .ok());
}

TEST(SchemaTest, MigratesAVersion4DatabaseAddingRunArgv) {
  TestDb file("v4");
  WriteVersion4File(file.path());
  ASSERT_EQ(QueryInt(file.path(), "PRAGMA user_version"), 4);
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  // v5 -> v6: the old cell has no judged_by.
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM cells WHERE judged_by = ''"), 1);
  // v6 -> v7: an older cell has no producer (not attempted).
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT count(*) FROM cells WHERE producer_module = '' AND "
                     "producer_op = '' AND producer_error IS NULL AND producer_note = ''"),
            1);
  StatusOr<RunInfo> old = (*store)->LoadRunInfo("v4-run");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->shard, "2/2");
  EXPECT_EQ(old->command, "framegate run nightly");
  EXPECT_TRUE(old->argv.empty());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM runs WHERE argv = '[]'"), 1);
  // The migrated file stores a new run's argv, words with spaces and quotes as they are.
  RunInfo info = *old;
  info.run_id = "v5-run";
  info.state = "running";
  info.argv = {"nightly", "--shard", "1/2", "--policy", "half emu $(touch PWNED)", "it's"};
  ASSERT_TRUE((*store)->BeginRun(info, {}).ok());
  StatusOr<RunInfo> loaded = (*store)->LoadRunInfo("v5-run");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->argv, info.argv);
  StatusOr<std::vector<RunInfo>> all = (*store)->ListRuns();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->back().argv, info.argv);
}

TEST(SchemaTest, RegressionAlertsMigrationAddsTheFingerprintAndAcceptances) {
  // A version-5 file (the version before the regression-alerts migration): its runs get
  // the empty fingerprint '{}', accepted_changes exists, a new run's fingerprint is kept.
  TestDb file("v5");
  WriteVersion4File(file.path());
  {
    StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(file.path(), SqliteDb::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 5).ok());
  }
  ASSERT_EQ(QueryInt(file.path(), "PRAGMA user_version"), 5);
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  StatusOr<RunInfo> old = (*store)->LoadRunInfo("v4-run");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->fingerprint, "{}");
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM accepted_changes"), 0);
  RunInfo info = *old;
  info.run_id = "v6-run";
  info.state = "running";
  info.fingerprint = R"({"build_flags": "Release -O2", "cpu_isa": "avx2 f16c"})";
  ASSERT_TRUE((*store)->BeginRun(info, {}).ok());
  StatusOr<RunInfo> loaded = (*store)->LoadRunInfo("v6-run");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->fingerprint, info.fingerprint);
}

TEST(SchemaTest, ARunWhoseArgvIsNotAJsonArrayIsCorrupt) {
  TestDb file("badargv");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  RunInfo info;
  info.run_id = "r";
  info.started_at = "2024-06-01T00:00:00Z";
  ASSERT_TRUE((*store)->BeginRun(info, {}).ok());
  for (const char* bad : {"'{}'", "'[1]'", "'not json'"}) {
    ExecSql(file.path(), std::string("UPDATE runs SET argv = ") + bad);
    StatusOr<RunInfo> loaded = (*store)->LoadRunInfo("r");
    EXPECT_EQ(loaded.status().code(), Status::Code::kCorrupt) << bad;
    EXPECT_NE(loaded.status().message().find("run r"), std::string::npos) << loaded.status().message();
  }
}

TEST(SchemaTest, AMigratedDatabaseHasExactlyTheFreshSchema) {
  TestDb migrated("migrated"), from_v3("from_v3"), from_v4("from_v4"), fresh("fresh");
  WriteVersion1File(migrated.path());
  WriteVersion3File(from_v3.path());
  WriteVersion4File(from_v4.path());
  ASSERT_TRUE(ResultStore::Open(migrated.path()).ok());
  ASSERT_TRUE(ResultStore::Open(from_v3.path()).ok());
  ASSERT_TRUE(ResultStore::Open(from_v4.path()).ok());
  ASSERT_TRUE(ResultStore::Open(fresh.path()).ok());
  EXPECT_EQ(QueryInt(fresh.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  EXPECT_EQ(SchemaText(migrated.path()), SchemaText(fresh.path()));
  EXPECT_EQ(SchemaText(from_v3.path()), SchemaText(fresh.path()));
  EXPECT_EQ(SchemaText(from_v4.path()), SchemaText(fresh.path()));
  const std::string schema = SchemaText(fresh.path());
  EXPECT_NE(schema.find("CREATE VIEW cell_results"), std::string::npos);
  EXPECT_NE(schema.find("CREATE TABLE advice"), std::string::npos);
  EXPECT_NE(schema.find("c.error_module, c.error_op, c.nonfinite_module, c.nonfinite_op"), std::string::npos);
}

TEST(SchemaTest, ReadOnlyOpenMigratesInMemoryAndLeavesTheFileAlone) {
  TestDb file("v1ro");
  WriteVersion1File(file.path());
  auto store = ResultStore::Open(file.path(), ResultStore::OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok()) << store.status().message();
  StatusOr<RunRecord> run = (*store)->LoadRun("v1-run");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->cells.size(), 2u);
  // regressions reads the in-memory copy's series_points (one connection: no second reader
  // can open a copy).
  StatusOr<RegressionReport> report = FindRegressions(**store, RegressionOptions());
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->runs, 1);
  EXPECT_EQ(report->series, 2);
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), 1);
}

TEST(SchemaTest, ConcurrentFirstOpensMigrateOnce) {
  TestDb file("twice");
  auto first = ResultStore::Open(file.path());
  auto second = ResultStore::Open(file.path());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM sqlite_master WHERE name = 'cells'"), 1);
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
}

TEST(SchemaTest, NegativeSchemaVersionIsRefusedEverywhere) {
  TestDb file("negative");
  {
    StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(file.path());
    ASSERT_TRUE(store.ok());
    RunInfo info;
    info.run_id = "r1";
    info.started_at = "2024-05-01T03:00:00Z";
    ASSERT_TRUE((*store)->BeginRun(info, {}).ok());
  }
  ExecSql(file.path(), "PRAGMA user_version = -1");
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(file.path(), SqliteDb::Mode::kReadOnly);
  StatusOr<int> version = ReadSchemaVersion(**db);
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().message(), file.path() +
                                            ": schema version -1 is not a framegate schema version (0.." +
                                            std::to_string(kStoreSchemaVersion) + ")");
  db->reset();
  for (ResultStore::OpenMode mode :
       {ResultStore::OpenMode::kCreate, ResultStore::OpenMode::kExisting, ResultStore::OpenMode::kReadOnly}) {
    StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(file.path(), mode);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Status::Code::kCorrupt);
  }
  EXPECT_FALSE(CheckDatabase(file.path()).ok());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM runs"), 1);
}

}  // namespace
}  // namespace framegate
