#include "scale_sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace kvpool::scale_sim {

namespace {

double Round(double v, int digits = 3) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

// 12345678 -> "12.3 M", 4200 -> "4.2 k".
std::string Si(double v) {
  if (v >= 1e9) return fmt::format("{:.1f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string Ms(const Percentiles& p, bool saturated) {
  if (p.count == 0) return "-";
  return fmt::format("{:.2f} / {:.2f} / {:.2f}{}", p.p50, p.p99, p.p999,
                     saturated ? " (sat.)" : "");
}

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50", Round(p.p50)},
          {"p99", Round(p.p99)},
          {"p999", Round(p.p999)},
          {"max", Round(p.max)},
          {"count", p.count}};
}

}  // namespace

std::vector<Capacity> ComputeCapacity(const std::vector<ScenarioResult>& runs,
                                      const CostModel& costs,
                                      const Limits& limits) {
  std::map<std::pair<int, int>, std::vector<const ScenarioResult*>> groups;
  for (const auto& r : runs) {
    groups[{int(r.config.routing), r.config.shards}].push_back(&r);
  }
  std::vector<Capacity> out;
  for (auto& [k, list] : groups) {
    std::sort(list.begin(), list.end(),
              [](auto* a, auto* b) { return a->config.rate < b->config.rate; });
    Capacity c;
    c.routing = static_cast<Routing>(k.first);
    c.shards = k.second;
    const ScenarioResult& top = *list.back();
    // The demand per request does not depend on the rate; the highest
    // rate's sample has the most distinct copies of the trace.
    c.rate_at_util = top.RateAtUtil(limits.max_util);
    c.max_rate_swept = top.config.rate;
    c.skew = top.skew;
    c.calls_per_request = top.calls_per_request;
    for (const auto* r : list) {
      const auto& p = r->latency_ms[int(Op::kLookup)];
      if (r->saturated() || (p.count > 0 && p.p99 > limits.max_p99_ms)) {
        c.rate_at_p99 = r->config.rate;
        break;
      }
    }
    double max_share = 0;
    for (const auto& s : top.shards)
      max_share = std::max(max_share, s.object_share);
    max_share = std::max(max_share, 1e-12);
    const double rereg_room =
        limits.max_failover_s - costs.failover_detect_s - costs.restart_base_s;
    c.objects_at_failover =
        std::max(0.0, rereg_room) * costs.reregister_objects_per_s / max_share;
    c.objects_at_memory = limits.max_shard_gib * double(uint64_t{1} << 30) /
                          costs.bytes_per_object / max_share;
    out.push_back(c);
  }
  return out;
}

nlohmann::json ToJson(const std::vector<ScenarioResult>& runs,
                      const std::vector<Capacity>& capacity,
                      const Limits& limits) {
  nlohmann::json j;
  j["limits"] = {{"max_util", limits.max_util},
                 {"max_p99_ms", limits.max_p99_ms},
                 {"max_failover_s", limits.max_failover_s},
                 {"max_shard_gib", limits.max_shard_gib}};
  auto& rows = j["runs"] = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json row = {
        {"routing", RoutingName(r.config.routing)},
        {"tag_depth", r.config.tag_depth},
        {"shards", r.config.shards},
        {"rate", r.config.rate},
        {"objects", r.config.objects},
        {"nodes", r.config.nodes},
        {"node_layout", NodeLayoutName(r.config.layout)},
        {"seed", r.config.seed},
        {"requests", r.requests},
        {"window_s", Round(r.window_s, 4)},
        {"calls_per_request", Round(r.calls_per_request)},
        {"max_util", Round(r.max_util, 4)},
        {"mean_util", Round(r.mean_util, 4)},
        {"skew", Round(r.skew)},
        {"saturated", r.saturated()},
        {"max_shard_objects", Round(r.max_shard_objects, 0)},
        {"max_shard_bytes", Round(r.max_shard_bytes, 0)},
        {"failover_s", Round(r.failover_s)},
        {"failover_requests", Round(r.failover_requests, 1)},
        {"failover_fraction", Round(r.failover_fraction, 4)},
        {"rate_at_max_util", Round(r.RateAtUtil(limits.max_util), 0)},
    };
    for (int op = 0; op < kOpCount; ++op) {
      if (r.latency_ms[op].count == 0) continue;
      row["latency_ms"][OpName(static_cast<Op>(op))] =
          PercentilesJson(r.latency_ms[op]);
    }
    for (const auto& s : r.shards) {
      row["per_shard"].push_back(
          {{"util", Round(s.util, 4)},
           {"heartbeat_util", Round(s.heartbeat_util, 4)},
           {"object_share", Round(s.object_share, 5)},
           {"touch_fraction", Round(s.touch_fraction, 4)},
           {"demand_us", Round(s.demand_us, 2)},
           {"calls", s.calls}});
    }
    rows.push_back(std::move(row));
  }
  auto& caps = j["capacity"] = nlohmann::json::array();
  for (const auto& c : capacity) {
    caps.push_back(
        {{"routing", RoutingName(c.routing)},
         {"shards", c.shards},
         {"rate_at_max_util", Round(c.rate_at_util, 0)},
         {"rate_past_max_p99", c.rate_at_p99},
         {"max_rate_swept", c.max_rate_swept},
         {"objects_at_max_failover", Round(c.objects_at_failover, 0)},
         {"objects_at_max_memory", Round(c.objects_at_memory, 0)},
         {"skew", Round(c.skew)},
         {"calls_per_request", Round(c.calls_per_request)}});
  }
  return j;
}

