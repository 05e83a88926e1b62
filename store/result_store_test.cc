#include "store/result_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "harness/cell_result_json.h"
#include "store/schema.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A result with every field set, including the awkward values: +inf PSNR, NaN SSIM, an
// optional metric, a non-finite count, an infinite probe headroom, a probe whose SQNR was
// not measured (NaN) beside one that was, and advice with two runs.
CellResult EveryFieldResult() {
  CellResult r = SyntheticCellResult(3, "cuda:1", 7);
  r.cell.model_dir = "/models/my model";
  r.cell.fault = "attn-overflow";
  r.cell.sampler = "euler";
  r.cell.guidance = 4.5;
  r.cell.tolerance = "strict";
  r.cell.xfail = "known fp16 overflow";
  r.cell.requirements = {"cuda", "bf16"};
  r.cell.policy_file = "/matrices/islands'.toml";
  r.policy_used = "bf16";
  r.status = CellStatus::kNonfinite;
  r.reason = "NaN at step 2 in blocks.0.spatial_attn.logits";
  r.error_class = "other";
  r.error_module = "denoiser.embed.time_mlp.0";
  r.error_op = "aten::linear";
  r.metrics->video.frames[0] = {kInf, kNaN};
  r.metrics->video.min_ssim = kNaN;
  r.metrics->fp64_error_ratio = 1.25;
  r.health.step_latents[2] = {3, 1};
  r.health.first_nonfinite_step = 2;
  r.health.decoded = {17, 2};
  r.health.frames[1] = FrameDefect::kBlack;
  r.health.defect = FrameDefect::kBlack;
  r.health.defect_frames = 1;
  r.first_nonfinite = {true, 2, "blocks.0.spatial_attn.logits", "aten::log", {3, 1}};
  r.producer = {true, "denoiser.blocks.1.ff.0", "aten::linear", kInf, 4.8828125e-4, "partly recorded"};
  r.probes[0].sqnr_db = 41.25;
  r.probes.push_back({"decoder.out", "bfloat16", 0.0, 0.0, 0.0, kInf, kInf});
  r.observed = "37 module calls, 212 ops watched; 1 free function not entered";
  r.judged_by = "calibration golden/calibration-model-x-1a2b3c4d.toml (model sha256 0123456789abcdef)";
  Advice advice;
  advice.status_before = CellStatus::kNonfinite;
  advice.status_after = CellStatus::kPass;
  advice.islands = {"denoiser.blocks.0.attn", "decoder.out"};
  advice.policy_name = "fp16-emulated-islands";
  advice.policy_toml =
      "[policy.fp16-emulated-islands]\nbased_on = \"fp16-emulated\"\n"
      "fp32_modules = [\"denoiser.blocks.0.attn\", \"decoder.out\"]\n";
  advice.fp32_weight_fraction = 0.125;
  advice.runs = {{{"denoiser.blocks.0.attn"}, CellStatus::kNonfinite, "NaN at step 1 in decoder.out"},
                 {advice.islands, CellStatus::kPass, ""}};
  advice.runs.push_back({advice.islands, CellStatus::kFail, "min_psnr 34 < 46.8"});
  advice.runs.back().seed = 1;
  advice.note = "the islands pass at seed 0 but do not hold at seed 1: FAIL (min_psnr 34 < 46.8)";
  advice.verified = false;
  r.advice = advice;
  r.timings.peak_device_bytes = 1ll << 33;
  r.artifacts_dir = "/tmp/artifacts/x";
  return r;
}

