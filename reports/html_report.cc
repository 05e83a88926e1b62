#include "reports/html_report.h"

#include <cmath>
#include <sstream>

#include "reports/html_pages.h"
#include "reports/markup.h"
#include "reports/report_files.h"
#include "reports/run_summary.h"

namespace framegate {
namespace html {
namespace {

constexpr const char* kCss = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#212121}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eee}
table.grid td.cell{color:#fff;min-width:7em;max-width:12em}
table.grid td.cell a{color:#fff;text-decoration:none;display:block}
table.grid td.cell a:hover{text-decoration:underline}
table.grid td.empty{background:#f5f5f5;color:#999}
.status{display:inline-block;color:#fff;padding:1px 6px;border-radius:3px;font-weight:600}
.summary{font-size:.8em;opacity:.95}
.legend span.status{margin-right:4px}
pre{background:#f5f5f5;padding:6px;white-space:pre-wrap;word-break:break-all}
img.frame{width:160px;height:auto;image-rendering:pixelated;border:1px solid #999}
.frames td{text-align:center}
svg.chart{font-size:11px;margin:4px 12px 4px 0}
svg.heat-legend{font-size:11px;vertical-align:middle}
svg.chart text{fill:#444}
.chart-title{font-weight:600}
.note{color:#555;font-style:italic}
.bad{color:#b71c1c;font-weight:600}
)";

void ProvenanceTable(const RunRecord& run, std::ostringstream& out) {
  const RunInfo& i = run.info;
  out << "<h2>Provenance</h2><table class=\"provenance\">";
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"run", i.run_id},
                                    {"state", i.state},
                                    {"started", i.started_at},
                                    {"finished", i.finished_at},
                                    {"host", i.host},
                                    {"git sha", i.git_sha},
                                    {"framegate", i.framegate_version},
                                    {"LibTorch", i.libtorch_version},
                                    {"CUDA", i.cuda_version},
                                    {"BLAS", i.blas},
                                    {"tags", i.tags},
                                    {"matrix", i.matrix_path},
                                    {"matrix sha256", i.matrix_sha256},
                                    {"shard", i.shard},
                                    {"command", i.command}}) {
    if (value.empty()) continue;
    out << "<tr><th>" << name << "</th><td>" << HtmlEscape(value) << "</td></tr>";
  }
  out << "</table>";
  if (run.devices.empty()) return;
  out << "<h2>Devices</h2><table class=\"devices\"><tr><th>device</th><th>name</th>"
         "<th>capability</th><th>memory</th><th>driver</th></tr>";
  for (const DeviceInfo& d : run.devices) {
    out << "<tr><td>" << HtmlEscape(d.device) << "</td><td>" << HtmlEscape(d.name) << "</td><td>"
        << HtmlEscape(d.capability) << "</td><td>"
        << (d.memory_bytes > 0 ? NumberText(d.memory_bytes / 1073741824.0) + " GiB" : "") << "</td><td>"
        << HtmlEscape(d.driver) << "</td></tr>";
  }
  out << "</table>";
}

void GridCell(const std::vector<const CellResult*>& results, std::ostringstream& out) {
  if (results.empty()) {
    out << "<td class=\"empty\">-</td>";
    return;
  }
  const CellResult* worst = results.front();
  for (const CellResult* r : results) {
    if (StatusSeverity(r->status) > StatusSeverity(worst->status)) worst = r;
  }
  out << "<td class=\"cell\" data-status=\"" << StatusName(worst->status)
      << "\" style=\"background:" << StatusColour(worst->status) << "\">";
  for (const CellResult* r : results) {
    out << "<a href=\"" << CellPagePath(r->cell) << "\"><b>" << StatusName(r->status) << "</b>";
    if (PolicyShown(*r) != r->cell.policy) out << " (" << HtmlEscape(r->policy_used) << ")";
    const double seconds = MedianGenerationSeconds(*r);
    out << "<div class=\"summary\">" << HtmlEscape(CellSummary(*r));
    if (!std::isnan(seconds)) out << " &middot; " << FormatSeconds(seconds);
    out << "</div></a>";
  }
  out << "</td>";
}

void Grid(const PipelineGrid& grid, std::ostringstream& out) {
  out << "<h2>" << HtmlEscape(grid.pipeline) << "</h2><table class=\"grid\"><tr><th>device</th>";
  for (const std::string& policy : grid.policies) out << "<th>" << HtmlEscape(policy) << "</th>";
  out << "</tr>";
  for (const GridRow& row : grid.rows) {
    out << "<tr><th>" << HtmlEscape(row.label) << "</th>";
    for (const auto& column : row.columns) GridCell(column, out);
    out << "</tr>";
  }
  out << "</table>";
}

void Failures(const RunRecord& run, std::ostringstream& out) {
  const std::vector<const CellResult*> failing = FailingCells(run.cells);
  if (failing.empty()) return;
  out << "<h2>Failures (" << failing.size() << ")</h2><table class=\"failures\">"
      << "<tr><th>status</th><th>cell</th><th>reason</th><th>reproduce</th></tr>";
  for (const CellResult* r : failing) {
    out << "<tr><td>" << StatusBadge(r->status) << "</td><td><a href=\"" << CellPagePath(r->cell) << "\">"
        << HtmlEscape(r->cell.Label()) << "</a></td><td>" << HtmlEscape(r->reason) << "</td><td><code>"
        << HtmlEscape(r->repro) << "</code></td></tr>";
  }
  out << "</table>";
}

std::string IndexPage(const RunRecord& run) {
  std::ostringstream out;
  out << PageStart("framegate run " + run.info.run_id) << "<h1>framegate run " << HtmlEscape(run.info.run_id)
      << "</h1><p class=\"counts\">" << HtmlEscape(CountsLine(CountStatuses(run.cells))) << "</p>";
  for (const PipelineGrid& grid : BuildGrids(run.cells)) Grid(grid, out);
  out << "<p class=\"legend\">";
  for (int s = 0; s <= static_cast<int>(CellStatus::kXpass); ++s) {
    out << StatusBadge(static_cast<CellStatus>(s));
  }
  out << "</p>";
  Failures(run, out);
  ProvenanceTable(run, out);
  out << PageEnd();
  return out.str();
}

}  // namespace

std::string PageStart(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + HtmlEscape(title) +
         "</title><style>" + kCss + "</style></head><body>\n";
}

std::string PageEnd() { return "\n</body></html>\n"; }

std::string StatusBadge(CellStatus status) {
  return std::string("<span class=\"status\" style=\"background:") + StatusColour(status) + "\">" +
         StatusName(status) + "</span>";
}

std::string CellPagePath(const Cell& cell) { return "cells/" + cell.Id() + ".html"; }

}  // namespace html

Status WriteHtmlReport(const RunRecord& run, const HtmlReportOptions& options, const std::string& dir) {
  FG_RETURN_IF_ERROR(CreateDirectories(dir + "/cells"));
  for (const CellResult& result : run.cells) {
    FG_RETURN_IF_ERROR(html::WriteCellPage(run, result, options, dir));
  }
  return WriteFileAtomically(dir + "/index.html", html::IndexPage(run));
}

}  // namespace framegate
