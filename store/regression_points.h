// Loading the series `framegate regressions` analyses: the runs of a window (and the
// baseline's runs), and per (cell, device model) the points of those runs, oldest first.
// Internal to regressions.cc. Reads each run's packed_points blob (store/packed_points.h),
// or its series_points rows (the narrow copy of the columns the analysis needs, one range
// scan per run) when the run has none: that is what keeps it fast at fleet scale.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/cell_status.h"
#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

struct SeriesRun {
  std::string run_id, started_at, git_sha, tags;
  int environment = 0;      // equal for runs with the same environment fingerprint
  std::string fingerprint;  // "key=value" lines, sorted: RunFingerprint()
  bool in_window = false;
  bool tagged = false;  // carries the baseline tag
};

struct SeriesPoint {
  int run = 0;  // index into SeriesData::runs
  CellStatus status = CellStatus::kPass;
  double latency = 0, min_psnr = 0, mean_ssim = 0, rel_l2 = 0;  // NaN when absent
  int64_t recorded = 0;  // the cell's row in `cells`: the order its run recorded it (0: unknown)
  // The run's load on this series' device, and the load of the cells recorded next to
  // this one: latency / load is what `regressions` judges, latency / neighbour_load what
  // its environment test judges (regressions.cc, SetLoadFactors). 1 until set.
  double load = 1, neighbour_load = 1;
};

// A series' points: a slice of SeriesData's one array of every series' points.
class PointSpan {
 public:
  PointSpan() = default;
  PointSpan(SeriesPoint* first, size_t size) : first_(first), size_(size) {}
  SeriesPoint* begin() const { return first_; }
  SeriesPoint* end() const { return first_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  SeriesPoint& operator[](size_t i) const { return first_[i]; }
  SeriesPoint& back() const { return first_[size_ - 1]; }

 private:
  SeriesPoint* first_ = nullptr;
  size_t size_ = 0;
};

// Memory for SeriesPoints that the kernel may back with 2 MiB pages (MADV_HUGEPAGE, for
// transparent huge pages in "madvise" mode): a 14-day fleet window's 20 MB of points
// fault in a few times instead of once per 4 KiB page (docs/store.md, Scale).
struct SeriesPointsFree {
  void operator()(SeriesPoint* points) const;
};
using SeriesPointArray = std::unique_ptr<SeriesPoint[], SeriesPointsFree>;
SeriesPointArray AllocateSeriesPoints(size_t count);

struct Series {
  std::string cell_id;
  int model = 0, family = 0;  // indices into SeriesData::models / families
  int device = 0;             // index into SeriesData::device_count's range (the spec's device)
  PointSpan points;           // oldest first, in SeriesData::point_array
};

struct SeriesData {
  std::vector<SeriesRun> runs;  // oldest first
  std::vector<Series> series;
  SeriesPointArray point_array;       // every series' points, series after series
  std::vector<std::string> models;    // device models ("NVIDIA L4")
  std::vector<std::string> families;  // cell families ("reference:tiny cuda fp16 seed=3")
  int device_count = 0;               // distinct spec devices ("cuda:3")
  std::map<std::string, std::vector<std::string>> family_models;  // every model a family ran on
};

// The baseline as given on the command line, resolved.
struct BaselineChoice {
  enum class Kind { kLastGood, kRun, kTag } kind = Kind::kLastGood;
  std::string name;  // run id or tag
};

// A run's environment as "key=value" lines sorted by key: the run's host, LibTorch, CUDA
// and BLAS columns, every field of its fingerprint JSON (runs.fingerprint: build flags,
// compiler, CPU ISA...) and its devices' drivers. Equal strings: the same environment.
std::string FingerprintText(const std::map<std::string, std::string>& fields);
// The fields two fingerprints differ in: "blas: /a -> /b".
std::vector<std::string> FingerprintChanges(const std::string& before, const std::string& after);

// "YYYY-MM-DD" `days` before the ISO 8601 time `iso`; "" when `iso` is not one.
std::string DaysBefore(const std::string& iso, int days);
// Whether `since` starts with a valid YYYY-MM-DD date.
bool IsIsoDate(const std::string& since);

// Resolves "last-good" / a run id / a tag; InvalidInput naming the file when none fits.
StatusOr<BaselineChoice> ResolveBaseline(SqliteDb& db, const std::string& baseline);
// The newest run's started_at, "" for an empty store.
StatusOr<std::string> NewestRunStart(SqliteDb& db);
// Loads runs started at or after `since`, plus the baseline run (or the runs carrying the
// baseline tag), and their points.
StatusOr<SeriesData> LoadSeries(SqliteDb& db, const std::string& since, const BaselineChoice& baseline);

}  // namespace framegate