TEST(ResultStoreTest, RoundTripsEveryCellResultField) {
  TestDb file("roundtrip");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  RunInfo info = SyntheticRunInfo("run-1", "2024-05-01T03:00:00Z");
  info.cuda_version = "12.1";
  info.shard = "2/4";
  ASSERT_TRUE((*store)->BeginRun(info, {{"cuda:1", "NVIDIA H100", "9.0", 80ll << 30, "550.54"}}).ok());
  CellResult no_metrics = SyntheticCellResult(4, "cpu", 1);
  no_metrics.metrics.reset();
  no_metrics.status = CellStatus::kUnsupported;
  const std::vector<CellResult> written = {EveryFieldResult(), no_metrics};
  for (const CellResult& r : written) ASSERT_TRUE((*store)->RecordCell("run-1", r).ok());
  ASSERT_TRUE((*store)->FinishRun("run-1", "finished", "2024-05-01T04:00:00Z").ok());

  auto reopened = ResultStore::Open(file.path(), ResultStore::OpenMode::kExisting);
  ASSERT_TRUE(reopened.ok());
  StatusOr<RunRecord> run = (*reopened)->LoadRun("run-1");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->info.state, "finished");
  EXPECT_EQ(run->info.shard, "2/4");
  EXPECT_EQ(run->info.cuda_version, "12.1");
  ASSERT_EQ(run->devices.size(), 1u);
  EXPECT_EQ(run->devices[0].name, "NVIDIA H100");
  EXPECT_EQ(run->devices[0].memory_bytes, 80ll << 30);
  ASSERT_EQ(run->cells.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(CellResultToJson(run->cells[i]).dump(), CellResultToJson(written[i]).dump());
  }
  const CellResult& back = run->cells[0];
  EXPECT_TRUE(std::isinf(back.metrics->video.frames[0].psnr));
  EXPECT_TRUE(std::isnan(back.metrics->video.frames[0].ssim));
  EXPECT_TRUE(std::isinf(back.probes.back().headroom_bits));
  EXPECT_TRUE(std::isinf(back.probes.back().sqnr_db));
  EXPECT_DOUBLE_EQ(back.probes[0].sqnr_db, 41.25);
  EXPECT_TRUE(std::isnan(back.probes[1].sqnr_db));
  EXPECT_EQ(back.cell.policy_file, written[0].cell.policy_file);
  EXPECT_EQ(back.error_module, "denoiser.embed.time_mlp.0");
  EXPECT_EQ(back.error_op, "aten::linear");
  EXPECT_EQ(back.first_nonfinite.op, "aten::log");
  EXPECT_TRUE(back.producer.found);
  EXPECT_EQ(back.producer.module, "denoiser.blocks.1.ff.0");
  EXPECT_EQ(back.producer.op, "aten::linear");
  EXPECT_TRUE(std::isinf(back.producer.isolated_error));
  EXPECT_DOUBLE_EQ(back.producer.predicted_error, 4.8828125e-4);
  EXPECT_EQ(back.producer.note, "partly recorded");
  EXPECT_FALSE(run->cells[1].producer.attempted());
  EXPECT_EQ(back.observed, written[0].observed);
  EXPECT_EQ(back.judged_by, written[0].judged_by);
  ASSERT_TRUE(back.advice.has_value());
  EXPECT_EQ(back.advice->islands, written[0].advice->islands);
  ASSERT_EQ(back.advice->runs.size(), 3u);
  EXPECT_EQ(back.advice->runs[2].seed, std::optional<uint64_t>(1));
  EXPECT_EQ(back.advice->note, written[0].advice->note);
  EXPECT_FALSE(back.advice->verified);
  EXPECT_EQ(back.advice->runs[0].status, CellStatus::kNonfinite);
  EXPECT_EQ(back.advice->runs[1].islands, written[0].advice->islands);
  EXPECT_EQ(back.advice->policy_toml, written[0].advice->policy_toml);
  EXPECT_DOUBLE_EQ(back.advice->fp32_weight_fraction, 0.125);
  EXPECT_EQ(back.timings.generation_seconds, written[0].timings.generation_seconds);
  EXPECT_FALSE(run->cells[1].metrics.has_value());
  EXPECT_FALSE(run->cells[1].advice.has_value());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM advice"), 1);
  // The view answers "which module fails where" without joins.
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT count(*) FROM cell_results WHERE nonfinite_module = "
                     "'blocks.0.spatial_attn.logits' AND nonfinite_op = 'aten::log' "
                     "AND error_module = 'denoiser.embed.time_mlp.0' AND "
                     "device_name = 'NVIDIA H100'"),
            1);
}

