#include "reports/terminal_report.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "reports/markup.h"
#include "reports/run_summary.h"

namespace framegate {
namespace {

constexpr size_t kMaxGridCellWidth = 40;

// Display width of UTF-8 text: one column per code point (no escape codes inside).
size_t Width(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Cuts `text` to at most `width` columns, ending in "..." when cut; never splits a
// UTF-8 sequence.
std::string Truncate(const std::string& text, size_t width) {
  if (Width(text) <= width) return text;
  std::string out;
  size_t columns = 0;
  for (char c : text) {
    const bool starts_code_point = (c & 0xC0) != 0x80;
    if (starts_code_point && ++columns > width - 3) break;
    out += c;
  }
  return out + "...";
}

// Text from configs, models and exceptions, safe to print: invalid UTF-8 and control
// characters (ESC included) become '?', so no escape sequence reaches the terminal.
std::string Printable(const std::string& text) {
  std::string out = ValidUtf8(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

const char* AnsiColour(CellStatus status) {
  switch (status) {
    case CellStatus::kPass:
    case CellStatus::kXfail:
      return "\033[32m";  // green
    case CellStatus::kUnsupported:
      return "\033[2m";  // dim
    case CellStatus::kXpass:
    case CellStatus::kUnresolved:
      return "\033[33m";  // yellow
    default:
      return "\033[1;31m";  // bold red
  }
}

std::string StatusWord(CellStatus status, bool color) {
  if (!color) return StatusName(status);
  return std::string(AnsiColour(status)) + StatusName(status) + "\033[0m";
}

// A grid cell as (plain text, coloured text): "PASS PSNR 41.2 dB, SSIM 0.99 1.23 s".
std::pair<std::string, std::string> GridCellText(const std::vector<const CellResult*>& results, bool color) {
  if (results.empty()) return {"-", "-"};
  std::string plain, coloured;
  for (const CellResult* r : results) {
    if (!plain.empty()) {
      plain += "; ";
      coloured += "; ";
    }
    const std::string word = StatusName(r->status);
    const double seconds = MedianGenerationSeconds(*r);
    const std::string time = std::isnan(seconds) ? "" : " " + FormatSeconds(seconds);
    std::string rest = Printable(CellSummary(*r));
    if (!r->policy_used.empty() && r->policy_used != r->cell.policy) {
      rest = "(" + Printable(r->policy_used) + ") " + rest;
    }
    const size_t used = word.size() + 1 + Width(time);
    rest = Truncate(rest, used + 8 < kMaxGridCellWidth ? kMaxGridCellWidth - used : 8) + time;
    if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
    plain += word + (rest.empty() ? "" : " " + rest);
    coloured += StatusWord(r->status, color) + (rest.empty() ? "" : " " + rest);
  }
  return {plain, coloured};
}

// A text table: each entry is (plain text, text with colour codes).
using TextTable = std::vector<std::vector<std::pair<std::string, std::string>>>;

// Device rows x policy columns, transposed (policy rows) when there are more policies
// than rows, so that a typical matrix (few devices, many policies) fits a terminal.
TextTable GridTable(const PipelineGrid& grid, bool color) {
  TextTable table(grid.rows.size() + 1);
  table[0].push_back({"device", "device"});
  for (const std::string& name : grid.policies) {
    const std::string policy = Printable(name);
    table[0].push_back({policy, policy});
  }
  for (size_t r = 0; r < grid.rows.size(); ++r) {
    const std::string label = Printable(grid.rows[r].label);
    table[r + 1].push_back({label, label});
    for (const auto& column : grid.rows[r].columns) table[r + 1].push_back(GridCellText(column, color));
  }
  if (grid.policies.size() <= grid.rows.size()) return table;
  TextTable transposed(table[0].size(), std::vector<std::pair<std::string, std::string>>(table.size()));
  for (size_t r = 0; r < table.size(); ++r) {
    for (size_t c = 0; c < table[r].size(); ++c) transposed[c][r] = table[r][c];
  }
  transposed[0][0] = {"policy", "policy"};
  return transposed;
}

void WriteGrid(const PipelineGrid& grid, bool color, std::ostream& out) {
  const TextTable table = GridTable(grid, color);
  std::vector<size_t> widths(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], Width(row[c].first));
  }
  out << (color ? "\033[1m" : "") << Printable(grid.pipeline) << (color ? "\033[0m" : "") << "\n";
  for (const auto& row : table) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) {
      line += " " + row[c].second;
      if (c + 1 < row.size()) line += std::string(widths[c] - Width(row[c].first) + 1, ' ');
    }
    out << line << "\n";
  }
}

std::string ProvenanceLine(const RunInfo& info) {
  std::string line = "framegate run " + info.run_id + " (" + info.state + ")";
  if (!info.host.empty()) line += " on " + info.host;
  if (!info.git_sha.empty()) line += ", git " + info.git_sha;
  if (!info.libtorch_version.empty()) line += ", LibTorch " + info.libtorch_version;
  if (!info.matrix_path.empty()) line += ", matrix " + info.matrix_path;
  if (!info.shard.empty()) line += ", shard " + info.shard;
  return line;
}

}  // namespace

