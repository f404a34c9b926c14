// Minimal SVG charts for benchmark reports: a grouped bar chart and a line
// chart. Plain text output, no dependencies, so every report can come with a
// picture that opens in any browser.
#ifndef KVPOOL_BENCH_SVG_CHART_H_
#define KVPOOL_BENCH_SVG_CHART_H_

#include <string>
#include <vector>

namespace kvpool::bench {

struct BarGroup {
  std::string label;           // one group per case, e.g. "get shm 1MiB x16"
  std::vector<double> values;  // one bar per series
};

// Horizontal grouped bars; `series` names the bars within each group.
std::string BarChartSvg(const std::string& title, const std::string& unit,
                        const std::vector<std::string>& series,
                        const std::vector<BarGroup>& groups);

struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

std::string LineChartSvg(const std::string& title, const std::string& x_label,
                         const std::string& y_label,
                         const std::vector<LineSeries>& series);

// Writes `svg` to `path`; returns false (and prints why) on failure.
bool WriteFile(const std::string& path, const std::string& svg);

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCH_SVG_CHART_H_
