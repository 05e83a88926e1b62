// The HTML report: one folder that opens offline (no network, no script, no external
// font; inline CSS; plots are inline SVG; pictures are PNG files beside the pages).
//   <dir>/index.html               the run's provenance, devices, the matrix grid per
//                                  pipeline coloured by status, the failures with repro
//   <dir>/cells/<cell_id>.html     one page per cell: status and reason, metrics, per
//                                  frame golden | candidate | abs-difference heat map,
//                                  per-frame PSNR/SSIM plot, health findings, timings,
//                                  and the cell's history (table + PSNR/latency trend)
//   <dir>/cells/<cell_id>/*.png    golden_0000.png, candidate_0000.png, diff_0000.png ...
// Every string from a config, a model, a file or an exception is HTML-escaped.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/run_record.h"
#include "harness/status.h"
#include "reports/frame_images.h"

namespace framegate {

// Reads the golden frames from the golden file a cell was judged against
// (CellResult::golden). framegate passes one built on ReadGolden (golden/golden_file.h);
// tests pass ReadVideoNpy.
using GoldenFramesReader = std::function<StatusOr<Video>(const std::string& golden_path)>;

// One earlier run of the same cell (same Cell::Id()), as the store returns it.
struct CellHistoryPoint {
  std::string run_id;
  std::string date;  // ISO 8601, shown as given
  CellResult result;
};

struct HtmlReportOptions {
  GoldenFramesReader read_golden;  // empty: the golden column says it was not loaded
  // By cell id, oldest first; the current run is appended as the last point.
  std::map<std::string, std::vector<CellHistoryPoint>> history;
  int max_frames = 32;  // frames shown per cell page (the rest are counted, not drawn)
};

// Writes the folder (created when missing). The candidate frames are read from
// <artifacts_dir>/frames.npy. A cell whose frames cannot be read (no artifacts, missing
// or malformed file, golden reader error, shape mismatch) gets a page that says why:
// a broken run must still produce its report. Returns IoError naming the path only when
// a file cannot be written.
Status WriteHtmlReport(const RunRecord& run, const HtmlReportOptions& options, const std::string& dir);

}  // namespace framegate
