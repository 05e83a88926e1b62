#include "store/store_merge.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "harness/cell_result_json.h"

#include "store/schema.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

// A shard database: run `run_id` with cells [first, first + count).
void WriteShard(const std::string& path, const std::string& run_id, int first, int count,
                const std::string& state = "finished") {
  auto store = ResultStore::Open(path);
  ASSERT_TRUE(store.ok());
  RunInfo info = SyntheticRunInfo(run_id, "2024-05-01T03:00:00Z");
  info.state = state;
  ASSERT_TRUE((*store)->BeginRun(info, {{"cpu", "AMD EPYC", "avx2", 0, ""}}).ok());
  for (int i = first; i < first + count; ++i) {
    ASSERT_TRUE((*store)->RecordCell(run_id, SyntheticCellResult(i, "cpu", 1)).ok());
  }
  ASSERT_TRUE((*store)->RecordGolden({"golden/tiny.safetensors", "ab12", "v1|tiny", "{}"}).ok());
}

// Every row of the output, as text, to see that a second merge changes nothing.
std::string Contents(const std::string& path) {
  auto db = SqliteDb::Open(path, SqliteDb::Mode::kReadOnly);
  std::string text;
  for (const char* sql :
       {"SELECT * FROM runs ORDER BY run_id", "SELECT * FROM devices ORDER BY run_id, device",
        "SELECT * FROM cells ORDER BY id", "SELECT * FROM metrics ORDER BY cell_row",
        "SELECT * FROM samples ORDER BY cell_row, kind, idx", "SELECT * FROM probes ORDER BY cell_row, idx",
        "SELECT * FROM advice ORDER BY cell_row",
        "SELECT path, sha256, config, provenance FROM goldens ORDER BY path"}) {
    auto stmt = (*db)->Prepare(sql);
    while (*stmt->Step()) {
      for (int c = 0; c < stmt->ColumnCount(); ++c) text += stmt->Text(c) + "|";
      text += "\n";
    }
  }
  return text;
}

TEST(StoreMergeTest, MergesShardsAndASecondMergeChangesNothing) {
  TestDb out("out"), shard1("shard1"), shard2("shard2");
  WriteShard(shard1.path(), "run-1", 0, 5);
  WriteShard(shard2.path(), "run-2", 5, 4);
  auto store = ResultStore::Open(out.path());
  ASSERT_TRUE(store.ok());
  MergeCounts counts;
  ASSERT_TRUE(MergeStore(**store, shard1.path(), &counts).ok());
  ASSERT_TRUE(MergeStore(**store, shard2.path(), &counts).ok());
  EXPECT_EQ(counts.runs_added, 2);
  EXPECT_EQ(counts.cells_added, 9);
  EXPECT_EQ(counts.goldens_added, 1);
  EXPECT_TRUE(counts.conflicts.empty());
  const std::string before = Contents(out.path());

  MergeCounts again;
  ASSERT_TRUE(MergeStore(**store, shard1.path(), &again).ok());
  ASSERT_TRUE(MergeStore(**store, shard2.path(), &again).ok());
  EXPECT_EQ(again.runs_added + again.cells_added + again.goldens_added + again.devices_added, 0);
  EXPECT_EQ(again.cells_identical, 9);
  EXPECT_TRUE(again.conflicts.empty());
  EXPECT_EQ(Contents(out.path()), before);
  StatusOr<RunRecord> run = (*store)->LoadRun("run-2");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->cells.size(), 4u);
  EXPECT_EQ(run->devices.size(), 1u);
}

