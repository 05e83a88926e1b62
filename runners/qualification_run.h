// The qualify use case (`framegate qualify`, docs/qualification.md): every cell of a
// matrix replayed step by step on each device it names, `repeats` passes per cell, each
// (device, cell) in a `check --replay` process of its own (a CPU kernel path needs its own
// process), then one verdict per device (checks/qualification.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/qualification.h"
#include "harness/status.h"

namespace framegate {

struct QualifyOptions {
  std::vector<Cell> cells;  // the matrix's cells; UNSUPPORTED ones are skipped
  std::string golden_dir;
  int repeats = 3;
  int threads = 1;         // LibTorch threads of each cell process
  std::string inject_sdc;  // testing aid (pipelines/sdc_injection.h); "" none
  std::string pipeline_executable;
  std::function<void(const std::string& line)> on_progress;  // one line per (device, cell)
};

struct QualifyOutcome {
  std::vector<DeviceQualification> devices;
  std::vector<CellResult> results;  // one per (device, cell) run, with its passes
  double seconds = 0;
};

// InvalidInput (exit 2) for what a cell process calls bad input (a missing or version 1
// golden, a damaged one: its one line); Internal for a process that could not be started
// or gave no result.
StatusOr<QualifyOutcome> RunQualification(const QualifyOptions& options);

}  // namespace framegate
