// MatrixRunner: runs a list of cells, each in its own `framegate run-cell` process, so a
// crash, abort, hang or out-of-memory of one cell becomes that cell's CRASH / TIMEOUT /
// ERROR and the run goes on. Cells on different devices run in parallel, one process per
// device at a time; every finished cell is recorded through the store in its own
// transaction before the next one starts on that device.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "runners/cell_runner.h"

namespace framegate {

struct CellProcessOptions {
  std::string framegate_binary;  // the executable that has the run-cell command
  // What each cell process runs with; its artifacts_dir is a root: each cell's frames go
  // to <artifacts_dir>/<cell id>/ ("" none).
  CellRunOptions cell;
  double timeout_seconds = 600;  // per cell attempt, wall clock
  int threads = 0;               // LibTorch threads of each cell process
  bool deterministic = false;
  bool fallback = false;  // NONFINITE/BROKEN_FRAMES: retry with the policy's fallback
};

// Called for every cell as it finishes (from the runner's thread). A non-ok Status stops
// the run (e.g. the store cannot write).
using CellFinished = std::function<Status(const CellResult&)>;
using CellStarted = std::function<void(const Cell&)>;

struct MatrixRunSummary {
  int finished = 0;
  bool interrupted = false;
  bool harness_error = false;  // a cell process reported bad input (exit 2)
};

// Runs `cells` until all are done or `*stop` becomes true (then running processes are
// killed and the summary says interrupted). Never throws.
StatusOr<MatrixRunSummary> RunCellsInProcesses(const std::vector<Cell>& cells,
                                               const CellProcessOptions& options,
                                               const CellStarted& on_started,
                                               const CellFinished& on_finished,
                                               const std::atomic<bool>* stop);

// The result of a cell whose process ended without writing one: TIMEOUT, or CRASH with
// the signal or exit code and the last line the process wrote to stderr.
CellResult ResultOfLostProcess(const Cell& cell, bool timed_out, int wait_status,
                               const std::string& last_stderr_line);

// Test hook (TEST_ in the style of leveldb): with FRAMEGATE_TEST_CELL_FAULTS set to
// "POLICY:segv,POLICY:abort,POLICY:hang,..." a `run-cell` process whose cell has that
// policy crashes, aborts or hangs on purpose before running. Used by the runner's tests.
void TEST_InjectCellFault(const Cell& cell);

}  // namespace framegate