TEST(StoreMergeTest, ConflictingCellsAreReportedAndTheOutputKept) {
  TestDb out("out"), shard("shard"), other("other");
  WriteShard(shard.path(), "run-1", 0, 3);
  WriteShard(other.path(), "run-1", 0, 3);
  {
    auto o = ResultStore::Open(other.path());
    CellResult changed = SyntheticCellResult(1, "cpu", 1);
    changed.status = CellStatus::kCrash;
    ASSERT_TRUE((*o)->RecordCell("run-1", changed).ok());
  }
  auto store = ResultStore::Open(out.path());
  MergeCounts counts;
  ASSERT_TRUE(MergeStore(**store, shard.path(), &counts).ok());
  ASSERT_TRUE(MergeStore(**store, other.path(), &counts).ok());
  ASSERT_EQ(counts.conflicts.size(), 1u);
  EXPECT_NE(counts.conflicts[0].find("status \"PASS\" vs \"CRASH\""), std::string::npos)
      << counts.conflicts[0];
  EXPECT_NE(counts.conflicts[0].find(other.path()), std::string::npos);
  EXPECT_EQ(counts.cells_identical, 2);
  StatusOr<RunRecord> run = (*store)->LoadRun("run-1");
  EXPECT_EQ(run->cells[1].status, CellStatus::kPass);
}

TEST(StoreMergeTest, ARunStillRunningInTheOutputTakesTheFinishedState) {
  TestDb out("out"), early("early"), late("late");
  WriteShard(early.path(), "run-1", 0, 2, "running");
  WriteShard(late.path(), "run-1", 0, 4, "finished");
  auto store = ResultStore::Open(out.path());
  MergeCounts counts;
  ASSERT_TRUE(MergeStore(**store, early.path(), &counts).ok());
  ASSERT_TRUE(MergeStore(**store, late.path(), &counts).ok());
  EXPECT_TRUE(counts.conflicts.empty());
  EXPECT_EQ(counts.runs_updated, 1);
  EXPECT_EQ(counts.cells_added, 4);
  EXPECT_EQ((*store)->LoadRunInfo("run-1")->state, "finished");
}

TEST(StoreMergeTest, AdviceAndTheErrorPlaceSurviveAMerge) {
  TestDb out("out"), shard("shard");
  WriteShard(shard.path(), "run-1", 0, 2);
  CellResult advised = SyntheticCellResult(1, "cpu", 1);
  advised.cell.policy_file = "matrix/islands.toml";
  advised.status = CellStatus::kError;
  advised.error_module = "denoiser.embed.time_mlp.0";
  advised.error_op = "aten::linear";
  advised.first_nonfinite = {true, 0, "denoiser.blocks.0.attn", "aten::exp", {1, 0}};
  advised.observed = "12 module calls, 40 ops watched";
  advised.probes[0].sqnr_db = 33.5;
  advised.advice =
      Advice{CellStatus::kError,
             CellStatus::kPass,
             {"denoiser.embed"},
             "fp8-islands",
             "[policy.fp8-islands]\nfp32_modules = [\"denoiser.embed\"]\n",
             0.02,
             {{{}, CellStatus::kError, "dtype_mismatch"}, {{"denoiser.embed"}, CellStatus::kPass, ""}},
             "",
             0,
             ""};
  {
    auto s = ResultStore::Open(shard.path());
    ASSERT_TRUE((*s)->RecordCell("run-1", advised).ok());
  }
  auto store = ResultStore::Open(out.path());
  MergeCounts counts;
  ASSERT_TRUE(MergeStore(**store, shard.path(), &counts).ok());
  EXPECT_EQ(counts.cells_added, 2);
  EXPECT_EQ(QueryInt(out.path(), "SELECT count(*) FROM advice"), 1);
  EXPECT_EQ(QueryInt(out.path(),
                     "SELECT count(*) FROM cells WHERE error_module = "
                     "'denoiser.embed.time_mlp.0' AND error_op = 'aten::linear' "
                     "AND nonfinite_op = 'aten::exp' AND policy_file != ''"),
            1);
  StatusOr<RunRecord> run = (*store)->LoadRun("run-1");
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->cells.size(), 2u);
  const CellResult& back = run->cells[1];
  EXPECT_EQ(CellResultToJson(back).dump(), CellResultToJson(advised).dump());
  ASSERT_TRUE(back.advice.has_value());
  EXPECT_EQ(back.advice->runs.size(), 2u);
  // Merging again: the advised cell is identical, not a conflict.
  const std::string before = Contents(out.path());
  MergeCounts again;
  ASSERT_TRUE(MergeStore(**store, shard.path(), &again).ok());
  EXPECT_EQ(again.cells_identical, 2);
  EXPECT_TRUE(again.conflicts.empty());
  EXPECT_EQ(Contents(out.path()), before);
}

