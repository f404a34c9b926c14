#include "replay/report_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "replay/json_util.h"
#include "replay/report.h"

namespace kvpool::replay {

using nlohmann::json;

namespace {

// "off", "off#2", ... are runs of the same arm.
std::string BaseName(const std::string& name) {
  return name.substr(0, name.find('#'));
}

}  // namespace

json ArmPartsJson(const ArmResult& a) {
  json j;
  std::vector<double> wait, load, prefill, load_total;
  double sum_ttft = 0, sum_load = 0;
  for (const auto& r : a.records) {
    wait.push_back(r.part_wait_ms);
    load.push_back(r.part_load_ms);
    prefill.push_back(r.part_prefill_ms);
    if (r.load_done_s > 0) load_total.push_back(r.load_total_ms);
    sum_ttft += r.ttft_ms;
    sum_load += r.part_load_ms;
  }
  j["ttft_parts_ms"] = {{"wait", Distribution(wait)},
                        {"kv_load", Distribution(load)},
                        {"prefill", Distribution(prefill)}};
  j["load_total_ms"] = Distribution(load_total);
  j["kv_load_share"] = sum_ttft > 0 ? Round(sum_load / sum_ttft, 4) : 0;

  double busy = 0;
  json per = json::array();
  for (double b : a.gpu_busy) {
    busy += b;
    per.push_back(Round(b, 4));
  }
  j["gpu_busy"] = {
      {"mean",
       a.gpu_busy.empty() ? 0 : Round(busy / double(a.gpu_busy.size()), 4)},
      {"per_engine", per}};
  EngineStats s;
  s.realtime = !a.engine_stats.empty();
  for (const auto& e : a.engine_stats) {
    s.realtime = s.realtime && e.realtime;
    s.steps += e.steps;
    s.step_tokens += e.step_tokens;
    s.lagged_steps += e.lagged_steps;
    s.lag_ms += e.lag_ms;
    s.max_lag_ms = std::max(s.max_lag_ms, e.max_lag_ms);
  }
  j["engine_steps"] = {
      {"steps", s.steps},
      {"tokens_per_step",
       s.steps ? Round(double(s.step_tokens) / double(s.steps), 1) : 0},
      {"lagged_steps", s.lagged_steps},
      {"lagged_share",
       s.steps ? Round(double(s.lagged_steps) / double(s.steps), 4) : 0},
      {"lag_ms_total", Round(s.lag_ms, 1)},
      {"max_lag_ms", Round(s.max_lag_ms, 2)},
      {"realtime", s.realtime},
      {"dispatcher_realtime", a.dispatcher_realtime}};
  json comp = json::object();
  for (const auto& [k, v] : a.cpu.components) comp[k] = Round(v, 2);
  j["cpu"] = {
      {"wall_sec", Round(a.cpu.wall_s, 2)},
      {"process_sec", Round(a.cpu.process_s, 2)},
      {"cores", a.cpu.cores},
      {"capacity_sec", Round(a.cpu.capacity_s, 2)},
      {"utilisation", Round(a.cpu.utilisation, 3)},
      {"machine_utilisation", Round(a.cpu.machine_utilisation, 3)},
      {"outside_utilisation", Round(a.cpu.outside_utilisation, 3)},
      // Judged by the machine's CPU: other work starves the
      // engines' timing and the store as much as the replay's own.
      {"contended",
       std::max(a.cpu.utilisation, a.cpu.machine_utilisation) > kCpuContended},
      {"components_sec", comp}};
  j["status"] = a.status.ok() ? "ok" : a.status.ToString();
  return j;
}

void AddComparisons(json* report) {
  json& arms = (*report)["arms"];
  const json* off = nullptr;
  const json* all = nullptr;
  std::vector<double> off_p50;
  for (const auto& a : arms) {
    if (!a.value("ok", false)) continue;
    const std::string base = BaseName(a["name"].get<std::string>());
    if (base == "off") {
      if (!off) off = &a;
      off_p50.push_back(Num(a["ttft_ms"], "p50"));
    }
    if (base == "all-dram" && !all) all = &a;
  }
  // Paired with the off runs next to it in the run order: on a machine
  // whose disk drifts, the nearest off runs are the fair baseline.
  for (size_t i = 0; i < arms.size(); ++i) {
    json& a = arms[i];
    if (!a.value("ok", false)) continue;
    if (BaseName(a["name"].get<std::string>()) == "off") continue;
    std::vector<double> near;
    for (size_t j = i; j-- > 0;) {
      if (arms[j].value("ok", false) &&
          BaseName(arms[j]["name"].get<std::string>()) == "off") {
        near.push_back(Num(arms[j]["ttft_ms"], "p50"));
        break;
      }
    }
    for (size_t j = i + 1; j < arms.size(); ++j) {
      if (arms[j].value("ok", false) &&
          BaseName(arms[j]["name"].get<std::string>()) == "off") {
        near.push_back(Num(arms[j]["ttft_ms"], "p50"));
        break;
      }
    }
    if (near.empty()) continue;
    double base = 0;
    for (double v : near) base += v;
    base /= double(near.size());
    a["vs_adjacent_off"] = {
        {"off_p50_ms", near},
        {"p50_ratio",
         base > 0 ? Round(Num(a["ttft_ms"], "p50") / base, 4) : 0}};
  }
  for (auto& a : arms) {
    json g = {{"p50", nullptr}, {"mean", nullptr}};
    if (off && all && a.value("ok", false)) {
      for (const char* k : {"p50", "mean"}) {
        const double o = Num((*off)["ttft_ms"], k),
                     d = Num((*all)["ttft_ms"], k);
        const double v = Num(a["ttft_ms"], k);
        // Closed share of the gap; undefined when there is no gap to close.
        if (o - d > 1e-9) g[k] = Round((o - v) / (o - d), 3);
      }
    }
    a["gap_closed"] = g;
  }
  if (!off_p50.empty()) {
    const auto [lo, hi] = std::minmax_element(off_p50.begin(), off_p50.end());
    const double first = off_p50.front();
    (*report)["off_spread"] = {
        {"runs", off_p50.size()},
        {"p50_ms", off_p50},
        {"min", Round(*lo)},
        {"max", Round(*hi)},
        {"range_over_first", first > 0 ? Round((*hi - *lo) / first, 4) : 0}};
  }
  // One verdict per arm against the off runs' range: a p50 inside it is
  // what repeating off alone gives, not an effect of the arm.
  for (auto& a : arms) {
    const std::string name = a["name"].get<std::string>();
    if (BaseName(name) == "off") continue;
    json v;
    if (!a.value("ok", false)) {
      v = {{"verdict", "failed"}, {"sentence", name + ": did not run."}};
    } else if (off_p50.size() < 2) {
      v = {{"verdict", "unknown"},
           {"sentence",
            fmt::format("{}: TTFT p50 {:.1f} ms; no verdict: one off run "
                        "gives no spread to judge it by (repeat off in "
                        "--arms).",
                        name, Num(a["ttft_ms"], "p50"))}};
    } else {
      const auto [lo, hi] = std::minmax_element(off_p50.begin(), off_p50.end());
      std::vector<double> sorted = off_p50;
      std::sort(sorted.begin(), sorted.end());
      const double median = sorted[sorted.size() / 2];
      // A few runs' range understates the spread of the next one: the band
      // is widened by the range on each side, and by at least 2% of the
      // median, so a difference of a few tenths of a percent is not called
      // a result.
      const double w = std::max(*hi - *lo, kVerdictMinMargin * median);
      const double band_lo = *lo - w, band_hi = *hi + w;
      const double p = Num(a["ttft_ms"], "p50");
      const std::string range = fmt::format(
          "off {:.1f}-{:.1f} ms over {} runs, noise band {:.1f}-{:.1f} ms", *lo,
          *hi, off_p50.size(), band_lo, band_hi);
      std::string verdict, text;
      if (p < band_lo) {
        verdict = "better";
        text = fmt::format(
            "better than off: TTFT p50 {:.1f} ms, {:.0f}% below "
            "the fastest off run ({})",
            p, 100 * (1 - p / *lo), range);
      } else if (p > band_hi) {
        verdict = "worse";
        text = fmt::format(
            "worse than off: TTFT p50 {:.1f} ms, {:.0f}% above "
            "the slowest off run ({})",
            p, 100 * (p / *hi - 1), range);
      } else {
        verdict = "within noise";
        text = fmt::format("within noise: TTFT p50 {:.1f} ms ({})", p, range);
      }
      a["verdict_band_ms"] = {Round(band_lo, 2), Round(band_hi, 2)};
      if (a.contains("cpu") && a["cpu"].value("contended", false)) {
        text += "; the machine's CPU was contended, so not a result";
      }
      v = {{"verdict", verdict}, {"sentence", name + ": " + text + "."}};
    }
    a["verdict"] = v;
  }
}

std::string RenderPartsMarkdown(const json& r) {
  std::string md;
  md +=
      "## TTFT breakdown per arm (ms)\n\nTTFT = waiting (arrival -> "
      "admission) + KV load (the part not overlapped with waiting) + "
      "prefill (from admitted-and-loaded to the end of the step that yields "
      "the first token). Means add up to the mean TTFT; p50s do not.\n\n"
      "| arm | TTFT p50 / p90 / p99 | mean | waiting mean (p50) | KV load "
      "mean (p50) | prefill mean (p50) | KV-load share of TTFT | whole load "
      "p50 | gap closed p50 / mean | p50 / adjacent off p50 |\n|---|---|---|"
      "---|---|---|---|---|---|---|\n";
  auto gap = [](const json& g, const char* k) {
    return g.contains(k) && g[k].is_number()
               ? fmt::format("{:.0f}%", 100 * g[k].get<double>())
               : std::string("-");
  };
  for (const auto& a : r["arms"]) {
    if (!a.contains("ttft_parts_ms")) continue;
    const auto& t = a["ttft_ms"];
    const auto& p = a["ttft_parts_ms"];
    md += fmt::format(
        "| {} | {:.1f} / {:.1f} / {:.1f} | {:.1f} | {:.1f} ({:.1f}) | {:.1f} "
        "({:.1f}) | {:.1f} ({:.1f}) | {:.1f}% | {:.1f} | {} / {} | {} |\n",
        a["name"].get<std::string>(), Num(t, "p50"), Num(t, "p90"),
        Num(t, "p99"), Num(t, "mean"), Num(p["wait"], "mean"),
        Num(p["wait"], "p50"), Num(p["kv_load"], "mean"),
        Num(p["kv_load"], "p50"), Num(p["prefill"], "mean"),
        Num(p["prefill"], "p50"), 100 * Num(a, "kv_load_share"),
        Num(a["load_total_ms"], "p50"), gap(a["gap_closed"], "p50"),
        gap(a["gap_closed"], "mean"),
        a.contains("vs_adjacent_off")
            ? fmt::format("{:.2f}", Num(a["vs_adjacent_off"], "p50_ratio"))
            : std::string("-"));
  }
  md +=
      "\n\"gap closed\" = (off - arm) / (off - all-dram) of TTFT: the share of "
      "what perfect prefetch could gain that the arm gains. \"whole load\" is "
      "the load from its request to its end (loader wait, lookup, probe, "
      "read), overlapped or not. \"adjacent off\": the arm's TTFT p50 over "
      "the mean p50 of the off runs just before and after it in the run "
      "order (run the arms interleaved with off, e.g. --arms "
      "off,router,off,exist,off, when the machine drifts).\n";
  if (r.contains("off_spread") && r["off_spread"]["runs"].get<size_t>() > 1) {
    const auto& s = r["off_spread"];
    std::string runs;
    for (const auto& v : s["p50_ms"]) {
      runs +=
          fmt::format("{}{:.1f}", runs.empty() ? "" : ", ", v.get<double>());
    }
    md += fmt::format(
        "\nRun-to-run spread of the off arm's TTFT p50 over {} runs: {} ms "
        "(range {:.1f}% of the first). A difference between arms smaller "
        "than this is not a result.\n",
        s["runs"].get<size_t>(), runs, 100 * Num(s, "range_over_first"));
  }
  std::string verdicts;
  for (const auto& a : r["arms"]) {
    if (a.contains("verdict")) {
      verdicts += "- " + a["verdict"]["sentence"].get<std::string>() + "\n";
    }
  }
  if (!verdicts.empty()) md += "\n### Verdicts\n\n" + verdicts;
  md +=
      "\n## GPU busy and CPU per arm\n\nGPU busy = the share of the arrival "
      "span the engines spent in forward steps (mean over engines). CPU = "
      "this process's user + system time from the first arrival to the last "
      "request's end, against wall x cores; machine = the whole machine's "
      "busy share over the same time (/proc/stat), outside = the part of it "
      "used by other processes. An arm whose machine share is above 85% is "
      "marked contended: its result may be CPU-starved rather than a "
      "property of the feature. Per engine: each engine's own busy share. "
      "Own host: the share of the routed prefixes' blocks that were held on "
      "the chosen engine's own node (what the dispatch kept local).\n\n| "
      "arm | GPU busy | per engine | own host | steps | tokens/step "
      "| lagged steps (total ms) | CPU used / capacity (s) | CPU share | "
      "machine (outside) | contended | top components (s) |\n|---|---|---|"
      "---|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : r["arms"]) {
    if (!a.contains("cpu")) continue;
    const auto& c = a["cpu"];
    std::vector<std::pair<double, std::string>> comps;
    for (auto it = c["components_sec"].begin(); it != c["components_sec"].end();
         ++it) {
      comps.emplace_back(it.value().get<double>(), it.key());
    }
    std::sort(comps.rbegin(), comps.rend());
    std::string top;
    for (size_t i = 0; i < comps.size() && i < 4; ++i) {
      top += fmt::format("{}{} {:.1f}", top.empty() ? "" : "; ",
                         comps[i].second, comps[i].first);
    }
    const auto& st = a["engine_steps"];
    std::string per_engine;
    if (a["gpu_busy"].contains("per_engine")) {
      for (const auto& v : a["gpu_busy"]["per_engine"]) {
        per_engine += fmt::format("{}{:.2f}", per_engine.empty() ? "" : " / ",
                                  v.get<double>());
      }
    }
    std::string own = "-";
    if (a.contains("routing") && a["routing"].contains("own_host_share") &&
        Num(a["routing"], "prefix_blocks_held") > 0) {
      own = fmt::format("{:.1f}%", 100 * Num(a["routing"], "own_host_share"));
    }
    md += fmt::format(
        "| {} | {:.1f}% | {} | {} | {} | {:.1f} | {} ({:.0f}) | {:.1f} / "
        "{:.1f} | {:.0f}% | {:.0f}% ({:.0f}%) | {} | {} |\n",
        a["name"].get<std::string>(), 100 * Num(a["gpu_busy"], "mean"),
        per_engine.empty() ? "-" : per_engine, own, st["steps"].get<uint64_t>(),
        Num(st, "tokens_per_step"), st["lagged_steps"].get<uint64_t>(),
        Num(st, "lag_ms_total"), Num(c, "process_sec"), Num(c, "capacity_sec"),
        100 * Num(c, "utilisation"), 100 * Num(c, "machine_utilisation"),
        100 * Num(c, "outside_utilisation"),
        c["contended"].get<bool>() ? "**yes**" : "no", top);
  }
  return md;
}

}  // namespace kvpool::replay
