// What a person at a terminal sees of a run: a progress display while cells run, and
// at the end the matrix grid (device x policy per pipeline, each cell's status and key
// metric or reason, its median time), the counts, and the failing cells each with the
// one command that reproduces it.
//
// Colour and the live line follow the environment: colour only when the stream is a
// terminal and NO_COLOR is unset or empty (no-color.org) and TERM is not "dumb"; the
// live, rewritten progress line only on a terminal and when CI is unset, otherwise one
// plain line per finished cell (logs stay readable).
#pragma once

#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "harness/run_record.h"

namespace framegate {

struct TerminalStyle {
  bool color = false;      // ANSI colours
  bool live_line = false;  // one progress line rewritten in place ("\r")
};

// Reads isatty(fd), NO_COLOR, TERM and CI from the process environment.
TerminalStyle DetectTerminalStyle(int fd);

// The end-of-run summary. Writes to `out`; returns nothing (the caller owns the exit code).
void WriteTerminalSummary(const RunRecord& run, const TerminalStyle& style, std::ostream& out);

// Progress of a running matrix. Thread-safe: the runner may report cells from several
// threads. `now_seconds` is the clock (monotonic seconds); tests inject their own.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, int total_cells, TerminalStyle style,
                  std::function<double()> now_seconds);
  // A cell's process started.
  void CellStarted(const Cell& cell);
  // A cell ended: counts it, prints its line (plain mode; in live mode only failures get
  // a permanent line above the progress line) and redraws.
  void CellFinished(const CellResult& result);
  // Clears the live line; call before printing the summary.
  void Finish();

  // "[12/40] 2 failing | running reference:tiny cpu bf16 seed=0 | ETA 1m20s" (no colour).
  std::string ProgressLine() const;

 private:
  void Redraw();                                         // mutex_ held
  std::string CellLine(const CellResult& result) const;  // mutex_ held
  std::string ProgressLineLocked() const;

  std::ostream& out_;
  const int total_;
  const TerminalStyle style_;
  std::function<double()> now_;
  const double started_;
  mutable std::mutex mutex_;
  int done_ = 0;
  int failures_ = 0;
  std::vector<std::string> running_;  // labels of started, unfinished cells
};

// The clock ProgressPrinter uses outside tests: std::chrono::steady_clock in seconds.
double SteadyNowSeconds();

}  // namespace framegate