TerminalStyle DetectTerminalStyle(int fd) {
  const bool tty = isatty(fd) == 1;
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  const char* ci = std::getenv("CI");
  TerminalStyle style;
  style.color =
      tty && (no_color == nullptr || *no_color == '\0') && !(term != nullptr && std::string(term) == "dumb");
  style.live_line = tty && (ci == nullptr || *ci == '\0');
  return style;
}

void WriteTerminalSummary(const RunRecord& run, const TerminalStyle& style, std::ostream& out) {
  out << Printable(ProvenanceLine(run.info)) << "\n";
  for (const PipelineGrid& grid : BuildGrids(run.cells)) WriteGrid(grid, style.color, out);
  double cell_seconds = 0;
  for (const CellResult& r : run.cells) {
    cell_seconds += r.timings.load_seconds;
    for (double s : r.timings.generation_seconds) cell_seconds += s;
  }
  const StatusCounts counts = CountStatuses(run.cells);
  out << CountsLine(counts) << "; " << counts.failures << " failing; time in cells "
      << FormatSeconds(cell_seconds);
  if (!run.info.finished_at.empty()) {
    out << "; " << run.info.started_at << " .. " << run.info.finished_at;
  }
  out << "\n";
  const std::vector<const CellResult*> failing = FailingCells(run.cells);
  if (failing.empty()) return;
  out << "Failures (" << failing.size() << "):\n";
  for (const CellResult* r : failing) {
    out << "  " << StatusWord(r->status, style.color) << " " << Printable(r->cell.Label());
    if (!r->reason.empty()) out << ": " << Printable(r->reason);
    out << "\n    repro: " << (r->repro.empty() ? "(none recorded)" : Printable(r->repro)) << "\n";
  }
}

double SteadyNowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

ProgressPrinter::ProgressPrinter(std::ostream& out, int total_cells, TerminalStyle style,
                                 std::function<double()> now_seconds)
    : out_(out), total_(total_cells), style_(style), now_(std::move(now_seconds)), started_(now_()) {}

void ProgressPrinter::CellStarted(const Cell& cell) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_.push_back(Printable(cell.Label()));
  Redraw();
}

void ProgressPrinter::CellFinished(const CellResult& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  if (IsFailure(result.status)) ++failures_;
  auto it = std::find(running_.begin(), running_.end(), Printable(result.cell.Label()));
  if (it != running_.end()) running_.erase(it);
  if (!style_.live_line) {
    out_ << CellLine(result) << "\n" << std::flush;
    return;
  }
  if (IsFailure(result.status)) out_ << "\r\033[2K" << CellLine(result) << "\n";
  Redraw();
}

void ProgressPrinter::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (style_.live_line) out_ << "\r\033[2K" << std::flush;
}

std::string ProgressPrinter::ProgressLine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ProgressLineLocked();
}

std::string ProgressPrinter::ProgressLineLocked() const {
  std::string line = "[" + std::to_string(done_) + "/" + std::to_string(total_) + "] " +
                     std::to_string(failures_) + " failing";
  if (!running_.empty()) {
    line += " | running " + running_.back();
    if (running_.size() > 1) line += " (+" + std::to_string(running_.size() - 1) + ")";
  }
  if (done_ > 0 && done_ < total_) {
    const double per_cell = (now_() - started_) / done_;
    line += " | ETA " + FormatSeconds(per_cell * (total_ - done_));
  }
  return line;
}

void ProgressPrinter::Redraw() {
  if (!style_.live_line) return;
  out_ << "\r\033[2K" << ProgressLineLocked() << std::flush;
}

std::string ProgressPrinter::CellLine(const CellResult& result) const {
  const int digits = static_cast<int>(std::to_string(total_).size());
  std::string done = std::to_string(done_);
  done.insert(0, static_cast<size_t>(std::max(0, digits - static_cast<int>(done.size()))), ' ');
  std::string line = "[" + done + "/" + std::to_string(total_) + "] " +
                     StatusWord(result.status, style_.color) + " " + Printable(result.cell.Label());
  const std::string summary = Printable(CellSummary(result));
  if (!summary.empty()) line += ": " + summary;
  const double seconds = MedianGenerationSeconds(result);
  if (!std::isnan(seconds)) line += " (" + FormatSeconds(seconds) + ")";
  return line;
}

}  // namespace framegate
