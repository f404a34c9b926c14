#include "replay/report_windows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "benchutil/bench_util.h"
#include "replay/json_util.h"
#include "replay/report.h"

namespace kvpool::replay {

using nlohmann::json;

json WindowBands(const json& windows) {
  constexpr size_t kBands = std::size(kWindowBandEdgesMs) + 1;
  std::vector<uint64_t> requests(kBands), blocks(kBands), dram(kBands);
  if (windows.is_array()) {
    for (const auto& w : windows) {
      if (!w.is_array() || w.size() < 3 || !w[0].is_number() ||
          !w[1].is_number_integer() || !w[2].is_number_integer() ||
          w[1].get<int64_t>() < 0 || w[2].get<int64_t>() < 0) {
        continue;
      }
      const double ms = w[0].get<double>();
      size_t b = 0;
      while (b + 1 < kBands && ms >= kWindowBandEdgesMs[b]) ++b;
      ++requests[b];
      blocks[b] += w[1].get<uint64_t>();
      dram[b] += w[2].get<uint64_t>();
    }
  }
  json out = json::array();
  for (size_t b = 0; b < kBands; ++b) {
    out.push_back(
        {{"lo_ms", b == 0 ? 0.0 : kWindowBandEdgesMs[b - 1]},
         {"hi_ms", b + 1 < kBands ? json(kWindowBandEdgesMs[b]) : json()},
         {"requests", requests[b]},
         {"blocks", blocks[b]},
         {"from_dram", dram[b]},
         {"dram_share",
          blocks[b] ? json(double(dram[b]) / double(blocks[b])) : json()}});
  }
  return out;
}

json DeadlineOverWindow(const json& arm) {
  const json cols = arm.value("request_columns", json::array());
  auto col = [&](const char* name) -> int {
    for (size_t i = 0; i < cols.size(); ++i)
      if (cols[i] == name) return int(i);
    return -1;
  };
  const int dl = col("deadline_ms"), win = col("window_ms"),
            ssd = col("ssd_only_at_route");
  if (dl < 0 || win < 0 || ssd < 0) return json();
  std::vector<double> ratios;
  uint64_t late = 0;
  for (const auto& r : arm.value("request_rows", json::array())) {
    if (!r.is_array() || r.size() <= size_t(std::max({dl, win, ssd}))) continue;
    const double d = r[size_t(dl)].get<double>();
    const double w = r[size_t(win)].get<double>();
    if (d <= 0 || r[size_t(ssd)].get<double>() <= 0 ||
        w < kWindowBandEdgesMs[0])
      continue;
    ratios.push_back(d / w);
    late += d > w;
  }
  if (ratios.empty()) return json();
  json out = Distribution(ratios);
  out["p10"] = Round(bench::Percentile(ratios, 10));
  out["requests"] = ratios.size();
  out["late_share"] = double(late) / double(ratios.size());
  return out;
}

void AddWindowBands(json* report) {
  for (auto& a : (*report)["arms"]) {
    a["ssd_only_by_window"] = WindowBands(a.value("windows", json()));
    a["deadline_over_window"] = DeadlineOverWindow(a);
  }
}

std::string RenderWindowBandsMarkdown(const json& report) {
  std::string md =
      "\n## Blocks SSD-only when routed, by their request's route->get "
      "window\n\nEach cell: requests, SSD-only blocks, the share of those "
      "blocks their get read from DRAM.\n\n| arm |";
  std::string rule = "|---|";
  const json bands = WindowBands(json::array());
  for (const auto& b : bands) {
    md += b["hi_ms"].is_null()
              ? fmt::format(" >= {:.0f} ms |", b["lo_ms"].get<double>())
              : fmt::format(" {:.0f}-{:.0f} ms |", b["lo_ms"].get<double>(),
                            b["hi_ms"].get<double>());
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const auto& a : report["arms"]) {
    md += "| " + a["name"].get<std::string>() + " |";
    for (const auto& b : WindowBands(a.value("windows", json()))) {
      md += fmt::format(" {}, {}, {} |", b["requests"].get<uint64_t>(),
                        b["blocks"].get<uint64_t>(),
                        b["dram_share"].is_null()
                            ? std::string("-")
                            : Pct(b["dram_share"].get<double>()));
    }
    md += "\n";
  }
  std::string accuracy;
  for (const auto& a : report["arms"]) {
    const json d = DeadlineOverWindow(a);
    if (d.is_null()) continue;
    accuracy +=
        fmt::format("| {} | {} | {:.2f} / {:.2f} / {:.2f} | {} |\n",
                    a["name"].get<std::string>(), d["requests"].get<uint64_t>(),
                    d["p10"].get<double>(), d["p50"].get<double>(),
                    d["p90"].get<double>(), Pct(d["late_share"].get<double>()));
  }
  if (!accuracy.empty()) {
    md += fmt::format(
        "\nThe router's deadline over the window it estimates, for requests "
        "with SSD-only blocks and a window of at least {:.0f} ms:\n\n"
        "| arm | requests | deadline / window p10 / p50 / p90 | deadline "
        "after the get |\n|---|---|---|---|\n",
        kWindowBandEdgesMs[0]);
    md += accuracy;
  }
  return md;
}

}  // namespace kvpool::replay