TEST(ResultStoreTest, ReRecordingACellReplacesItsAdvice) {
  TestDb file("advice");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->BeginRun(SyntheticRunInfo("r", "2024-05-01T00:00:00Z"), {}).ok());
  CellResult advised = EveryFieldResult();
  ASSERT_TRUE((*store)->RecordCell("r", advised).ok());
  advised.advice->islands = {"decoder.out"};
  advised.advice->runs.pop_back();
  ASSERT_TRUE((*store)->RecordCell("r", advised).ok());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM advice"), 1);
  EXPECT_EQ(QueryInt(file.path(),
                     "SELECT json_array_length(islands) + 10 * "
                     "json_array_length(runs) FROM advice"),
            21);
  advised.advice.reset();
  ASSERT_TRUE((*store)->RecordCell("r", advised).ok());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM advice"), 0);
  StatusOr<RunRecord> run = (*store)->LoadRun("r");
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->cells[0].advice.has_value());
  // A reason that is not UTF-8 (from an exception) is stored, not thrown.
  advised.advice = EveryFieldResult().advice;
  advised.advice->runs[0].reason = "bad \xff byte";
  ASSERT_TRUE((*store)->RecordCell("r", advised).ok());
  run = (*store)->LoadRun("r");
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_TRUE(run->cells[0].advice.has_value());
  EXPECT_EQ(run->cells[0].advice->runs[0].reason.rfind("bad ", 0), 0u);
  // A hand-edited advice row that no longer reads is Corrupt, naming the file.
  ASSERT_TRUE((*store)->RecordCell("r", EveryFieldResult()).ok());
  ExecSql(file.path(), "UPDATE advice SET runs = '{not json'");
  run = (*store)->LoadRun("r");
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(run.status().message().find(file.path()), std::string::npos);
}

TEST(ResultStoreTest, RerecordingACellReplacesItAndResumeSeesItOnce) {
  TestDb file("replace");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->BeginRun(SyntheticRunInfo("r", "2024-05-01T00:00:00Z"), {}).ok());
  CellResult first = SyntheticCellResult(0, "cpu", 1);
  first.status = CellStatus::kCrash;
  ASSERT_TRUE((*store)->RecordCell("r", first).ok());
  ASSERT_TRUE((*store)->RecordCell("r", SyntheticCellResult(0, "cpu", 2)).ok());
  ASSERT_TRUE((*store)->RecordCell("r", SyntheticCellResult(1, "cpu", 2)).ok());
  StatusOr<std::set<std::string>> done = (*store)->FinishedCellIds("r");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(*done, (std::set<std::string>{first.cell.Id(), SyntheticCellResult(1, "cpu", 2).cell.Id()}));
  StatusOr<RunRecord> run = (*store)->LoadRun("r");
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->cells.size(), 2u);
  EXPECT_EQ(run->cells[0].status, CellStatus::kPass);  // the second recording won
  // No orphans: the replaced cell's samples are gone with it.
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM samples"), 2 * (5 + 8 + 8 + 8 + 16));
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM metrics"), 2);
  // series_points (what `regressions` reads) follows: one row per cell, the newest status.
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points"), 2);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points WHERE cell_id = '" + first.cell.Id() +
                                      "' AND status = 'PASS'"),
            1);
}

