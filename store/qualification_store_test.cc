// The qualifications table (schema v9) through ResultStore: record, replace, read back
// per run and per device over time, refusals, migration from v8, schema check, merge.
#include <gtest/gtest.h>

#include "store/db_check.h"
#include "store/qualification_history.h"
#include "store/result_store.h"
#include "store/schema.h"
#include "store/schema_check.h"
#include "store/store_merge.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

DeviceQualification Device(const std::string& name, DeviceVerdict verdict) {
  DeviceQualification d;
  d.device = name;
  d.kind = "cpu";
  d.verdict = verdict;
  d.cells = 8;
  d.repeats = 3;
  d.seconds = 4.25;
  if (verdict == DeviceVerdict::kFaulty) {
    d.reasons.push_back({"persistent_mismatch", DeviceVerdict::kFaulty, "reference:tiny fp32 seed 0", 3,
                         "blocks.1.ff.0", "max_abs 0.25 in 3 of 3 repeats; 'quoted' \"x\""});
  }
  if (verdict != DeviceVerdict::kPass) {
    d.reasons.push_back({"transient_mismatch", DeviceVerdict::kDegraded, "reference:tiny bf16 seed 1",
                         QualificationReason::kDecodeStep, "", "1 of 3 repeats differs"});
  }
  return d;
}

// A qualify run: a normal run row whose command says qualify.
void BeginQualifyRun(ResultStore& store, const std::string& run_id, const std::string& started_at) {
  RunInfo info = SyntheticRunInfo(run_id, started_at);
  info.command = "framegate qualify matrix/qualify.toml --repeats 3";
  info.tags = "qualification";
  ASSERT_TRUE(store.BeginRun(info, {}).ok());
}

TEST(QualificationStoreTest, RecordsReplacesAndReadsBackEveryField) {
  TestDb file("q");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  BeginQualifyRun(**store, "q1", "2024-05-01T03:00:00Z");
  const std::vector<DeviceQualification> devices = {Device("cpu:default", DeviceVerdict::kPass),
                                                    Device("cpu:avx512", DeviceVerdict::kFaulty)};
  ASSERT_TRUE((*store)->RecordQualification("q1", devices).ok());
  StatusOr<std::vector<DeviceQualification>> read = (*store)->RunQualifications("q1");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 2u);  // by device name
  const DeviceQualification& faulty = (*read)[0];
  EXPECT_EQ(faulty.device, "cpu:avx512");
  EXPECT_EQ(faulty.kind, "cpu");
  EXPECT_EQ(faulty.verdict, DeviceVerdict::kFaulty);
  EXPECT_EQ(faulty.cells, 8);
  EXPECT_EQ(faulty.repeats, 3);
  EXPECT_DOUBLE_EQ(faulty.seconds, 4.25);
  ASSERT_EQ(faulty.reasons.size(), 2u);
  EXPECT_EQ(faulty.reasons[0].Describe(), devices[1].reasons[0].Describe());
  EXPECT_EQ(faulty.reasons[0].severity, DeviceVerdict::kFaulty);
  EXPECT_EQ(faulty.reasons[1].step, QualificationReason::kDecodeStep);
  EXPECT_EQ((*read)[1].verdict, DeviceVerdict::kPass);
  EXPECT_TRUE((*read)[1].reasons.empty());
  // Recording a device again in the same run replaces its row.
  ASSERT_TRUE((*store)->RecordQualification("q1", {Device("cpu:avx512", DeviceVerdict::kDegraded)}).ok());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM qualifications"), 2);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM qualifications WHERE verdict = 'DEGRADED'"), 1);
  // The reasons column is plain JSON SQL can read.
  EXPECT_EQ(
      QueryInt(file.path(),
               "SELECT json_extract(reasons, '$[0].step') FROM qualifications WHERE device = 'cpu:avx512'"),
      -1);
}