TEST(StoreMergeTest, RefusesToMergeAFileIntoItself) {
  TestDb out("out");
  WriteShard(out.path(), "run-1", 0, 1);
  auto store = ResultStore::Open(out.path());
  MergeCounts counts;
  Status s = MergeStore(**store, out.path(), &counts);
  EXPECT_EQ(s.code(), Status::Code::kInvalidInput);
}

// An older-schema input whose run holds two results for one cell: in version 1 the cell
// id was stored as written (UNIQUE (run_id, cell_id) held), but the identity fields it
// hashed (sampler, steps) were not kept, so both rows migrate to one Cell::Id().
void WriteVersion1FileWithTwinCells(const std::string& path) {
  StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, SqliteDb::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(MigrateSchema(**db, 1).ok());
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
    INSERT INTO runs VALUES ('v1-run', '2023-01-01T00:00:00Z', '2023-01-01T01:00:00Z',
                             'finished', 'h', 'abc', '0.0.9', '1.12.1', 'nightly');
    INSERT INTO cells VALUES (1, 'v1-run', 'aaaa000011112222', 'reference:tiny', 'cpu', 'fp16',
                              0, '', 'FAIL', 'min_psnr 12 < 30', '[]');
    INSERT INTO cells VALUES (2, 'v1-run', 'bbbb000011112222', 'reference:tiny', 'cpu', 'fp16',
                              0, '', 'PASS', '', '[]');
  )sql")
                  .ok());
}

TEST(StoreMergeTest, AnInputWithTwoResultsForOneCellIsRefusedAndTheOutputLeftAlone) {
  TestDb out("out"), good("good"), twins("twins");
  WriteShard(good.path(), "run-1", 0, 2);
  WriteVersion1FileWithTwinCells(twins.path());
  Cell twin;  // what both rows migrate to: sampler "", steps 0, guidance 0
  twin.policy = "fp16";
  const std::string cell_id = twin.Id();
  const std::string expected = twins.path() + ": run v1-run: cell " + cell_id +
                               " (reference:tiny cpu fp16 seed=0) is stored twice (FAIL and PASS); merging "
                               "would keep one and hide the other, so nothing was merged";
  // Every input is checked before the output is created or written.
  StatusOr<MergeCounts> merged = MergeStores(out.path(), {good.path(), twins.path()});
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), Status::Code::kCorrupt);
  EXPECT_EQ(merged.status().message(), expected);
  EXPECT_FALSE(std::filesystem::exists(out.path()));
  WriteShard(out.path(), "run-0", 5, 1);
  const std::string before = Contents(out.path());
  merged = MergeStores(out.path(), {good.path(), twins.path()});
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(Contents(out.path()), before);
  auto store = ResultStore::Open(out.path());
  MergeCounts counts;
  EXPECT_EQ(MergeStore(**store, twins.path(), &counts).message(), expected);
  EXPECT_EQ(Contents(out.path()), before);
  // The input is read-only to merge: still version 1 with both rows.
  EXPECT_EQ(QueryInt(twins.path(), "PRAGMA user_version"), 1);
  EXPECT_EQ(QueryInt(twins.path(), "SELECT count(*) FROM cells"), 2);
}

TEST(StoreMergeTest, InputsWithoutTwinsStillMergeThroughMergeStores) {
  TestDb out("out"), shard1("shard1"), shard2("shard2");
  WriteShard(shard1.path(), "run-1", 0, 3);
  WriteShard(shard2.path(), "run-2", 3, 2);
  StatusOr<MergeCounts> merged = MergeStores(out.path(), {shard1.path(), shard2.path()});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->cells_added, 5);
  EXPECT_EQ(merged->runs_added, 2);
  EXPECT_EQ(MergeStores(out.path(), {out.path()}).status().code(), Status::Code::kInvalidInput);
}

}  // namespace
}  // namespace framegate
