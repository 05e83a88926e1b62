// What every report shows of a run, computed in one place so that the terminal grid, the
// HTML index, the JUnit file and the JSON agree: the matrix grid (per pipeline, rows of
// device (+ seed, fault, sampler overrides), columns of policies), a cell's one-line
// summary (key metric or reason), its median time, and the counts by status.
// All functions are pure; the grid keeps pointers into the RunRecord it was built from.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/cell_result.h"
#include "harness/run_record.h"
#include "harness/sample_stats.h"

namespace framegate {

// Median of the timed repeats' generation seconds; NaN when there are none.
double MedianGenerationSeconds(const CellResult& result);

// PSNR as the reports show it: NaN (shown "nan dB") where the cell's health marks frame t
// (or, for the minimum, any frame) non-finite. CellResult's JSON form writes a NaN PSNR as
// null and reads null back as +inf; a broken frame must never show as a perfect score.
double ShownFramePsnr(const CellResult& result, size_t t);
double ShownMinPsnr(const CellResult& result);
// NamedMetrics(*result.metrics) with min_psnr replaced by ShownMinPsnr; empty without metrics.
std::vector<NamedMetric> ShownMetrics(const CellResult& result);

// "41.23 dB", "inf dB" (identical frames), "nan dB".
std::string FormatPsnr(double psnr_db);
// "0.9981" (4 decimals), "nan".
std::string FormatSsim(double ssim);
// "850 ms", "1.23 s", "2m05s"; "-" for NaN or negative.
std::string FormatSeconds(double seconds);
// "PSNR 41.23 dB, SSIM 0.9981" (min PSNR, mean SSIM); "" when the cell has no metrics.
std::string KeyMetric(const CellResult& result);
// One line: the key metric for PASS and XPASS; the reason otherwise (the key metric when
// the reason is empty). "" only when there is neither.
std::string CellSummary(const CellResult& result);
// The policy shown for a cell: "fp16", or "fp16 -> bf16" when --fallback changed it.
std::string PolicyShown(const CellResult& result);

// How bad a status is, for colouring a grid cell holding several results: higher is
// worse. PASS < XFAIL < UNSUPPORTED < XPASS < UNRESOLVED < FAIL < BROKEN_FRAMES <
// NONFINITE < TIMEOUT < ERROR < CRASH.
int StatusSeverity(CellStatus status);
// The same colour everywhere: "#2e7d32" for PASS, ... (CSS hex, readable on white text).
const char* StatusColour(CellStatus status);

struct GridRow {
  std::string label;  // "cpu", "cpu seed=1", "cuda:0 seed=0 fault=f2"
  // One entry per policy column (PipelineGrid::policies), each with the results there.
  std::vector<std::vector<const CellResult*>> columns;
};

struct PipelineGrid {
  std::string pipeline;               // "reference:tiny", "model:<name>"
  std::vector<std::string> policies;  // column headers, first-seen order
  std::vector<GridRow> rows;          // first-seen order
};

// Groups the cells by pipeline (first-seen order). A row label adds " seed=N" only when
// the pipeline has cells with more than one seed, and fault/sampler/steps/guidance only
// when set, so that no two cells share a (row, column) unless they are the same cell.
std::vector<PipelineGrid> BuildGrids(const std::vector<CellResult>& cells);

struct StatusCounts {
  std::map<CellStatus, int> by_status;
  int total = 0;
  int failures = 0;  // IsFailure
};
StatusCounts CountStatuses(const std::vector<CellResult>& cells);
// "12 cells: 9 PASS, 1 FAIL, 2 UNSUPPORTED" in the enum's order.
std::string CountsLine(const StatusCounts& counts);

// The cells that fail the run, in run order.
std::vector<const CellResult*> FailingCells(const std::vector<CellResult>& cells);

}  // namespace framegate
