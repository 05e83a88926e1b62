#include "store/packed_points.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "store/db_check.h"
#include "store/regressions.h"
#include "store/result_store.h"
#include "store/schema.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

const std::vector<DeviceInfo> kDevices = {{"cuda:0", "NVIDIA L4", "8.9", 0, ""},
                                          {"cuda:1", "NVIDIA H100", "9.0", 0, ""}};

// Nights of 8 cells on two devices: a FAIL, an ERROR without metrics (NULL columns) and a
// cell 30% slower from night 6 on.
std::unique_ptr<ResultStore> Nights(const TestDb& file, int nights) {
  auto opened = ResultStore::Open(file.path());
  EXPECT_TRUE(opened.ok());
  std::unique_ptr<ResultStore> store = std::move(*opened);
  for (int night = 0; night < nights; ++night) {
    RunInfo info = SyntheticRunInfo("night-" + std::to_string(night),
                                    "2024-06-1" + std::to_string(night) + "T03:00:00Z");
    EXPECT_TRUE(store->BeginRun(info, kDevices).ok());
    std::vector<CellResult> cells;
    for (int seed = 0; seed < 4; ++seed) {
      for (int device = 0; device < 2; ++device) {
        CellResult r = SyntheticCellResult(seed, "cuda:" + std::to_string(device), 0);
        double latency = 0.5 * (1 + 0.002 * ((night * 5 + seed) % 3 - 1));
        if (seed == 1 && night >= 6) latency *= 1.3;
        r.timings.generation_seconds = {latency, latency, latency};
        if (seed == 2) r.status = CellStatus::kFail;
        if (seed == 3 && device == 1) {
          r.status = CellStatus::kError;
          r.metrics.reset();
        }
        cells.push_back(r);
      }
    }
    EXPECT_TRUE(store->RecordCells(info.run_id, cells).ok());
  }
  return store;
}

// The run's series_points rows as UnpackPoints gives them, read row by row.
std::vector<std::string> RowsOf(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> stmt = db.Prepare(kRunPointsSql);
  EXPECT_TRUE(stmt.ok());
  stmt->Bind(1, run_id);
  std::vector<std::string> rows;
  while (*stmt->Step()) {
    rows.push_back(stmt->Text(0) + " " + stmt->Text(1) + " " + std::to_string(stmt->Real(2)) + " " +
                   std::to_string(stmt->Real(3)) + " " + std::to_string(stmt->Real(4)) + " " +
                   std::to_string(stmt->Real(5)) + " " + std::to_string(stmt->Int(6)));
  }
  return rows;
}

// The run's packed_points row, unpacked, in RowsOf's form; empty when it has none.
std::vector<std::string> PackOf(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> stmt = db.Prepare("SELECT points FROM packed_points WHERE run_id = ?");
  EXPECT_TRUE(stmt.ok());
  std::vector<std::string> rows;
  if (!*stmt->Bind(1, run_id).Step()) return rows;
  StatusOr<std::vector<PackedPoint>> points = UnpackPoints(stmt->BlobView(0), run_id);
  EXPECT_TRUE(points.ok()) << points.status().message();
  for (const PackedPoint& p : *points) {
    rows.push_back(std::string(p.cell_id) + " " + std::string(p.status) + " " +
                   std::to_string(p.latency_median_s) + " " + std::to_string(p.min_psnr) + " " +
                   std::to_string(p.mean_ssim) + " " + std::to_string(p.rel_l2) + " " +
                   std::to_string(p.cell_row));
  }
  return rows;
}

TEST(PackedPointsTest, AFinishedRunIsPackedAsItsRowsAndAnyChangeToThemDropsThePack) {
  TestDb file("packed");
  std::unique_ptr<ResultStore> store = Nights(file, 2);
  SqliteDb& db = store->db();
  EXPECT_TRUE(PackOf(db, "night-0").empty());  // still recording: no pack
  ASSERT_TRUE(store->FinishRun("night-0", "finished", "2024-06-10T04:00:00Z").ok());
  const std::vector<std::string> rows = RowsOf(db, "night-0");
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(PackOf(db, "night-0"), rows);  // the ERROR cell's NULL metrics included
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(),
                          [](const std::string& row) {
                            return row.find(" ERROR ") != std::string::npos &&
                                   row.find(" nan nan nan ") != std::string::npos;
                          }),
            1);

  // A cell recorded again, a metric edited by hand, a cell deleted: each drops the pack.
  ASSERT_TRUE(store->RecordCell("night-0", SyntheticCellResult(7, "cuda:0", 0)).ok());
  EXPECT_TRUE(PackOf(db, "night-0").empty());
  ASSERT_TRUE(store->FinishRun("night-0", "finished", "2024-06-10T05:00:00Z").ok());
  EXPECT_EQ(PackOf(db, "night-0").size(), 9u);
  ExecSql(file.path(), "UPDATE metrics SET min_psnr = 12 WHERE cell_row = (SELECT min(id) FROM cells)");
  EXPECT_TRUE(PackOf(db, "night-0").empty());
  ASSERT_TRUE(store->PackRun("night-0").ok());
  EXPECT_EQ(PackOf(db, "night-0"), RowsOf(db, "night-0"));
  ExecSql(file.path(), "DELETE FROM cells WHERE id = (SELECT max(id) FROM cells WHERE run_id = 'night-0')");
  EXPECT_TRUE(PackOf(db, "night-0").empty());
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM packed_points"), 0);
  // A point moved to another run by hand drops both runs' packs.
  ASSERT_TRUE(store->PackRun("night-0").ok());
  ASSERT_TRUE(store->FinishRun("night-1", "finished", "2024-06-11T05:00:00Z").ok());
  ExecSql(file.path(),
          "UPDATE series_points SET run_id = 'night-1', cell_id = 'moved' WHERE run_id = 'night-0' AND "
          "cell_id = (SELECT min(cell_id) FROM series_points WHERE run_id = 'night-0')");
  EXPECT_EQ(QueryInt(file.path(), "SELECT count(*) FROM packed_points"), 0);
}