std::string RunsMarkdown(const std::vector<ScenarioResult>& runs) {
  std::string s =
      "| routing | shards | req/s | calls/req | busiest util | skew | "
      "lookup ms p50 / p99 / p99.9 | put ms p99 | biggest shard | "
      "its failover s | requests hit (share) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : runs) {
    const auto& put = r.latency_ms[int(Op::kPut)];
    s += fmt::format(
        "| {} | {} | {} | {:.1f} | {:.2f}{} | {:.2f} | {} | {} | {} obj, "
        "{:.1f} GiB | {:.1f} | {} ({:.0f}%) |\n",
        RoutingName(r.config.routing), r.config.shards, Si(r.config.rate),
        r.calls_per_request, r.max_util, r.saturated() ? " (sat.)" : "", r.skew,
        Ms(r.latency_ms[int(Op::kLookup)], r.saturated()),
        put.count ? fmt::format("{:.2f}", put.p99) : "-",
        Si(r.max_shard_objects), r.max_shard_bytes / double(uint64_t{1} << 30),
        r.failover_s, Si(r.failover_requests), 100 * r.failover_fraction);
  }
  return s;
}

std::string CapacityMarkdown(const std::vector<Capacity>& capacity,
                             const Limits& limits) {
  std::string s = fmt::format(
      "| routing | shards | calls/req | skew | req/s at util {:.2f} | "
      "first swept req/s past p99 {:.0f} ms | objects at failover {:.0f} s | "
      "objects at {:.0f} GiB |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n",
      limits.max_util, limits.max_p99_ms, limits.max_failover_s,
      limits.max_shard_gib);
  for (const auto& c : capacity) {
    s += fmt::format("| {} | {} | {:.1f} | {:.2f} | {} | {} | {} | {} |\n",
                     RoutingName(c.routing), c.shards, c.calls_per_request,
                     c.skew, Si(c.rate_at_util),
                     c.rate_at_p99 > 0 ? Si(c.rate_at_p99)
                                       : "none up to " + Si(c.max_rate_swept),
                     Si(c.objects_at_failover), Si(c.objects_at_memory));
  }
  return s;
}

std::string VerdictMarkdown(const std::vector<Capacity>& capacity,
                            const Limits& limits, double objects) {
  const Capacity* one = nullptr;
  for (const auto& c : capacity) {
    if (c.shards == 1) one = &c;
  }
  if (one == nullptr) return "";
  std::string s = fmt::format("One master reaches load {:.2f} at {} requests/s",
                              limits.max_util, Si(one->rate_at_util));
  s += one->rate_at_p99 > 0
           ? fmt::format(
                 ", and its lookup p99 is past {:.0f} ms at {} "
                 "requests/s (the first swept rate past it)",
                 limits.max_p99_ms, Si(one->rate_at_p99))
           : fmt::format(
                 ", and its lookup p99 stays within {:.0f} ms up to "
                 "{} requests/s",
                 limits.max_p99_ms, Si(one->max_rate_swept));
  s += fmt::format(
      ". Its failover passes {:.0f} s at {} objects and its tables {:.0f} GiB "
      "at {} objects.",
      limits.max_failover_s, Si(one->objects_at_failover), limits.max_shard_gib,
      Si(one->objects_at_memory));
  const double per_group =
      std::min(one->objects_at_failover, one->objects_at_memory);
  if (per_group > 0) {
    s += fmt::format(
        " At {} objects, an even split needs at least {:.0f} groups for both "
        "limits.",
        Si(objects), std::max(1.0, std::ceil(objects / per_group)));
  }
  return s + "\n";
}

}  // namespace kvpool::scale_sim