TEST(ResultStoreTest, SeriesPointsFollowEveryChangeToCellsAndMetrics) {
  TestDb file("points");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->BeginRun(SyntheticRunInfo("r", "2024-05-01T00:00:00Z"), {}).ok());
  const CellResult a = SyntheticCellResult(0, "cpu", 1), b = SyntheticCellResult(1, "cpu", 1);
  ASSERT_TRUE((*store)->RecordCells("r", {a, b}).ok());
  auto point = [&](const std::string& cell_id, const std::string& columns) {
    return QueryInt(file.path(),
                    "SELECT count(*) FROM series_points WHERE run_id = 'r' AND "
                    "cell_id = '" +
                        cell_id + "' AND " + columns);
  };
  EXPECT_EQ(point(a.cell.Id(), "status = 'PASS' AND abs(min_psnr - " +
                                   std::to_string(a.metrics->video.min_psnr) + ") < 1e-5"),
            1);
  // Edits by hand (the sqlite3 shell) reach series_points through the triggers.
  ExecSql(file.path(),
          "UPDATE cells SET status = 'FAIL', latency_median_s = 9 WHERE "
          "cell_id = '" +
              a.cell.Id() + "'");
  EXPECT_EQ(point(a.cell.Id(), "status = 'FAIL' AND latency_median_s = 9"), 1);
  ExecSql(file.path(),
          "UPDATE metrics SET min_psnr = 12.5, rel_l2 = 0.25 WHERE cell_row = "
          "(SELECT id FROM cells WHERE cell_id = '" +
              a.cell.Id() + "')");
  EXPECT_EQ(point(a.cell.Id(), "min_psnr = 12.5 AND rel_l2 = 0.25"), 1);
  ExecSql(file.path(),
          "DELETE FROM metrics WHERE cell_row = (SELECT id FROM cells WHERE "
          "cell_id = '" +
              a.cell.Id() + "')");
  EXPECT_EQ(point(a.cell.Id(), "min_psnr IS NULL AND mean_ssim IS NULL"), 1);
  ExecSql(file.path(), "DELETE FROM cells WHERE cell_id = '" + b.cell.Id() + "'");
  EXPECT_EQ(point(b.cell.Id(), "1"), 0);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM series_points"), 1);
}

TEST(ResultStoreTest, NamesWithQuotesAndSqlAreStoredAsData) {
  TestDb file("quotes");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  const std::string nasty = "x'); DROP TABLE cells; --\"";
  RunInfo info = SyntheticRunInfo("run'1\"", "2024-05-01T00:00:00Z");
  info.host = nasty;
  ASSERT_TRUE((*store)->BeginRun(info, {{"cpu", nasty, "", 0, ""}}).ok());
  CellResult r = SyntheticCellResult(0, "cpu", 1);
  r.cell.policy = nasty;
  r.reason = nasty;
  r.probes[0].module = nasty;
  ASSERT_TRUE((*store)->RecordCell(info.run_id, r).ok());
  StatusOr<RunRecord> run = (*store)->LoadRun(info.run_id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->info.host, nasty);
  EXPECT_EQ(run->devices[0].name, nasty);
  ASSERT_EQ(run->cells.size(), 1u);
  EXPECT_EQ(run->cells[0].cell.policy, nasty);
  EXPECT_EQ(run->cells[0].reason, nasty);
  EXPECT_EQ(run->cells[0].probes[0].module, nasty);
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM cells"), 1);
}

TEST(ResultStoreTest, UnknownRunsAndBadStatesAreErrors) {
  TestDb file("unknown");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  Status s = (*store)->RecordCell("nope", SyntheticCellResult(0, "cpu", 1));
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("nope"), std::string::npos);
  EXPECT_EQ((*store)->FinishRun("nope", "finished", "").code(), Status::Code::kNotFound);
  EXPECT_EQ((*store)->LoadRun("nope").status().code(), Status::Code::kNotFound);
  RunInfo info = SyntheticRunInfo("r", "2024-05-01T00:00:00Z");
  info.state = "paused";
  EXPECT_EQ((*store)->BeginRun(info, {}).code(), Status::Code::kInvalidInput);
  EXPECT_EQ((*store)->FinishRun("r", "running", "").code(), Status::Code::kInvalidInput);
}

TEST(ResultStoreTest, OpenExistingDoesNotCreateAMissingFile) {
  TestDb file("missing");
  auto store = ResultStore::Open(file.path(), ResultStore::OpenMode::kExisting);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kNotFound);
  EXPECT_NE(store.status().message().find(file.path()), std::string::npos);
  EXPECT_NE(access(file.path().c_str(), F_OK), 0);
}

