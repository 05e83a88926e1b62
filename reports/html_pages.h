// Internal to the HTML report: the pieces the index and the cell pages share.
#pragma once

#include <string>

#include "reports/html_report.h"

namespace framegate {
namespace html {

// "<!DOCTYPE html><html><head>...<style>...</style></head><body>": `title` is escaped.
std::string PageStart(const std::string& title);
std::string PageEnd();
// <span class="status" style="background:..">PASS</span>
std::string StatusBadge(CellStatus status);
// "cells/<id>.html" relative to index.html.
std::string CellPagePath(const Cell& cell);

// Writes cells/<id>.html and its pictures under `dir`.
Status WriteCellPage(const RunRecord& run, const CellResult& result, const HtmlReportOptions& options,
                     const std::string& dir);

}  // namespace html
}  // namespace framegate
