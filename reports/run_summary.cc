#include "reports/run_summary.h"

#include "harness/printf.h"
#include "harness/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>

namespace framegate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr CellStatus kAllStatuses[] = {
    CellStatus::kPass,  CellStatus::kFail,        CellStatus::kNonfinite,  CellStatus::kBrokenFrames,
    CellStatus::kError, CellStatus::kUnsupported, CellStatus::kUnresolved, CellStatus::kTimeout,
    CellStatus::kCrash, CellStatus::kXfail,       CellStatus::kXpass,
};

// The part of a row label after the device: the identity fields other than pipeline,
// device and policy.
std::string RowLabel(const Cell& cell, bool show_seed) {
  std::string label = cell.device;
  if (show_seed) label += " seed=" + std::to_string(cell.seed);
  for (const auto& [name, text] : VariantFields(cell)) label += " " + name + "=" + text;
  return label;
}

template <typename T>
size_t IndexOf(std::vector<T>& items, const T& item) {
  auto it = std::find(items.begin(), items.end(), item);
  if (it != items.end()) return static_cast<size_t>(it - items.begin());
  items.push_back(item);
  return items.size() - 1;
}

}  // namespace

double MedianGenerationSeconds(const CellResult& result) { return Median(result.timings.generation_seconds); }

double ShownFramePsnr(const CellResult& result, size_t t) {
  if (!result.metrics || t >= result.metrics->video.frames.size()) return kNaN;
  const std::vector<FrameDefect>& defects = result.health.frames;
  if (t < defects.size() && defects[t] == FrameDefect::kNonfinite) return kNaN;
  return result.metrics->video.frames[t].psnr;
}

double ShownMinPsnr(const CellResult& result) {
  if (!result.metrics || result.health.defect == FrameDefect::kNonfinite) return kNaN;
  return result.metrics->video.min_psnr;
}

std::vector<NamedMetric> ShownMetrics(const CellResult& result) {
  if (!result.metrics) return {};
  std::vector<NamedMetric> metrics = NamedMetrics(*result.metrics);
  for (NamedMetric& m : metrics) {
    if (m.name == "min_psnr") m.value = ShownMinPsnr(result);
  }
  return metrics;
}

std::string FormatPsnr(double psnr_db) {
  if (std::isnan(psnr_db)) return "nan dB";
  if (std::isinf(psnr_db)) return psnr_db > 0 ? "inf dB" : "-inf dB";
  return Printf("%.2f dB", psnr_db);
}

std::string FormatSsim(double ssim) { return std::isnan(ssim) ? "nan" : Printf("%.4f", ssim); }

std::string FormatSeconds(double seconds) {
  if (!(seconds >= 0)) return "-";
  if (seconds < 1.0) return Printf("%.0f ms", seconds * 1e3);
  if (seconds < 60.0) return Printf("%.2f s", seconds);
  const long total = std::lround(seconds);
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", total / 60, total % 60);
  return buffer;
}

std::string KeyMetric(const CellResult& result) {
  if (!result.metrics) return "";
  return "PSNR " + FormatPsnr(ShownMinPsnr(result)) + ", SSIM " + FormatSsim(result.metrics->video.mean_ssim);
}

std::string CellSummary(const CellResult& result) {
  const bool passed = result.status == CellStatus::kPass || result.status == CellStatus::kXpass;
  if (passed || result.reason.empty()) {
    const std::string metric = KeyMetric(result);
    if (!metric.empty() || passed) return metric.empty() ? result.reason : metric;
  }
  return result.reason;
}

std::string PolicyShown(const CellResult& result) {
  if (result.policy_used.empty() || result.policy_used == result.cell.policy) {
    return result.cell.policy;
  }
  return result.cell.policy + " -> " + result.policy_used;
}

int StatusSeverity(CellStatus status) {
  switch (status) {
    case CellStatus::kPass:
      return 0;
    case CellStatus::kXfail:
      return 1;
    case CellStatus::kUnsupported:
      return 2;
    case CellStatus::kXpass:
      return 3;
    case CellStatus::kUnresolved:
      return 4;
    case CellStatus::kFail:
      return 5;
    case CellStatus::kBrokenFrames:
      return 6;
    case CellStatus::kNonfinite:
      return 7;
    case CellStatus::kTimeout:
      return 8;
    case CellStatus::kError:
      return 9;
    case CellStatus::kCrash:
      return 10;
  }
  return 10;
}

const char* StatusColour(CellStatus status) {
  switch (status) {
    case CellStatus::kPass:
      return "#2e7d32";
    case CellStatus::kXfail:
      return "#558b2f";
    case CellStatus::kUnsupported:
      return "#757575";
    case CellStatus::kXpass:
      return "#ef6c00";
    case CellStatus::kUnresolved:
      return "#8d6e00";
    case CellStatus::kFail:
      return "#c62828";
    case CellStatus::kBrokenFrames:
      return "#ad1457";
    case CellStatus::kNonfinite:
      return "#6a1b9a";
    case CellStatus::kTimeout:
      return "#4e342e";
    case CellStatus::kError:
      return "#b71c1c";
    case CellStatus::kCrash:
      return "#212121";
  }
  return "#212121";
}

std::vector<PipelineGrid> BuildGrids(const std::vector<CellResult>& cells) {
  std::vector<std::string> pipelines;
  std::map<std::string, std::set<uint64_t>> seeds;
  for (const CellResult& r : cells) {
    IndexOf(pipelines, r.cell.Pipeline());
    seeds[r.cell.Pipeline()].insert(r.cell.seed);
  }
  std::vector<PipelineGrid> grids(pipelines.size());
  std::vector<std::vector<std::string>> row_labels(pipelines.size());
  for (size_t p = 0; p < pipelines.size(); ++p) grids[p].pipeline = pipelines[p];
  for (const CellResult& r : cells) {
    const size_t p = IndexOf(pipelines, r.cell.Pipeline());
    PipelineGrid& grid = grids[p];
    const size_t column = IndexOf(grid.policies, r.cell.policy);
    const size_t row = IndexOf(row_labels[p], RowLabel(r.cell, seeds[grid.pipeline].size() > 1));
    if (row == grid.rows.size()) grid.rows.push_back({row_labels[p][row], {}});
    grid.rows[row].columns.resize(std::max(grid.rows[row].columns.size(), column + 1));
    grid.rows[row].columns[column].push_back(&r);
  }
  for (PipelineGrid& grid : grids) {
    for (GridRow& row : grid.rows) row.columns.resize(grid.policies.size());
  }
  return grids;
}

StatusCounts CountStatuses(const std::vector<CellResult>& cells) {
  StatusCounts counts;
  for (const CellResult& r : cells) {
    ++counts.by_status[r.status];
    ++counts.total;
    if (IsFailure(r.status)) ++counts.failures;
  }
  return counts;
}

std::string CountsLine(const StatusCounts& counts) {
  std::string line = std::to_string(counts.total) + (counts.total == 1 ? " cell" : " cells");
  const char* separator = ": ";
  for (CellStatus status : kAllStatuses) {
    auto it = counts.by_status.find(status);
    if (it == counts.by_status.end()) continue;
    line += separator + std::to_string(it->second) + " " + StatusName(status);
    separator = ", ";
  }
  return line;
}

std::vector<const CellResult*> FailingCells(const std::vector<CellResult>& cells) {
  std::vector<const CellResult*> failing;
  for (const CellResult& r : cells) {
    if (IsFailure(r.status)) failing.push_back(&r);
  }
  return failing;
}

}  // namespace framegate
