#include "replay/report_windows.h"

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <vector>

#include "replay/json_util.h"

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

void AddWindowBands(json* report) {
  for (auto& a : (*report)["arms"]) {
    a["ssd_only_by_window"] = WindowBands(a.value("windows", json()));
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
  return md;
}

}  // namespace kvpool::replay