TEST(QualificationStoreTest, RefusesAnUnknownRunAndBadDevicesStoringNothing) {
  TestDb file("refuse");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  Status unknown = (*store)->RecordQualification("nope", {Device("cpu", DeviceVerdict::kPass)});
  EXPECT_EQ(unknown.code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.message().find("no run 'nope'"), std::string::npos) << unknown.message();
  BeginQualifyRun(**store, "q1", "2024-05-01T03:00:00Z");
  Status twice = (*store)->RecordQualification(
      "q1", {Device("cpu", DeviceVerdict::kPass), Device("cpu", DeviceVerdict::kFaulty)});
  EXPECT_EQ(twice.code(), Status::Code::kInvalidInput);
  EXPECT_NE(twice.message().find("device cpu is qualified twice"), std::string::npos) << twice.message();
  EXPECT_EQ((*store)->RecordQualification("q1", {Device("", DeviceVerdict::kPass)}).code(),
            Status::Code::kInvalidInput);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM qualifications"), 0);
  // The CHECK constraint keeps a verdict the code does not know out of the table.
  EXPECT_THROW(ExecSql(file.path(),
                       "INSERT INTO qualifications (run_id, device, verdict, recorded_at) "
                       "VALUES ('q1', 'cpu', 'FAIL', 'now')"),
               std::runtime_error);
  // Bad reasons written by hand are Corrupt naming the run and device, not a crash.
  ExecSql(file.path(),
          "INSERT INTO qualifications (run_id, device, verdict, reasons, recorded_at) "
          "VALUES ('q1', 'cpu', 'PASS', '[{\"kind\": 1}]', 'now')");
  StatusOr<std::vector<DeviceVerdictPoint>> bad = (*store)->DeviceVerdicts("cpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(bad.status().message().find("run q1 device cpu: qualifications.reasons"), std::string::npos)
      << bad.status().message();
}

TEST(QualificationStoreTest, EveryVerdictOfADeviceOverTimeOldestFirst) {
  TestDb file("history");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  // Begun out of order: the answer follows started_at, not insertion.
  BeginQualifyRun(**store, "night-3", "2024-05-03T03:00:00Z");
  BeginQualifyRun(**store, "night-1", "2024-05-01T03:00:00Z");
  BeginQualifyRun(**store, "night-2", "2024-05-02T03:00:00Z");
  ASSERT_TRUE((*store)
                  ->RecordQualification("night-1", {Device("cpu:avx512", DeviceVerdict::kPass),
                                                    Device("cpu:avx2", DeviceVerdict::kPass)})
                  .ok());
  ASSERT_TRUE(
      (*store)->RecordQualification("night-2", {Device("cpu:avx512", DeviceVerdict::kDegraded)}).ok());
  ASSERT_TRUE((*store)->RecordQualification("night-3", {Device("cpu:avx512", DeviceVerdict::kFaulty)}).ok());
  StatusOr<std::vector<DeviceVerdictPoint>> points = (*store)->DeviceVerdicts("cpu:avx512");
  ASSERT_TRUE(points.ok()) << points.status().message();
  ASSERT_EQ(points->size(), 3u);
  EXPECT_EQ((*points)[0].run_id, "night-1");
  EXPECT_EQ((*points)[0].qualification.verdict, DeviceVerdict::kPass);
  EXPECT_EQ((*points)[1].qualification.verdict, DeviceVerdict::kDegraded);
  EXPECT_EQ((*points)[2].run_id, "night-3");
  EXPECT_EQ((*points)[2].started_at, "2024-05-03T03:00:00Z");
  EXPECT_EQ((*points)[2].host, "host-a");
  EXPECT_FALSE((*points)[2].recorded_at.empty());
  EXPECT_EQ((*points)[2].qualification.reasons.size(), 2u);
  StatusOr<std::vector<DeviceVerdictPoint>> never = (*store)->DeviceVerdicts("cuda:0");
  ASSERT_TRUE(never.ok());
  EXPECT_TRUE(never->empty());
  // The documented one-line query gives the same order.
  EXPECT_EQ(
      QueryInt(file.path(),
               "SELECT count(*) FROM device_verdicts WHERE device = 'cpu:avx512' AND verdict = 'FAULTY'"),
      1);
  const std::string text = FormatDeviceVerdicts("cpu:avx512", *points);
  EXPECT_NE(text.find("device cpu:avx512: 3 qualifications"), std::string::npos) << text;
  EXPECT_LT(text.find("night-1"), text.find("night-2"));
  EXPECT_NE(text.find("FAULTY  (2 reasons)\n      persistent_mismatch reference:tiny fp32 seed 0 step 3"),
            std::string::npos)
      << text;
  const nlohmann::json json = DeviceVerdictsToJson("cpu:avx512", *points);
  ASSERT_EQ(json["verdicts"].size(), 3u);
  EXPECT_EQ(json["verdicts"][2]["verdict"], "FAULTY");
  EXPECT_EQ(json["verdicts"][2]["run_id"], "night-3");
  EXPECT_EQ(json["verdicts"][2]["reasons"][0]["module"], "blocks.1.ff.0");
  EXPECT_EQ(FormatDeviceVerdicts("cuda:0", *never), "device cuda:0: never qualified\n");
  // Deleting the run deletes its verdicts (ON DELETE CASCADE; the store enables foreign keys).
  ASSERT_TRUE((*store)->db().Exec("DELETE FROM runs WHERE run_id = 'night-3'").ok());
  EXPECT_EQ((*store)->DeviceVerdicts("cpu:avx512")->size(), 2u);
}

TEST(QualificationStoreTest, AVersion8FileMigratesKeepingItsRowsAndTakesVerdicts) {
  TestDb file("v8");
  {
    auto db = SqliteDb::Open(file.path(), SqliteDb::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(MigrateSchema(**db, 8).ok());
    ASSERT_TRUE((*db)
                    ->Exec(R"sql(
      INSERT INTO runs (run_id, started_at, state, fingerprint)
        VALUES ('v8-run', '2024-06-01T00:00:00Z', 'finished', '{"cpu_isa": "avx2"}');
      INSERT INTO cell_specs VALUES ('eeee000011112222', 'reference:tiny', 'tiny', 'cpu', 'fp32',
                                     0, '', '', 0, 0.0);
      INSERT INTO cells (id, run_id, cell_id, policy_used, status)
        VALUES (1, 'v8-run', 'eeee000011112222', 'fp32', 'PASS');
      INSERT INTO accepted_changes (cell_id, since_run, since_started_at, accepted_at, reason)
        VALUES ('*', 'v8-run', '2024-06-01T00:00:00Z', '2024-06-02T00:00:00Z', 'new compiler');
    )sql")
                    .ok());
  }
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  StatusOr<RunRecord> run = (*store)->LoadRun("v8-run");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->info.fingerprint, "{\"cpu_isa\": \"avx2\"}");
  ASSERT_EQ(run->cells.size(), 1u);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM accepted_changes"), 1);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points"), 1);
  EXPECT_EQ(QueryInt(file.path(), "SELECT cell_row FROM series_points"), 1);  // version 10
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM qualifications"), 0);
  ASSERT_TRUE((*store)->RecordQualification("v8-run", {Device("cpu", DeviceVerdict::kFaulty)}).ok());
  EXPECT_EQ((*store)->DeviceVerdicts("cpu")->size(), 1u);
  // A migrated file has exactly the schema of a fresh one.
  TestDb fresh("fresh");
  ASSERT_TRUE(ResultStore::Open(fresh.path()).ok());
  StatusOr<DbCheckReport> check = CheckDatabase(file.path());
  ASSERT_TRUE(check.ok()) << check.status().message();
  EXPECT_EQ(check->schema_version, kStoreSchemaVersion);
  bool listed = false;
  for (const auto& [table, rows] : check->table_rows)
    listed = listed || (table == "qualifications" && rows == 1);
  EXPECT_TRUE(listed);
}

