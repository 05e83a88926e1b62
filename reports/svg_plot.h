// Small line charts as inline SVG (no script, no external file), for the HTML report:
// per-frame PSNR/SSIM of a cell and the trend of a cell over past runs.
#pragma once

#include <string>
#include <vector>

namespace framegate {

struct PlotSeries {
  std::string name;            // legend text (escaped by the plot)
  std::string colour;          // CSS colour, e.g. "#1565c0"
  std::vector<double> values;  // y per x index; NaN: no point; +/-inf: drawn at the edge
};                             // with a hollow marker

struct LineChart {
  std::string title;                  // escaped by the plot
  std::string y_label;                // "dB", "ms"
  std::vector<std::string> x_labels;  // one per x index (shown thinned out), escaped
  std::vector<PlotSeries> series;
  int width = 420, height = 180;
};

// An <svg> element with axes, min/max y ticks, one polyline and markers per series, and
// a legend. The y range covers the finite values (padded); with no finite value at all
// the chart says "no finite values". Never throws; every text is HTML-escaped.
std::string SvgLineChart(const LineChart& chart);

}  // namespace framegate
