// MatrixRunner: runs a list of cells outside this process, so that a crash, abort, hang
// or out-of-memory of one cell becomes that cell's CRASH / TIMEOUT / ERROR and the run
// goes on. Each device has one slot that runs its cells in matrix order; devices run in
// parallel. A slot is either
//   - a persistent worker (`framegate run-cell --worker`, the default): one process runs cell
//     after cell, keeping the models it built and the goldens it read. A cell that
//     crashes or hangs takes the worker with it (CRASH / TIMEOUT) and a new worker takes
//     the next cell; a worker that dies before it took a cell (idle) is replaced and the
//     cell resent, once, without blaming it; a worker is also replaced after
//     `worker_max_cells` cells or once its resident memory passes
//     `worker_max_rss_bytes`; or
//   - a process per cell (`framegate run-cell`).
// Every finished cell is recorded through `on_finished` before the slot's next cell
// starts. The cells' files go to a scratch folder in $TMPDIR (runners/scratch_folder.h),
// one folder per attempt named <cell id>-<attempt number>, removed at the end.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "runners/cell_run_options.h"

namespace framegate {

enum class CellIsolation { kWorker, kProcess };
// "worker" / "process"; nullopt for another name.
std::optional<CellIsolation> ParseCellIsolation(const std::string& name);

struct CellProcessOptions {
  std::string framegate_binary;  // the LibTorch executable (its run-cell command)
  // What each cell runs with; settings.run.artifacts_dir is a root: each cell's frames
  // go to <artifacts_dir>/<cell id>/ ("" none).
  CellProcessSettings settings;
  double timeout_seconds = 600;  // per cell attempt, wall clock
  bool fallback = false;         // NONFINITE/BROKEN_FRAMES: retry with the policy's fallback
  CellIsolation isolation = CellIsolation::kWorker;
  int worker_max_cells = 100;                // 0: no limit
  int64_t worker_max_rss_bytes = 8LL << 30;  // 0: no limit
};

// Called for every cell as it finishes (from the runner's thread). A non-ok Status stops
// the run (e.g. the store cannot write).
using CellFinished = std::function<Status(const CellResult&)>;
using CellStarted = std::function<void(const Cell&)>;

struct MatrixRunSummary {
  int finished = 0;
  std::string blas;  // the BLAS library the cell processes loaded (their results say)
  bool interrupted = false;
  bool harness_error = false;  // a cell reported bad input (exit 2)
  int processes_started = 0;   // cell processes or workers
};

// Runs `cells` until all are done or `*stop` becomes true (then running processes are
// killed and the summary says interrupted). Never throws. An error (the scratch folder
// cannot be made, a process cannot be started, `on_finished` failed) ends the run: its
// message names what failed and why.
StatusOr<MatrixRunSummary> RunCells(const std::vector<Cell>& cells, const CellProcessOptions& options,
                                    const CellStarted& on_started, const CellFinished& on_finished,
                                    const std::atomic<bool>* stop);

// With --fallback, the next step after an attempt ended NONFINITE or BROKEN_FRAMES:
// `tried` holds the policies of the cell's attempts so far, in order, the one that just
// ended last; `fallback` is that policy's fallback ("" none).
struct FallbackStep {
  std::string next;     // the policy of the next attempt; "" when the cell is finished
  std::string stopped;  // why there is none although `fallback` is set (it was tried)
};
FallbackStep NextFallback(const std::vector<std::string>& tried, const std::string& fallback);

// The result of a cell whose process ended without writing one: TIMEOUT, or CRASH with
// the signal or exit code and the last line the process wrote to stderr.
CellResult ResultOfLostProcess(const Cell& cell, bool timed_out, int wait_status,
                               const std::string& last_stderr_line);

}  // namespace framegate
