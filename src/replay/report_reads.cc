#include "replay/report_reads.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "replay/json_util.h"

namespace kvpool::replay {

nlohmann::json PromotionPhaseSeconds(const ArmResult& a) {
  nlohmann::json phases = nlohmann::json::object();
  for (const char* phase : kPromotionPhases) {
    // A counter not there at the start (no time in that phase yet) was 0.
    auto at = [&](const ClusterSnapshot& s) {
      auto it = s.node_phase_us.find(phase);
      return it == s.node_phase_us.end()
                 ? std::vector<uint64_t>(a.node_ids.size(), 0)
                 : it->second;
    };
    const auto from = at(a.at_measure_start), to = at(a.at_end);
    uint64_t us = 0;
    for (size_t i = 0; i < std::min(from.size(), to.size()); ++i)
      us += to[i] >= from[i] ? to[i] - from[i] : 0;
    phases[phase] = Round(double(us) / 1e6, 2);
  }
  return phases;
}

nlohmann::json DiskReadTiming(const ArmResult& a) {
  auto grown = [](const std::vector<uint64_t>& from,
                  const std::vector<uint64_t>& to) {
    uint64_t n = 0;
    for (size_t i = 0; i < std::min(from.size(), to.size()); ++i)
      n += to[i] >= from[i] ? to[i] - from[i] : 0;
    return n;
  };
  const ClusterSnapshot &s0 = a.at_measure_start, &s1 = a.at_end;
  const uint64_t reads = grown(s0.node_io_reads, s1.node_io_reads);
  const uint64_t us = grown(s0.node_io_read_us, s1.node_io_read_us);
  const double span_s = s1.t - s0.t;
  if (reads == 0 || span_s <= 0) return nlohmann::json::object();
  return {{"reads", reads},
          {"mean_ms", Round(double(us) / 1e3 / double(reads), 3)},
          {"in_flight", Round(double(us) / 1e6 / span_s, 2)}};
}

std::string RenderBlockReadsMarkdown(const nlohmann::json& r) {
  std::string md;
  md +=
      "\n## Block reads\n\n| arm | found | read | from DRAM | from SSD | "
      "DRAM share | found, not read | corrupt | puts | puts failed | "
      "holders' disk reads | promotions from a get's read (kept / joined) | "
      "gets that joined a promotion's read |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : r["arms"]) {
    const auto& d = a["reads"];
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} "
        "|\n",
        a["name"].get<std::string>(), d["blocks_found"].get<uint64_t>(),
        d["blocks_read"].get<uint64_t>(), d["from_dram"].get<uint64_t>(),
        d["from_ssd"].get<uint64_t>(), Pct(Num(d, "dram_share")),
        d["found_not_read"].get<uint64_t>(), d["corrupt"].get<uint64_t>(),
        d["blocks_put"].get<uint64_t>(), d["puts_failed"].get<uint64_t>(),
        d.value("holder_disk_reads", uint64_t{0}),
        d.value("promotions_from_get_reads", uint64_t{0}),
        d.value("promotions_joined_get_reads", uint64_t{0}),
        d.value("gets_joined_promotion_reads", uint64_t{0}));
  }
  std::string causes;
  for (const auto& a : r["arms"]) {
    const auto& d = a["reads"];
    if (!d.contains("not_read_by_cause") || d["not_read_by_cause"].empty())
      continue;
    std::string row;
    for (const auto& [cause, n] : d["not_read_by_cause"].items()) {
      row += fmt::format("{}{} {}", row.empty() ? "" : ", ", cause,
                         n.get<uint64_t>());
    }
    causes += fmt::format("- {}: {}\n", a["name"].get<std::string>(), row);
  }
  if (!causes.empty()) {
    md +=
        "\nFound, not read, by what ended the request's read prefix "
        "(the get's error, short_read or corrupt; blocks from there on "
        "were recomputed):\n\n" +
        causes;
  }
  std::string yields;
  for (const auto& a : r["arms"]) {
    const auto& d = a["reads"];
    const uint64_t n = d.value("promotions_yielded_to_gets", uint64_t{0});
    if (n == 0) continue;
    yields += fmt::format(
        "- {}: {} batches waited, {} of them past the bound, {} ms in all\n",
        a["name"].get<std::string>(), n,
        d.value("promotion_yields_timed_out", uint64_t{0}),
        Num(d, "promotion_yield_wait_ms"));
  }
  std::string phases;
  for (const auto& a : r["arms"]) {
    const auto& d = a["reads"];
    if (!d.contains("promotion_phase_s")) continue;  // an older report
    std::string row;
    double sum = 0;
    for (const auto& [phase, sec] : d["promotion_phase_s"].items()) {
      sum += sec.get<double>();
      row += fmt::format("{}{} {}", row.empty() ? "" : ", ", phase,
                         sec.get<double>());
    }
    if (sum > 0)
      phases += fmt::format("- {}: {}\n", a["name"].get<std::string>(), row);
  }
  if (!phases.empty()) {
    md +=
        "\nWhere the holders' promotion workers spent the measure (s, "
        "summed over holders and workers; the rest of their time they had "
        "no task):\n\n" +
        phases;
  }
  std::string disk;
  for (const auto& a : r["arms"]) {
    const auto& d = a["reads"];
    if (!d.contains("disk") || !d["disk"].contains("reads")) continue;
    disk += fmt::format("- {}: {} reads, {} ms each, {} in flight\n",
                        a["name"].get<std::string>(),
                        d["disk"]["reads"].get<uint64_t>(),
                        Num(d["disk"], "mean_ms"), Num(d["disk"], "in_flight"));
  }
  if (!disk.empty()) {
    md +=
        "\nThe holders' SSD reads from the start of the measure to the end "
        "of the arm (gets and promotions; mean time from submission to "
        "completion, and mean reads in flight by Little's law):\n\n" +
        disk;
  }
  if (!yields.empty()) {
    md +=
        "\nPromotion read batches that waited for gets' disk reads "
        "(promotion_yield_to_gets_ms):\n\n" +
        yields;
  }
  return md;
}

}  // namespace kvpool::replay
