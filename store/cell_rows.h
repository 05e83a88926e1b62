// How one CellResult maps onto rows of cell_specs, cells, metrics, samples, probes and
// advice (schema v4). Internal to the store: ResultStore and the store's queries use it.
#pragma once

#include <optional>
#include <string>

#include "harness/cell_result.h"
#include "harness/sample_stats.h"
#include "harness/status.h"
#include "store/sqlite_db.h"

namespace framegate {

// The columns ReadCellColumns expects, from `cell_specs s JOIN cells c`: id, cell_id,
// latency_median_s, the Cell's fields (VisitCellFields), then the result's.
extern const char* const kCellSelectColumns;
constexpr int kCellSelectColumnCount = 49;
// The columns ReadMetricColumns expects, from `LEFT JOIN metrics m` (NULL: no metrics).
extern const char* const kMetricSelectColumns;
constexpr int kMetricSelectColumnCount = 10;
// The columns ReadAdviceColumns expects, from `LEFT JOIN advice a` (NULL: no advice).
extern const char* const kAdviceSelectColumns;
constexpr int kAdviceSelectColumnCount = 8;

// Fills result->cell and every scalar field kept in cells from columns first..; Corrupt
// (naming the file and the cell) for a status name this framegate does not know.
Status ReadCellColumns(const SqliteStatement& row, int first, const std::string& db_path, CellResult* result);
// Sets *metrics from the metric columns first.. (nullopt when the row had none); frames
// are left empty (they are samples).
void ReadMetricColumns(const SqliteStatement& row, int first, std::optional<ComparisonMetrics>* metrics);
// Sets result->advice from the advice columns first.. (reset when the row had none);
// Corrupt (naming the file and the cell) for islands or runs that are not the advice JSON.
// Precondition: result->cell is read (the message names it).
Status ReadAdviceColumns(const SqliteStatement& row, int first, const std::string& db_path,
                         CellResult* result);

// Writes a result's rows; the caller holds the write transaction. Statements are prepared
// once and reused (insert throughput is a target).
class CellRowWriter {
 public:
  static StatusOr<std::unique_ptr<CellRowWriter>> Prepare(SqliteDb& db);
  // Replaces the (run_id, cell id) rows if they exist. Returns the new cells.id.
  StatusOr<int64_t> Write(const std::string& run_id, const CellResult& result);

 private:
  CellRowWriter() = default;
  Status WriteSamples(int64_t cell_row, const CellResult& result);
  Status WriteAdvice(int64_t cell_row, const Advice& advice);
  std::optional<SqliteStatement> insert_spec_, delete_cell_, insert_cell_, insert_metrics_, insert_sample_,
      insert_probe_, insert_advice_;
  SqliteDb* db_ = nullptr;
};

// Reads what a cell keeps outside its cells row: per-frame scores, per-step counts, timing
// repeats (samples) and probes.
class CellChildReader {
 public:
  static StatusOr<std::unique_ptr<CellChildReader>> Prepare(SqliteDb& db);
  Status ReadSamples(int64_t cell_row, CellResult* result);
  Status ReadProbes(int64_t cell_row, CellResult* result);

 private:
  CellChildReader() = default;
  std::optional<SqliteStatement> samples_, probes_;
};

}  // namespace framegate
