// The page of one cell in the HTML report (see html_report.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/html_pages.h"
#include "reports/markup.h"
#include "reports/report_files.h"
#include "reports/run_summary.h"
#include "reports/svg_plot.h"

namespace framegate {
namespace html {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Mib(int64_t bytes) { return NumberText(static_cast<double>(bytes) / 1048576.0) + " MiB"; }

std::string PictureName(const char* kind, int64_t t) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%s_%04lld.png", kind, static_cast<long long>(t));
  return buffer;
}

void Row(std::ostringstream& out, const std::string& name, const std::string& escaped_value) {
  out << "<tr><th>" << name << "</th><td>" << escaped_value << "</td></tr>";
}

// "denoiser.blocks.0.attn (aten::log)", "denoiser.blocks.0.attn", "aten::log"; escaped.
std::string ModuleAndOp(const std::string& module, const std::string& op) {
  if (op.empty()) return HtmlEscape(module);
  if (module.empty()) return HtmlEscape(op);
  return HtmlEscape(module) + " (" + HtmlEscape(op) + ")";
}

// "a, b, c" escaped, or a note when there are none.
std::string ModuleList(const std::vector<std::string>& modules) {
  if (modules.empty()) return "<span class=\"note\">none</span>";
  std::string text;
  for (const std::string& m : modules) text += (text.empty() ? "" : ", ") + HtmlEscape(m);
  return text;
}

void FactsSection(const CellResult& r, std::ostringstream& out) {
  const Cell& c = r.cell;
  out << "<table class=\"facts\">";
  Row(out, "cell id", HtmlEscape(c.Id()));
  Row(out, "pipeline", HtmlEscape(c.Pipeline()));
  if (!c.model_dir.empty()) Row(out, "model folder", HtmlEscape(c.model_dir));
  Row(out, "device", HtmlEscape(c.device));
  Row(out, "policy", HtmlEscape(PolicyShown(r)));
  if (!c.policy_file.empty()) Row(out, "policy file", HtmlEscape(c.policy_file));
  Row(out, "seed", std::to_string(c.seed));
  if (!c.fault.empty()) Row(out, "fault", HtmlEscape(c.fault));
  if (!c.sampler.empty()) Row(out, "sampler", HtmlEscape(c.sampler));
  if (c.steps != 0) Row(out, "steps", std::to_string(c.steps));
  if (!c.tolerance.empty()) Row(out, "tolerance", HtmlEscape(c.tolerance));
  if (!c.xfail.empty()) Row(out, "expected to fail", HtmlEscape(c.xfail));
  if (!r.error_class.empty()) Row(out, "error class", HtmlEscape(r.error_class));
  if (!r.error_module.empty() || !r.error_op.empty()) {
    Row(out, "raised in", ModuleAndOp(r.error_module, r.error_op));
  }
  Row(out, "golden", r.golden.empty() ? "<span class=\"note\">none</span>" : HtmlEscape(r.golden));
  if (!r.artifacts_dir.empty()) Row(out, "artifacts", HtmlEscape(r.artifacts_dir));
  out << "</table><h2>Reproduce</h2><pre>"
      << (r.repro.empty() ? "(no command recorded)" : HtmlEscape(r.repro)) << "</pre>";
  if (!r.metrics) return;
  out << "<h2>Metrics</h2><table class=\"metrics\">";
  for (const NamedMetric& m : ShownMetrics(r)) Row(out, m.name, NumberText(m.value));
  out << "</table>";
}

// The frames of one cell, loaded as far as they can be; `notes` says what is missing.
struct CellFrames {
  Video golden, candidate;
  bool have_golden = false, have_candidate = false;
  std::vector<std::string> notes;
};

CellFrames LoadFrames(const CellResult& r, const HtmlReportOptions& options) {
  CellFrames f;
  if (r.artifacts_dir.empty()) {
    f.notes.push_back("candidate frames were not kept (no artifacts folder)");
  } else {
    StatusOr<Video> candidate = ReadVideoNpy(r.artifacts_dir + "/frames.npy");
    f.have_candidate = candidate.ok();
    if (f.have_candidate) {
      f.candidate = std::move(candidate).value();
    } else {
      f.notes.push_back("candidate frames: " + candidate.status().message());
    }
  }
  if (r.golden.empty()) {
    f.notes.push_back("no golden for this cell");
  } else if (!options.read_golden) {
    f.notes.push_back("golden frames not loaded (this report has no golden reader)");
  } else {
    StatusOr<Video> golden = options.read_golden(r.golden);
    f.have_golden = golden.ok();
    if (f.have_golden) {
      f.golden = std::move(golden).value();
    } else {
      f.notes.push_back("golden frames: " + golden.status().message());
    }
  }
  return f;
}

// The heat map's colour bar: 0 .. scale, as 32 inline SVG rectangles.
std::string HeatLegend(double scale) {
  std::ostringstream svg;
  svg << "<svg class=\"heat-legend\" width=\"260\" height=\"16\">";
  for (int i = 0; i < 32; ++i) {
    uint8_t rgb[3];
    HeatColour(i / 31.0, rgb);
    char colour[8];
    std::snprintf(colour, sizeof(colour), "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    svg << "<rect x=\"" << 30 + i * 5 << "\" y=\"2\" width=\"5\" height=\"12\" fill=\"" << colour << "\"/>";
  }
  svg << "<text x=\"0\" y=\"13\">0</text><text x=\"192\" y=\"13\">" << NumberText(scale) << "</text></svg>";
  return svg.str();
}

std::string Img(const std::string& cell_id, const char* kind, int64_t t, const char* alt) {
  return "<img class=\"frame\" src=\"" + cell_id + "/" + PictureName(kind, t) + "\" alt=\"" + alt +
         " frame " + std::to_string(t) + "\">";
}

// One row of the frames table: writes frame t's pictures (the difference only when
// diff_scale > 0) and its scores.
Status FrameRow(const CellResult& r, const CellFrames& f, double diff_scale, int64_t t,
                const std::string& cell_dir, std::ostringstream& out) {
  const std::string id = r.cell.Id();
  out << "<tr><td>" << t << "</td><td>";
  if (f.have_golden && t < f.golden.frames) {
    FG_RETURN_IF_ERROR(WritePngRgb(cell_dir + "/" + PictureName("golden", t),
                                   FrameToRgb(f.golden.Frame(t), f.golden.height, f.golden.width)));
    out << Img(id, "golden", t, "golden");
  }
  out << "</td><td>";
  if (f.have_candidate && t < f.candidate.frames) {
    FG_RETURN_IF_ERROR(WritePngRgb(cell_dir + "/" + PictureName("candidate", t),
                                   FrameToRgb(f.candidate.Frame(t), f.candidate.height, f.candidate.width)));
    out << Img(id, "candidate", t, "candidate");
  }
  out << "</td><td>";
  if (diff_scale > 0) {
    FG_RETURN_IF_ERROR(WritePngRgb(cell_dir + "/" + PictureName("diff", t),
                                   DiffHeatMap(f.golden, f.candidate, t, diff_scale)));
    out << Img(id, "diff", t, "difference");
  }
  const size_t i = static_cast<size_t>(t);
  const bool scored = r.metrics && i < r.metrics->video.frames.size();
  out << "</td><td>" << (scored ? FormatPsnr(ShownFramePsnr(r, i)) : "") << "</td><td>"
      << (scored ? FormatSsim(r.metrics->video.frames[i].ssim) : "") << "</td><td>"
      << (i < r.health.frames.size() ? FrameDefectName(r.health.frames[i]) : "") << "</td></tr>";
  return Status::Ok();
}

// Writes the PNGs and the frames table. IoError only for a file that cannot be written.
Status FramesSection(const CellResult& r, const HtmlReportOptions& options, const std::string& cell_dir,
                     std::ostringstream& out) {
  out << "<h2>Frames</h2>";
  CellFrames f = LoadFrames(r, options);
  const bool same_shape = f.have_golden && f.have_candidate && f.golden.frames == f.candidate.frames &&
                          f.golden.height == f.candidate.height && f.golden.width == f.candidate.width;
  if (f.have_golden && f.have_candidate && !same_shape) {
    f.notes.push_back("golden " + f.golden.ShapeString() + " and candidate " + f.candidate.ShapeString() +
                      " differ in shape: no difference drawn");
  }
  for (const std::string& note : f.notes) out << "<p class=\"note\">" << HtmlEscape(note) << "</p>";
  if (!f.have_golden && !f.have_candidate) {
    out << "<p class=\"bad\">No frames: " << HtmlEscape(StatusName(r.status)) << " " << HtmlEscape(r.reason)
        << "</p>";
    return Status::Ok();
  }
  const int64_t total = f.have_candidate ? f.candidate.frames : f.golden.frames;
  const int64_t shown = std::min<int64_t>(total, std::max(1, options.max_frames));
  FG_RETURN_IF_ERROR(CreateDirectories(cell_dir));
  const double scale = same_shape ? std::max(MaxFiniteAbsDiff(f.golden, f.candidate, shown), 1.0 / 255) : 0;
  if (same_shape) {
    out << "<p>Difference: max over channels of |candidate - golden| " << HeatLegend(scale)
        << " (cyan: a NaN or infinite value)</p>";
  }
  out << "<table class=\"frames\"><tr><th>frame</th><th>golden</th><th>candidate</th>"
         "<th>|difference|</th><th>PSNR</th><th>SSIM</th><th>defect</th></tr>";
  for (int64_t t = 0; t < shown; ++t) {
    FG_RETURN_IF_ERROR(FrameRow(r, f, same_shape ? scale : 0, t, cell_dir, out));
  }
  out << "</table>";
  if (shown < total) out << "<p class=\"note\">" << total - shown << " more frames not drawn.</p>";
  return Status::Ok();
}

void ScoresCharts(const CellResult& r, std::ostringstream& out) {
  if (!r.metrics || r.metrics->video.frames.empty()) return;
  LineChart psnr{"PSNR per frame", "dB", {}, {{"PSNR", "#1565c0", {}}}};
  LineChart ssim{"SSIM per frame", "SSIM", {}, {{"SSIM", "#2e7d32", {}}}};
  for (size_t t = 0; t < r.metrics->video.frames.size(); ++t) {
    psnr.x_labels.push_back(std::to_string(t));
    ssim.x_labels.push_back(std::to_string(t));
    psnr.series[0].values.push_back(ShownFramePsnr(r, t));
    ssim.series[0].values.push_back(r.metrics->video.frames[t].ssim);
  }
  out << "<h2>Per-frame scores</h2><div>" << SvgLineChart(psnr) << SvgLineChart(ssim)
      << "</div><p class=\"note\">A hollow marker at the top is +inf (identical frames).</p>";
}

void HealthSection(const CellResult& r, std::ostringstream& out) {
  const FrameHealth& h = r.health;
  out << "<h2>Health</h2><table class=\"health\">";
  if (r.first_nonfinite.found) {
    const FirstNonfinite& f = r.first_nonfinite;
    Row(out, "first non-finite",
        "<span class=\"bad\">" + std::string(f.step < 0 ? "decoder" : "step " + std::to_string(f.step)) +
            " in " + HtmlEscape(f.module) + (f.op.empty() ? "" : " at " + HtmlEscape(f.op)) + " (" +
            std::to_string(f.count.nan) + " NaN, " + std::to_string(f.count.inf) + " Inf)</span>");
  } else {
    Row(out, "first non-finite", "none found");
  }
  std::string steps;
  for (size_t s = 0; s < h.step_latents.size(); ++s) {
    if (!h.step_latents[s].any()) continue;
    steps += "step " + std::to_string(s) + ": " + std::to_string(h.step_latents[s].nan) + " NaN, " +
             std::to_string(h.step_latents[s].inf) + " Inf; ";
  }
  Row(out, "non-finite latents", steps.empty() ? "none" : steps);
  Row(out, "decoded output",
      std::to_string(h.decoded.nan) + " NaN, " + std::to_string(h.decoded.inf) + " Inf");
  Row(out, "frame defect",
      std::string(FrameDefectName(h.defect)) +
          (h.defect_frames > 0 ? " (" + std::to_string(h.defect_frames) + " frames)" : ""));
  if (!r.judged_by.empty()) Row(out, "judged by", HtmlEscape(r.judged_by));
  if (!r.observed.empty()) Row(out, "instrumentation saw", HtmlEscape(r.observed));
  out << "</table>";
  if (r.probes.empty()) return;
  out << "<h3>Least headroom</h3><table class=\"probes\"><tr><th>module</th><th>dtype</th>"
         "<th>absmax</th><th>headroom (bits)</th><th>overflow</th><th>underflow</th>"
         "<th>SQNR vs FP32 (dB)</th></tr>";
  for (size_t i = 0; i < r.probes.size() && i < 10; ++i) {
    const ModuleProbe& p = r.probes[i];
    out << "<tr><td>" << HtmlEscape(p.module) << "</td><td>" << HtmlEscape(p.dtype) << "</td><td>"
        << NumberText(p.absmax) << "</td><td>" << NumberText(p.headroom_bits) << "</td><td>"
        << NumberText(p.overflow_fraction) << "</td><td>" << NumberText(p.underflow_fraction) << "</td><td>"
        << (std::isnan(p.sqnr_db) ? "-" : NumberText(p.sqnr_db)) << "</td></tr>";
  }
  out << "</table>";
  if (std::any_of(r.probes.begin(), r.probes.end(),
                  [](const ModuleProbe& p) { return std::isnan(p.sqnr_db); })) {
    out << "<p class=\"note\">SQNR -: not measured (no FP32 run of this cell, or the module "
           "did not run there).</p>";
  }
}

// The precision advisor's answer: what it tried, what it found, the policy to copy.
void AdvisorSection(const CellResult& r, std::ostringstream& out) {
  if (!r.advice) return;
  const Advice& a = *r.advice;
  out << "<h2>Advisor</h2><table class=\"advice\">";
  Row(out, "status", StatusBadge(a.status_before) + " &rarr; " + StatusBadge(a.status_after));
  Row(out, "FP32 islands", ModuleList(a.islands));
  Row(out, "FP32 weight share",
      std::isnan(a.fp32_weight_fraction) ? "-" : NumberText(100 * a.fp32_weight_fraction) + "%");
  if (!a.policy_name.empty()) Row(out, "policy", HtmlEscape(a.policy_name));
  out << "</table>";
  if (!a.found()) {
    out << "<p class=\"bad\">No set of FP32 islands tried made this cell pass.</p>";
  } else if (!a.verified) {
    out << "<p class=\"bad\">Not verified: the islands pass this cell's run but not every check "
           "after it (the note says which).</p>";
  }
  if (!a.note.empty()) out << "<p class=\"note\">" << HtmlEscape(a.note) << "</p>";
  out << "<h3>Runs tried (" << a.runs.size()
      << ")</h3><table class=\"advice-runs\"><tr>"
         "<th>#</th><th>FP32 islands</th><th>status</th><th>reason</th></tr>";
  for (size_t i = 0; i < a.runs.size(); ++i) {
    const AdviceRun& run = a.runs[i];
    out << "<tr><td>" << i + 1 << "</td><td>" << ModuleList(run.islands) << "</td><td>"
        << StatusBadge(run.status) << "</td><td>" << HtmlEscape(run.reason) << "</td></tr>";
  }
  out << "</table>";
  if (!a.policy_toml.empty()) {
    out << "<h3>Policy</h3><pre class=\"policy\">" << HtmlEscape(a.policy_toml) << "</pre>";
  }
}

void TimingsSection(const CellResult& r, std::ostringstream& out) {
  const CellTimings& t = r.timings;
  out << "<h2>Timings</h2><table class=\"timings\">";
  Row(out, "warm-up runs", std::to_string(t.warmup));
  Row(out, "model load", FormatSeconds(t.load_seconds));
  if (!t.generation_seconds.empty()) {
    const auto [low, high] = std::minmax_element(t.generation_seconds.begin(), t.generation_seconds.end());
    Row(out, "generation",
        "median " + FormatSeconds(Median(t.generation_seconds)) + ", min " + FormatSeconds(*low) + ", max " +
            FormatSeconds(*high) + " over " + std::to_string(t.generation_seconds.size()) + " repeats");
  }
  std::string steps;
  for (double s : t.step_seconds) steps += FormatSeconds(s) + " ";
  if (!steps.empty()) Row(out, "sampler steps", steps);
  Row(out, "decode", FormatSeconds(t.decode_seconds));
  Row(out, "peak RSS", Mib(t.peak_rss_bytes));
  if (t.peak_device_bytes > 0) Row(out, "peak device memory", Mib(t.peak_device_bytes));
  out << "</table>";
}

void HistorySection(const RunRecord& run, const CellResult& r, const HtmlReportOptions& options,
                    std::ostringstream& out) {
  std::vector<CellHistoryPoint> points;
  auto it = options.history.find(r.cell.Id());
  if (it != options.history.end()) points = it->second;
  points.push_back({run.info.run_id, run.info.started_at, r});
  LineChart psnr{"min PSNR over runs", "dB", {}, {{"min PSNR", "#1565c0", {}}}};
  LineChart latency{"median latency over runs", "ms", {}, {{"latency", "#ef6c00", {}}}};
  out << "<h2>History</h2>";
  std::ostringstream table;
  table << "<table class=\"history\"><tr><th>date</th><th>run</th><th>status</th><th>min PSNR</th>"
           "<th>median latency</th></tr>";
  for (const CellHistoryPoint& p : points) {
    const double min_psnr = ShownMinPsnr(p.result);
    const double seconds = MedianGenerationSeconds(p.result);
    psnr.x_labels.push_back(p.date.substr(0, 10));
    latency.x_labels.push_back(p.date.substr(0, 10));
    psnr.series[0].values.push_back(min_psnr);
    latency.series[0].values.push_back(seconds * 1e3);
    table << "<tr><td>" << HtmlEscape(p.date) << "</td><td>" << HtmlEscape(p.run_id) << "</td><td>"
          << StatusBadge(p.result.status) << "</td><td>" << (p.result.metrics ? FormatPsnr(min_psnr) : "")
          << "</td><td>" << FormatSeconds(seconds) << "</td></tr>";
  }
  if (points.size() > 1)
    out << "<div>" << SvgLineChart(psnr) << SvgLineChart(latency) << "</div>";
  else
    out << "<p class=\"note\">No earlier runs of this cell.</p>";
  out << table.str() << "</table>";
}

}  // namespace

Status WriteCellPage(const RunRecord& run, const CellResult& r, const HtmlReportOptions& options,
                     const std::string& dir) {
  const std::string id = r.cell.Id();
  std::ostringstream out;
  out << PageStart(r.cell.Label() + " " + StatusName(r.status)) << "<p><a href=\"../index.html\">"
      << "&larr; run " << HtmlEscape(run.info.run_id) << "</a></p><h1>" << HtmlEscape(r.cell.Label()) << " "
      << StatusBadge(r.status) << "</h1>";
  if (!r.reason.empty()) out << "<p class=\"reason\">" << HtmlEscape(r.reason) << "</p>";
  FactsSection(r, out);
  FG_RETURN_IF_ERROR(FramesSection(r, options, dir + "/cells/" + id, out));
  ScoresCharts(r, out);
  HealthSection(r, out);
  AdvisorSection(r, out);
  TimingsSection(r, out);
  HistorySection(run, r, options, out);
  out << PageEnd();
  return WriteFileAtomically(dir + "/cells/" + id + ".html", out.str());
}

}  // namespace html
}  // namespace framegate
