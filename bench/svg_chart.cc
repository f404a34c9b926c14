#include "bench/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace kvpool::bench {

namespace {
const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f",
                         "#e15759", "#76b7b2", "#edc948"};

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') {
      o += "&lt;";
    } else if (c == '>') {
      o += "&gt;";
    } else if (c == '&') {
      o += "&amp;";
    } else {
      o += c;
    }
  }
  return o;
}
}  // namespace

std::string BarChartSvg(const std::string& title, const std::string& unit,
                        const std::vector<std::string>& series,
                        const std::vector<BarGroup>& groups) {
  const int label_w = 220, plot_w = 560, bar_h = 12, gap = 10, top = 50;
  double max_v = 0;
  for (const auto& g : groups) {
    for (double v : g.values) max_v = std::max(max_v, v);
  }
  if (max_v <= 0) max_v = 1;
  int group_h = int(series.size()) * bar_h + gap;
  int height = top + int(groups.size()) * group_h + 40;
  int width = label_w + plot_w + 120;
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      R"(<text x="10" y="20" font-size="14" font-weight="bold">{}</text>)"
      "\n",
      width, height, Escape(title));
  for (size_t i = 0; i < series.size(); ++i) {
    s += fmt::format(R"(<rect x="{}" y="28" width="10" height="10" fill="{}"/>)"
                     R"(<text x="{}" y="37">{}</text>)"
                     "\n",
                     label_w + int(i) * 150, kColors[i % 6],
                     label_w + int(i) * 150 + 14, Escape(series[i]));
  }
  int y = top;
  for (const auto& g : groups) {
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)"
                     "\n",
                     label_w - 6, y + group_h / 2, Escape(g.label));
    for (size_t i = 0; i < g.values.size(); ++i) {
      double w = g.values[i] / max_v * plot_w;
      s += fmt::format(
          R"(<rect x="{}" y="{}" width="{:.1f}" height="{}" fill="{}"/>)"
          R"(<text x="{:.1f}" y="{}">{:.2f}</text>)"
          "\n",
          label_w, y + int(i) * bar_h, w, bar_h - 2, kColors[i % 6],
          label_w + w + 4, y + int(i) * bar_h + bar_h - 3, g.values[i]);
    }
    y += group_h;
  }
  s += fmt::format(R"(<text x="{}" y="{}">{}</text>)"
                   "\n</svg>\n",
                   label_w, y + 20, Escape(unit));
  return s;
}

std::string LineChartSvg(const std::string& title, const std::string& x_label,
                         const std::string& y_label,
                         const std::vector<LineSeries>& series) {
  const int left = 70, top = 40, plot_w = 640, plot_h = 320;
  double max_x = 0, max_y = 0;
  for (const auto& se : series) {
    for (auto [x, y] : se.points) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      R"(<text x="10" y="20" font-size="14" font-weight="bold">{}</text>)"
      "\n"
      R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="black"/>)"
      R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="black"/>)"
      "\n",
      left + plot_w + 160, top + plot_h + 50, Escape(title), left, top + plot_h,
      left + plot_w, top + plot_h, left, top, left, top + plot_h);
  for (int t = 0; t <= 4; ++t) {
    double fy = max_y * t / 4, fx = max_x * t / 4;
    int py = top + plot_h - plot_h * t / 4, px = left + plot_w * t / 4;
    s += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{:.3g}</text>)"
                     R"(<text x="{}" y="{}" text-anchor="middle">{:.3g}</text>)"
                     "\n",
                     left - 4, py + 4, fy, px, top + plot_h + 14, fx);
  }
  s += fmt::format(
      R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)"
      R"svg(<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>)svg"
      "\n",
      left + plot_w / 2, top + plot_h + 34, Escape(x_label), top + plot_h / 2,
      top + plot_h / 2, Escape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    std::string pts;
    for (auto [x, y] : series[i].points) {
      pts += fmt::format("{:.1f},{:.1f} ", left + x / max_x * plot_w,
                         top + plot_h - y / max_y * plot_h);
    }
    s += fmt::format(
        R"(<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)"
        R"(<text x="{}" y="{}" fill="{}">{}</text>)"
        "\n",
        kColors[i % 6], pts, left + plot_w + 10, top + 14 * int(i + 1),
        kColors[i % 6], Escape(series[i].name));
  }
  return s + "</svg>\n";
}

bool WriteFile(const std::string& path, const std::string& svg) {
  std::ofstream out(path);
  out << svg;
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace kvpool::bench
