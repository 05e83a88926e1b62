// CellSlot: one device's way of running cells outside the runner, one at a time: a
// persistent `framegate run-cell --worker` (protocol in runners/cell_worker.h) or a
// `framegate run-cell` process per cell. The matrix runner (runners/matrix_runner.h)
// drives the slots of a run from one thread; a slot is not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "harness/status.h"
#include "runners/matrix_runner.h"

namespace framegate {

// The line a worker writes as soon as it has read a request, before it runs the cell
// (protocol in runners/cell_worker.h).
inline constexpr char kWorkerTookCell[] = "taken";

// How a cell attempt ended, in waitpid's terms: a worker's reply "N" reads as exit code N.
struct AttemptEnd {
  bool timed_out = false;
  int wait_status = 0;
  std::string log;   // where the last stderr line comes from when the cell's own is empty
  std::string note;  // what the runner saw besides the wait status ("" none)
};

class CellSlot {
 public:
  virtual ~CellSlot() = default;
  // Starts the cell whose cell.json is in `dir`; its output files go there too. An
  // error stops the run (no process can be started, no pipe made).
  virtual Status Start(const std::string& dir, const std::string& artifacts) = 0;
  // The attempt's end once it ended or ran past the timeout (its process is then
  // killed); nullopt while it runs.
  virtual std::optional<AttemptEnd> Poll() = 0;
  // A descriptor that becomes readable when the attempt may have ended; -1 when none.
  virtual int WakeFd() const { return -1; }
  virtual void Kill() = 0;  // the run was interrupted
  int processes_started() const { return processes_started_; }

 protected:
  int processes_started_ = 0;
};

// The slot `o.isolation` asks for, for the cells of `device`; a worker writes its own
// stderr (outside cells) to files in `scratch`. `o` must outlive the slot.
std::unique_ptr<CellSlot> MakeCellSlot(const CellProcessOptions& o, const std::string& device,
                                       const std::string& scratch);

}  // namespace framegate