TEST(PackedPointsTest, RegressionsReadThePacksAsTheRowsTheyHold) {
  TestDb file("packed");
  std::unique_ptr<ResultStore> store = Nights(file, 10);
  StatusOr<RegressionReport> from_rows = FindRegressions(*store, {});
  ASSERT_TRUE(from_rows.ok());
  ASSERT_GE(from_rows->regressions(), 1) << FormatRegressions(*from_rows);
  for (int night = 0; night < 10; ++night) {
    ASSERT_TRUE(store->FinishRun("night-" + std::to_string(night), "finished", "2024-06-20T00:00:00Z").ok());
  }
  ASSERT_EQ(QueryInt(file.path(), "SELECT count(*) FROM packed_points"), 10);
  // Rows hidden from the scan: only the packs can give the same report now.
  ExecSql(file.path(),
          "DROP TRIGGER packed_points_point_update; UPDATE series_points SET latency_median_s = 99");
  StatusOr<RegressionReport> from_packs = FindRegressions(*store, {});
  ASSERT_TRUE(from_packs.ok());
  EXPECT_EQ(RegressionsToJson(*from_packs).dump(), RegressionsToJson(*from_rows).dump());
}

TEST(PackedPointsTest, ADamagedPackIsCorruptNamingTheFileAndTheRun) {
  TestDb file("packed");
  std::unique_ptr<ResultStore> store = Nights(file, 3);
  ASSERT_TRUE(store->FinishRun("night-1", "finished", "2024-06-20T00:00:00Z").ok());
  ExecSql(file.path(), "UPDATE packed_points SET points = substr(points, 1, 40)");
  StatusOr<RegressionReport> report = FindRegressions(*store, {});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(
      report.status().message().find(file.path() + ": run night-1: packed_points blob is damaged at byte"),
      std::string::npos)
      << report.status().message();
}

TEST(PackedPointsTest, DbCheckNamesTheRunWhosePackDiffersFromItsRows) {
  TestDb file("packed");
  {
    std::unique_ptr<ResultStore> store = Nights(file, 2);
    for (const char* run : {"night-0", "night-1"}) {
      ASSERT_TRUE(store->FinishRun(run, "finished", "2024-06-20T00:00:00Z").ok());
    }
  }
  ASSERT_TRUE(CheckDatabase(file.path()).ok());
  // night-1's blob copied onto night-0: the same cells, other values.
  ExecSql(file.path(),
          "UPDATE packed_points SET points = (SELECT points FROM packed_points WHERE run_id = 'night-1') "
          "WHERE run_id = 'night-0'");
  StatusOr<DbCheckReport> check = CheckDatabase(file.path());
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(check.status().message().find(file.path() + ": run night-0: packed_points differs from its "
                                                        "series_points at cell "),
            std::string::npos)
      << check.status().message();
  ExecSql(file.path(), "DELETE FROM packed_points WHERE run_id = 'night-0'");
  EXPECT_TRUE(CheckDatabase(file.path()).ok());
}

TEST(PackedPointsTest, EveryCutOrFlippedByteOfABlobIsCorruptOrDecodesNeverPastItsEnd) {
  TestDb file("packed");
  std::unique_ptr<ResultStore> store = Nights(file, 1);
  ASSERT_TRUE(store->FinishRun("night-0", "finished", "2024-06-20T00:00:00Z").ok());
  StatusOr<SqliteStatement> stmt = store->db().Prepare("SELECT points FROM packed_points");
  ASSERT_TRUE(stmt.ok() && *stmt->Step());
  const std::string blob(stmt->BlobView(0));
  ASSERT_TRUE(UnpackPoints(blob, "x").ok());
  for (size_t size = 0; size < blob.size(); ++size) {
    StatusOr<std::vector<PackedPoint>> cut = UnpackPoints(blob.substr(0, size), "x");
    ASSERT_FALSE(cut.ok()) << size;
    EXPECT_EQ(cut.status().code(), Status::Code::kCorrupt);
  }
  for (size_t at = 0; at < blob.size(); ++at) {  // under ASan: no read outside the blob
    std::string flipped = blob;
    flipped[at] = static_cast<char>(flipped[at] ^ 0xff);
    (void)UnpackPoints(flipped, "x");
  }
}

TEST(PackedPointsTest, MigratingFromVersion10PacksEveryRun) {
  TestDb file("packed");
  {
    std::unique_ptr<ResultStore> store = Nights(file, 3);
    ASSERT_TRUE(store->FinishRun("night-0", "finished", "2024-06-20T00:00:00Z").ok());
  }
  ExecSql(file.path(),
          "DROP TRIGGER packed_points_point_insert; DROP TRIGGER packed_points_point_update; "
          "DROP TRIGGER packed_points_point_move; DROP TRIGGER packed_points_point_delete; DROP TABLE "
          "packed_points; ALTER TABLE advice DROP COLUMN note; ALTER TABLE advice DROP COLUMN verified; "
          "PRAGMA user_version = 10;");
  auto reopened = ResultStore::Open(file.path());
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_EQ(QueryInt(file.path(), "PRAGMA user_version"), kStoreSchemaVersion);
  for (int night = 0; night < 3; ++night) {  // unfinished runs too: a pack is only a copy
    const std::string run = "night-" + std::to_string(night);
    EXPECT_EQ(PackOf((*reopened)->db(), run), RowsOf((*reopened)->db(), run)) << run;
  }
}

}  // namespace
}  // namespace framegate
