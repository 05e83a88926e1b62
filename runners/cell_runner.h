// RunCell: runs one cell in this process and judges it. The pipeline runs with the
// numeric probes and per-step NaN counters attached, the candidate is compared with the
// golden of its config, and DecideVerdict gives the status. This is the whole of
// `framegate check`; `framegate run` calls it in its cell processes (cell_worker.h).
#pragma once

#include <map>
#include <string>

#include "golden/golden_file.h"
#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"
#include "runners/cell_run_options.h"

namespace framegate {

// What a process that runs cell after cell (a cell worker) keeps between cells: the
// models it built and the goldens it read. A cell run with a cache gives the same result
// as one without (tests/python/test_cell_workers.py compares them).
struct CellRunCache {
  ModelCache models;
  std::map<std::string, Golden> goldens;  // by file path; only goldens that loaded
};

// The PipelineSpec of a cell: policy, fault and sampler names resolved (the sampler's
// defaults from the size or package). InvalidInput naming the bad value.
StatusOr<PipelineSpec> SpecOfCell(const Cell& cell);

// A Status only for bad input that is not the cell's fault: an unknown policy or size,
// a broken model package, a damaged golden (Corrupt naming the file). Everything the
// pipeline does (errors, NaN, unsupported ops) is in the CellResult.
StatusOr<CellResult> RunCell(const Cell& cell, const CellRunOptions& options);

}  // namespace framegate
