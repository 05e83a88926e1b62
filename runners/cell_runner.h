// RunCell: runs one cell in this process and judges it. The pipeline runs with the
// numeric probes and per-step NaN counters attached, the candidate is compared with the
// golden of its config, and DecideVerdict gives the status. This is the whole of
// `framegate check`; `framegate run` calls it in its cell processes (cell_worker.h).
#pragma once

#include <map>
#include <string>

#include "golden/golden_file.h"
#include "golden/golden_store.h"
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

// A cell with every name resolved once (ResolveCellNames, plus what needs the model
// package: its sampler defaults) into what running and judging it take.
struct ResolvedCell {
  Cell cell;                   // as the matrix gave it
  PipelineSpec spec;           // what RunPipeline runs: pipeline, policy, fault, sampler
  ToleranceProfile tolerance;  // the profile that judges it
  GoldenKey golden;            // which golden it is compared with
};

// InvalidInput naming the bad value (an unknown policy, size, fault, sampler, tolerance
// profile), or the package's error for a broken model package.
StatusOr<ResolvedCell> ResolveCell(const Cell& cell);
// `resolved` at another seed: only the seed of the cell, its spec and its golden key
// change (the package is not read or hashed again).
ResolvedCell AtSeed(ResolvedCell resolved, uint64_t seed);

// What RunPipeline runs for `cell` (names resolved by ResolveCellNames; the sampler's
// defaults from the size or the package's model.toml).
StatusOr<PipelineSpec> PipelineSpecOf(const Cell& cell, const CellNames& names);

// A Status only for bad input that is not the cell's fault: a damaged golden (Corrupt
// naming the file), a golden that does not fit the cell. Everything the pipeline does
// (errors, NaN, unsupported ops) is in the CellResult.
StatusOr<CellResult> RunCell(const ResolvedCell& cell, const CellRunOptions& options);

}  // namespace framegate