TEST(QualificationStoreTest, SchemaCheckNamesAMissingQualificationsTableIndexAndView) {
  TestDb file("damaged");
  ASSERT_TRUE(ResultStore::Open(file.path()).ok());
  ExecSql(file.path(), "DROP VIEW device_verdicts; DROP INDEX qualifications_by_device");
  auto db = SqliteDb::Open(file.path(), SqliteDb::Mode::kReadOnly);
  StatusOr<std::vector<std::string>> problems = SchemaProblems(**db, kStoreSchemaVersion);
  ASSERT_TRUE(problems.ok());
  EXPECT_EQ(*problems, (std::vector<std::string>{"index qualifications_by_device missing",
                                                 "view device_verdicts missing"}));
  ExecSql(file.path(), "DROP TABLE qualifications");
  problems = SchemaProblems(**db, kStoreSchemaVersion);
  ASSERT_TRUE(problems.ok());
  EXPECT_EQ(problems->front(), "table qualifications missing");
  EXPECT_FALSE(CheckDatabase(file.path()).ok());
  EXPECT_EQ(ResultStore::Open(file.path()).status().code(), Status::Code::kCorrupt);
}

TEST(QualificationStoreTest, MergeCarriesVerdictsAndReportsAConflict) {
  TestDb shard_a("a"), shard_b("b"), out("out");
  for (const TestDb* shard : {&shard_a, &shard_b}) {
    auto store = ResultStore::Open(shard->path());
    ASSERT_TRUE(store.ok());
    const std::string run_id = shard == &shard_a ? "qa" : "qb";
    BeginQualifyRun(**store, run_id, shard == &shard_a ? "2024-05-01T03:00:00Z" : "2024-05-02T03:00:00Z");
    ASSERT_TRUE(
        (*store)
            ->RecordQualification(run_id, {Device("cpu:avx512", shard == &shard_a ? DeviceVerdict::kPass
                                                                                  : DeviceVerdict::kFaulty)})
            .ok());
  }
  StatusOr<MergeCounts> merged = MergeStores(out.path(), {shard_a.path(), shard_b.path()});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->qualifications_added, 2);
  EXPECT_TRUE(merged->conflicts.empty());
  {
    auto store = ResultStore::Open(out.path());
    StatusOr<std::vector<DeviceVerdictPoint>> points = (*store)->DeviceVerdicts("cpu:avx512");
    ASSERT_TRUE(points.ok());
    ASSERT_EQ(points->size(), 2u);
    EXPECT_EQ((*points)[1].qualification.verdict, DeviceVerdict::kFaulty);
    EXPECT_EQ((*points)[1].qualification.reasons.size(), 2u);
  }
  // Again: idempotent.
  merged = MergeStores(out.path(), {shard_a.path(), shard_b.path()});
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->qualifications_added, 0);
  EXPECT_TRUE(merged->conflicts.empty());
  // A shard whose verdict differs from the output's: conflict, the output's row kept.
  ExecSql(shard_b.path(), "UPDATE qualifications SET verdict = 'PASS'");
  merged = MergeStores(out.path(), {shard_b.path()});
  ASSERT_TRUE(merged.ok());
  ASSERT_EQ(merged->conflicts.size(), 1u);
  EXPECT_NE(merged->conflicts[0].find("run qb qualification of cpu:avx512: verdict \"FAULTY\" vs \"PASS\""),
            std::string::npos)
      << merged->conflicts[0];
  EXPECT_EQ(QueryInt(out.path(), "SELECT count(*) FROM qualifications WHERE verdict = 'FAULTY'"), 1);
}

}  // namespace
}  // namespace framegate
