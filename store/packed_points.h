// packed_points (schema 11): one row per run holding that run's series_points rows in one
// blob, so that `regressions` reads a run of 20,000 cells with one lookup instead of a
// 20,000-row range scan (docs/store.md, Scale).
//
// A cache with one invariant: a run's row, when present, holds exactly its series_points
// rows. PackRunPoints writes it (FinishRun, merge, the v10 -> v11 migration); triggers on
// series_points delete it whenever a point of its run is inserted, changed or deleted.
// A reader falls back to series_points for a run without one (a run still recording).
//
// Blob format, little-endian, varints unsigned LEB128:
//   "FGP1"  varint statuses  statuses x (varint length, bytes)  varint points
//   points x (varint id length, id bytes, varint status index, 4 x float64 bits of
//             latency_median_s, min_psnr, mean_ssim, rel_l2 (NULL as NaN),
//             zigzag varint of cell_row minus the previous point's (NULL as 0))
// in series_points' key order (cell_id).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

// One series_points row, as SqliteStatement reads it (Real: NULL as NaN; Int: NULL as 0).
// The views point into the blob it was unpacked from.
struct PackedPoint {
  std::string_view cell_id, status;
  double latency_median_s = 0, min_psnr = 0, mean_ssim = 0, rel_l2 = 0;
  int64_t cell_row = 0;
};

// A run's series_points rows in key order (?1: the run id); PointOfRow reads one.
constexpr const char* kRunPointsSql =
    "SELECT cell_id, status, latency_median_s, min_psnr, mean_ssim, rel_l2, cell_row "
    "FROM series_points WHERE run_id = ? ORDER BY cell_id";
PackedPoint PointOfRow(const SqliteStatement& row);

// Packs the run's series_points rows into its packed_points row (replacing one). Call it
// inside a write transaction, so that the rows it read are the rows it stores.
Status PackRunPoints(SqliteDb& db, const std::string& run_id);

// Packs every run (the v10 -> v11 migration).
Status PackAllRuns(SqliteDb& db);

// `db check`: Corrupt, naming the file, the run and the first point that differs, when a
// run's blob does not unpack or does not equal its series_points rows.
Status CheckPackedPoints(SqliteDb& db);

// Reads the points of a blob PackRunPoints wrote, in its order, one at a time (no copy):
//   StatusOr<PackedPointsReader> reader = PackedPointsReader::Open(blob, "file: run r");
//   PackedPoint p;
//   for (StatusOr<bool> more = reader->Next(&p); ...; more = reader->Next(&p))
// Open and Next give Corrupt, naming `where` (the file and the run) and the byte offset,
// for a blob that is not one. The blob must outlive the reader and the points.
class PackedPointsReader {
 public:
  static StatusOr<PackedPointsReader> Open(std::string_view blob, const std::string& where);
  // The next point into *point: true; false after the last one.
  StatusOr<bool> Next(PackedPoint* point);

 private:
  PackedPointsReader(std::string_view blob, std::string where) : blob_(blob), where_(std::move(where)) {}
  Status Damaged(const std::string& what) const;
  std::string_view blob_;
  std::string where_;
  size_t offset_ = 0;
  std::vector<std::string_view> statuses_;
  uint64_t left_ = 0;  // points not read yet
  int64_t previous_row_ = 0;
};

// Every point of a blob (tests, checks): PackedPointsReader's errors.
StatusOr<std::vector<PackedPoint>> UnpackPoints(std::string_view blob, const std::string& where);

}  // namespace framegate
