#include "reports/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "reports/markup.h"

namespace framegate {
namespace {

constexpr double kLeft = 48, kRight = 12, kTop = 24, kBottom = 30;

std::string Fixed(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", v);
  return buffer;
}

std::string Tick(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", v);
  return buffer;
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  bool empty() const { return low > high; }
};

Range FiniteRange(const std::vector<PlotSeries>& series) {
  Range range;
  for (const PlotSeries& s : series) {
    for (double v : s.values) {
      if (!std::isfinite(v)) continue;
      range.low = std::min(range.low, v);
      range.high = std::max(range.high, v);
    }
  }
  if (range.empty()) return range;
  const double pad =
      range.high > range.low ? 0.08 * (range.high - range.low) : std::max(1e-6, 0.05 * std::fabs(range.high));
  range.low -= pad;
  range.high += pad;
  return range;
}

void Series(const PlotSeries& s, const Range& y, size_t points, double plot_w, double plot_h,
            std::ostringstream& svg) {
  const auto px = [&](size_t i) {
    return kLeft + (points <= 1 ? plot_w / 2 : plot_w * static_cast<double>(i) / (points - 1));
  };
  const auto py = [&](double v) {
    if (v == std::numeric_limits<double>::infinity()) return kTop;
    if (v == -std::numeric_limits<double>::infinity()) return kTop + plot_h;
    return kTop + plot_h * (y.high - v) / (y.high - y.low);
  };
  std::string path;  // finite points only, broken at NaN/inf
  std::string markers;
  bool pen_down = false;
  for (size_t i = 0; i < s.values.size() && i < points; ++i) {
    const double v = s.values[i];
    if (std::isnan(v)) {
      pen_down = false;
      continue;
    }
    const std::string x = Fixed(px(i)), yy = Fixed(py(v));
    const bool finite = std::isfinite(v);
    markers += "<circle cx=\"" + x + "\" cy=\"" + yy + "\" r=\"3\" " +
               (finite ? "fill=\"" + s.colour + "\"" : "fill=\"white\" stroke=\"" + s.colour + "\"") +
               "><title>" + HtmlEscape(s.name) + " " + NumberText(v) + "</title></circle>";
    if (!finite) {
      pen_down = false;
      continue;
    }
    path += (pen_down ? " L" : " M") + x + " " + yy;
    pen_down = true;
  }
  if (!path.empty()) {
    svg << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"1.5\"/>";
  }
  svg << markers;
}

}  // namespace

std::string SvgLineChart(const LineChart& chart) {
  const double plot_w = chart.width - kLeft - kRight;
  const double plot_h = chart.height - kTop - kBottom;
  size_t points = chart.x_labels.size();
  for (const PlotSeries& s : chart.series) points = std::max(points, s.values.size());
  std::ostringstream svg;
  svg << "<svg class=\"chart\" width=\"" << chart.width << "\" height=\"" << chart.height
      << "\" viewBox=\"0 0 " << chart.width << " " << chart.height << "\" role=\"img\">"
      << "<text x=\"" << kLeft << "\" y=\"14\" class=\"chart-title\">" << HtmlEscape(chart.title) << "</text>"
      << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
      << "\" fill=\"#fafafa\" stroke=\"#bbb\"/>";
  const Range y = FiniteRange(chart.series);
  if (y.empty()) {
    svg << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kTop + plot_h / 2
        << "\" text-anchor=\"middle\" class=\"chart-note\">no finite values</text>";
  } else {
    svg << "<text x=\"" << kLeft - 4 << "\" y=\"" << kTop + 4 << "\" text-anchor=\"end\">" << Tick(y.high)
        << "</text><text x=\"" << kLeft - 4 << "\" y=\"" << kTop + plot_h << "\" text-anchor=\"end\">"
        << Tick(y.low) << "</text><text x=\"4\" y=\"" << kTop + plot_h / 2 << "\">"
        << HtmlEscape(chart.y_label) << "</text>";
    for (const PlotSeries& s : chart.series) Series(s, y, points, plot_w, plot_h, svg);
  }
  const size_t step = std::max<size_t>(1, (chart.x_labels.size() + 7) / 8);
  for (size_t i = 0; i < chart.x_labels.size(); i += step) {
    const double x = kLeft + (points <= 1 ? plot_w / 2 : plot_w * static_cast<double>(i) / (points - 1));
    svg << "<text x=\"" << Fixed(x) << "\" y=\"" << chart.height - 12 << "\" text-anchor=\"middle\">"
        << HtmlEscape(chart.x_labels[i]) << "</text>";
  }
  double legend_x = kLeft + plot_w;
  for (auto it = chart.series.rbegin(); it != chart.series.rend(); ++it) {
    svg << "<text x=\"" << Fixed(legend_x) << "\" y=\"14\" text-anchor=\"end\" fill=\"" << it->colour << "\">"
        << HtmlEscape(it->name) << "</text>";
    legend_x -= 8.0 * static_cast<double>(it->name.size()) + 16;
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace framegate
