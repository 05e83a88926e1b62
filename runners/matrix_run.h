// The run use case of `framegate run`, without LibTorch: expand a matrix (or take ad-hoc
// cells) and its shard, begin the run in the store (or re-begin the stored run that
// --resume names), record every cell as it finishes (UNSUPPORTED ones without running
// them), and finish the run as "finished" or "interrupted". The CLI (cli/run_command.cc)
// only parses flags, calls RunMatrixIntoStore and prints.
//
//   MatrixRunRequest request;  // matrix, shard, provenance, how cells run
//   StatusOr<MatrixRunPlan> plan = PlanMatrixRun(request);  // touches no store
//   StatusOr<MatrixRunOutcome> outcome = RunMatrixIntoStore(request, *plan, store, observers, &stop);
//
// Not thread-safe: one call at a time per ResultStore.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/cell_result.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "matrix/matrix_spec.h"
#include "runners/matrix_runner.h"
#include "store/result_store.h"

namespace framegate {

struct MatrixRunRequest {
  // What runs: a matrix (a file or a shipped name) or, when `adhoc`, `adhoc_cells`.
  std::string matrix = "local";
  bool adhoc = false;
  std::vector<Cell> adhoc_cells;
  std::vector<DeviceInfo> found;  // the devices this host has (DiscoverDevices)
  std::string shard;              // "i/n"; "" the whole matrix

  // A new run's identity and provenance (run_id, host, versions, tags, command, argv);
  // matrix_path, matrix_sha256 and shard are filled here. Unused on a resume: the
  // stored run is the run.
  RunInfo new_run;
  // "" a new run; else the stored run to finish: its recorded cells are skipped, its
  // matrix must have the stored sha256 and `shard` must be the stored one.
  std::string resume_run_id;

  // How each cell runs. Set here from the matrix unless given: settings.run.repeats and
  // .warmup, timeout_seconds, settings.run.artifacts_dir (<artifacts_root>/<run id>).
  CellProcessOptions process;
  int repeats = 0;             // 0: the matrix's
  int warmup = -1;             // < 0: the matrix's
  double timeout_seconds = 0;  // 0: the matrix's, else 600
  std::string artifacts_root = "framegate-artifacts";
};

// Discovery: the request's matrix expanded and its shard taken, before any store is
// touched (a bad matrix, shard or cell name creates no database).
struct MatrixRunPlan {
  MatrixSpec spec;          // the whole matrix (spec.cells: every cell)
  std::vector<Cell> cells;  // the shard's cells, in matrix order
};
// InvalidInput / NotFound naming the file, line and column, the shard or the bad name.
StatusOr<MatrixRunPlan> PlanMatrixRun(const MatrixRunRequest& request);

// Injected callbacks, each optional, called from the calling thread.
struct MatrixRunObservers {
  // Once the run is begun in the store, before any cell is recorded: the run as stored
  // and the number of cells of its (shard of the) matrix, recorded ones included.
  std::function<void(const RunInfo& run, int cells)> on_begun;
  CellStarted on_started;                              // a cell's process starts it
  std::function<void(const CellResult&)> on_recorded;  // a cell is in the store
};

struct MatrixRunOutcome {
  RunInfo run;                 // as stored; run.command is what reproduces the run
  int cells_run = 0;           // cells run and recorded by this call (not the UNSUPPORTED)
  bool interrupted = false;    // `*stop` became true: the run is stored "interrupted"
  bool harness_error = false;  // a cell process reported bad input (exit 2)
};

// The command that started a run: `framegate run` and its words as given, each quoted
// for POSIX sh (runs.command), so that pasting it runs exactly that and nothing else.
std::string RunCommandLine(const std::vector<std::string>& words);
// What finishes the interrupted `run`: its stored command and `--resume RUN_ID`, quoted.
std::string ResumeCommandLine(const RunInfo& run);

// Runs the planned cells into `store` until every cell is recorded or `*stop` (may be null)
// becomes true. Returns the outcome; the run is then stored "finished" or "interrupted".
// Precondition: `plan` is PlanMatrixRun(request)'s. Errors:
//   - InvalidInput / NotFound before anything is stored: an unknown --resume run, a
//     resumed run whose matrix changed (sha256) or whose shard differs from the stored one;
//   - a store or process error after the run was begun: the run is stored
//     "interrupted" (best effort) and the error returned; recorded cells stay.
// Never assigns a cell status itself: UNSUPPORTED cells are judged by DecideVerdict.
StatusOr<MatrixRunOutcome> RunMatrixIntoStore(const MatrixRunRequest& request, const MatrixRunPlan& plan,
                                              ResultStore& store, const MatrixRunObservers& observers,
                                              const std::atomic<bool>* stop);

}  // namespace framegate
