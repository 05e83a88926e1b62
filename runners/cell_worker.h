// The process side of a cell run: `framegate run-cell` (one cell, then exit) and
// `framegate run-cell --worker` (cell after cell, for the runner's persistent workers). Both
// prepare the process the same way for each cell (PrepareProcessForCell), so that a cell
// gives the same result in a worker, after any other cells, as in a process of its own.
//
// Worker protocol (runners/cell_slot.cc is the other end): the runner writes one
// request line to the worker's stdin, the JSON {"dir": D, "artifacts": A}; D holds
// cell.json. As soon as it has read the line the worker replies "taken" on its original
// stdout (kWorkerTookCell). It sends the cell's stdout and stderr to D/stdout.txt and
// D/stderr.txt, writes D/result.json (atomically), then replies with one more line: the
// exit code a run-cell process would have had ("0", or "2" for bad input, whose one-line
// error is the last line of D/stderr.txt). End of stdin: the worker exits 0.
// A worker that ends after "taken" and before the exit code was ended by the cell
// (crash, abort, hang): CRASH / TIMEOUT, and the runner starts another for the next cell.
// A worker that ends before "taken" died idle: the runner sends the cell to a new
// worker without blaming it, once; if that one dies before "taken" too, the cell is CRASH
// with a reason saying so.
#pragma once

#include <string>

#include "harness/cell.h"
#include "harness/status.h"
#include "runners/cell_runner.h"

namespace framegate {

// Puts this process in the state a fresh process would have for `cell`: LibTorch's
// thread count, the deterministic and TF32 switches as `settings` ask (else as the
// process started), the default generator at LibTorch's initial seed, the peak-RSS mark
// reset. Also applies TEST_InjectCellFault. Call before each cell.
void PrepareProcessForCell(const Cell& cell, const CellProcessSettings& settings);

// Runs the cell in `cell_path` (JSON) and writes its result to `result_path` (JSON,
// atomically). Returns the process's exit code: 0, or 2 after printing a one-line error
// for bad input.
int RunCellFile(const std::string& cell_path, const std::string& result_path,
                const std::string& artifacts_dir, const CellProcessSettings& settings, CellRunCache* cache);

// The worker loop on stdin/stdout (protocol above). Returns the exit code.
int ServeCells(const CellProcessSettings& settings);

// Test hook: with FRAMEGATE_TEST_WORKER_EXIT_AT_REQUEST=N a worker exits (code 3) when
// it has read its N-th request, before it replies "taken": a worker that dies idle.
void TEST_ExitWorkerAtRequest(int request);

// Test hook (TEST_ in the style of leveldb): with FRAMEGATE_TEST_CELL_FAULTS set to
// "POLICY:segv,POLICY:abort,POLICY:hang,..." a cell process or worker whose cell has
// that policy crashes, aborts or hangs on purpose before running it. Used by the
// runner's tests.
void TEST_InjectCellFault(const Cell& cell);

}  // namespace framegate
