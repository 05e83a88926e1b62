// RunCell: runs one cell in this process and judges it. The pipeline runs with the
// numeric probes and per-step NaN counters attached, the candidate is compared with the
// golden of its config, and DecideVerdict gives the status. This is the whole of
// `framegate check`; `framegate run` calls it in a child process per cell.
#pragma once

#include <map>
#include <string>

#include "golden/golden_file.h"
#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

// What a process that runs cell after cell (a cell worker) keeps between cells: the
// models it built and the goldens it read. A cell run with a cache gives the same result
// as one without (tests/python/test_cell_workers.py compares them).
struct CellRunCache {
  ModelCache models;
  std::map<std::string, Golden> goldens;  // by file path; only goldens that loaded
};

struct CellRunOptions {
  std::string golden_dir;     // where goldens are looked up (GoldenStore)
  // Module range probes (headroom to overflow) on the judged run. Off by default: they
  // cost about 50% of a tiny cell (docs/benchmarks.md). NaN localisation is always on and
  // free for healthy cells: a cell whose latents or frames went non-finite is run once
  // more with every module output watched, to name the first (step, module).
  bool probes = false;
  int warmup = 0;             // untimed runs before the judged one
  int repeats = 1;            // timed runs; the first is the judged one (with probes)
  // Also run the config in FP64 on the CPU: fp64_error_ratio = error(candidate, fp64) /
  // error(golden, fp64), relative L2 of the frames (PyTorch's "no worse than k times
  // FP32's own error" criterion). Needs the golden.
  bool fp64_ref = false;
  std::string artifacts_dir;  // when set: frames.npy and latents.npy of the candidate
  int probe_count = 8;        // least-headroom modules kept in the result
  // Models and goldens kept across cells; null: a cache for this cell only (its warmup,
  // repeats and reruns still share one model).
  CellRunCache* cache = nullptr;
};

// The PipelineSpec of a cell: policy, fault and sampler names resolved (the sampler's
// defaults from the size or package). InvalidInput naming the bad value.
StatusOr<PipelineSpec> SpecOfCell(const Cell& cell);

// The one command that reruns `cell` alone and judges it.
std::string CheckCommandFor(const Cell& cell, const std::string& golden_dir);

// A Status only for bad input that is not the cell's fault: an unknown policy or size,
// a broken model package, a damaged golden (Corrupt naming the file). Everything the
// pipeline does (errors, NaN, unsupported ops) is in the CellResult.
StatusOr<CellResult> RunCell(const Cell& cell, const CellRunOptions& options);

}  // namespace framegate