TEST(ResultStoreTest, AFifoOrAFolderIsRefusedWithoutOpeningIt) {
  TestDb file("fifo");
  ASSERT_EQ(mkfifo(file.path().c_str(), 0600), 0);
  const std::string folder = file.dir() + "/folder.db";
  ASSERT_EQ(mkdir(folder.c_str(), 0700), 0);
  for (const std::string& path : {file.path(), folder}) {
    // A read-only open of a FIFO blocked until a writer came: for ever.
    for (ResultStore::OpenMode mode : {ResultStore::OpenMode::kCreate, ResultStore::OpenMode::kExisting,
                                       ResultStore::OpenMode::kReadOnly}) {
      auto store = ResultStore::Open(path, mode);
      ASSERT_FALSE(store.ok());
      EXPECT_EQ(store.status().code(), Status::Code::kInvalidInput);
      EXPECT_EQ(store.status().message(), path + ": not a regular file (a database is one file)");
    }
  }
}

TEST(ResultStoreTest, RefusesANewerSchemaWithoutTouchingTheFile) {
  TestDb file("newer");
  ASSERT_TRUE(ResultStore::Open(file.path()).ok());
  const int newer = kStoreSchemaVersion + 1;
  ExecSql(file.path(), "PRAGMA user_version = " + std::to_string(newer));
  auto store = ResultStore::Open(file.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(store.status().message().find(file.path()), std::string::npos);
  EXPECT_NE(store.status().message().find("schema version " + std::to_string(newer)), std::string::npos);
  EXPECT_EQ(store.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), newer);
}

TEST(ResultStoreTest, RefusesFilesThatAreNotFramegateDatabases) {
  TestDb garbage("garbage");
  std::ofstream(garbage.path()) << std::string(4096, 'x');
  auto store = ResultStore::Open(garbage.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(store.status().message().find(garbage.path()), std::string::npos);

  TestDb other("other");
  ExecSql(other.path(), "CREATE TABLE t (x)");
  store = ResultStore::Open(other.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(store.status().message().find("not framegate's"), std::string::npos);
}

TEST(ResultStoreTest, HistoryIsOldestFirstAndLimited) {
  TestDb file("history");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  for (int night = 1; night <= 5; ++night) {
    const std::string id = "night-" + std::to_string(night);
    ASSERT_TRUE((*store)
                    ->BeginRun(SyntheticRunInfo(id, "2024-05-0" + std::to_string(night) + "T03:00:00Z"),
                               {{"cuda:0", "NVIDIA L4", "8.9", 0, ""}})
                    .ok());
    ASSERT_TRUE((*store)->RecordCell(id, SyntheticCellResult(0, "cuda:0", night)).ok());
  }
  const std::string cell_id = SyntheticCellResult(0, "cuda:0", 0).cell.Id();
  StatusOr<std::vector<HistoryPoint>> history = (*store)->CellHistory(cell_id, 3);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].run_id, "night-3");
  EXPECT_EQ((*history)[2].run_id, "night-5");
  EXPECT_EQ((*history)[2].device_name, "NVIDIA L4");
  EXPECT_EQ((*history)[2].result.timings.generation_seconds.size(), 5u);
  EXPECT_NEAR((*history)[2].latency_median_s, 0.505, 0.006);
}

TEST(ResultStoreTest, GoldensAreKeptOncePerPathAndHash) {
  TestDb file("goldens");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  GoldenRecord g{"golden/tiny.safetensors", std::string(64, 'b'), "v1|tiny", "{\"blas\":\"x\"}"};
  ASSERT_TRUE((*store)->RecordGolden(g).ok());
  ASSERT_TRUE((*store)->RecordGolden(g).ok());
  g.sha256 = std::string(64, 'c');
  ASSERT_TRUE((*store)->RecordGolden(g).ok());
  StatusOr<std::vector<GoldenRecord>> goldens = (*store)->ListGoldens();
  ASSERT_TRUE(goldens.ok());
  ASSERT_EQ(goldens->size(), 2u);
  EXPECT_EQ((*goldens)[0].provenance, "{\"blas\":\"x\"}");
  EXPECT_EQ((*store)->RecordGolden({"", "", "", ""}).code(), Status::Code::kInvalidInput);
}

}  // namespace
}  // namespace framegate
