#include "replay/report_router_tiers.h"

#include <fmt/format.h>

#include <algorithm>

#include "benchutil/bench_util.h"
#include "replay/json_util.h"

namespace kvpool::replay {

using json = nlohmann::json;

json RouterTiersJson(const ArmResult& a, const std::vector<double>& route_ms) {
  if (!a.router_used) return json::object();
  const RouterStats& r = a.router;
  const uint64_t ssd_only_at_trigger =
      r.queued + r.throttled_watermark + r.throttled_cap;
  const uint64_t judged =
      ssd_only_at_trigger + r.in_memory + r.no_local_disk + r.not_found;
  std::vector<double> v = route_ms;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    return v.empty() ? 0.0 : Round(bench::Percentile(v, p), 3);
  };
  json j = {
      {"source", a.router_kv_events ? "kv_events" : "lookups"},
      {"route_ms_p50", pct(50)},
      {"route_ms_p99", pct(99)},
      {"routes", r.requests},
      {"lookup_rpcs", r.lookup_rpcs},
      {"keys_looked_up", r.blocks_looked_up},
      {"routes_from_map", r.routes_from_map},
      {"blocks_from_map", r.blocks_from_map},
      {"triggered_keys", r.triggered},
      {"ssd_only_at_trigger", ssd_only_at_trigger},
      {"trigger_accuracy",
       judged ? Round(double(ssd_only_at_trigger) / double(judged), 4) : 0.0}};
  if (a.router_kv_events) {
    j["events"] = {
        {"batches", r.event_batches},      {"gaps", r.event_gaps},
        {"replays", r.event_replays},      {"resyncs", r.event_resyncs},
        {"restarts", r.event_restarts},    {"map_keys", r.map_keys},
        {"map_evictions", r.map_evictions}};
  }
  return {{"router_tiers", j}};
}

std::string RenderRouterTiersMarkdown(const json& report) {
  std::string rows;
  for (const auto& a : report["arms"]) {
    if (!a.contains("router_tiers")) continue;
    const auto& t = a["router_tiers"];
    rows += fmt::format(
        "| {} | {} | {:.3f} | {:.3f} | {} | {} | {} | {} | {:.4f} |\n",
        a["name"].get<std::string>(), t["source"].get<std::string>(),
        t["route_ms_p50"].get<double>(), t["route_ms_p99"].get<double>(),
        t["routes"].get<uint64_t>(), t["lookup_rpcs"].get<uint64_t>(),
        t["routes_from_map"].get<uint64_t>(),
        t["triggered_keys"].get<uint64_t>(),
        t["trigger_accuracy"].get<double>());
  }
  if (rows.empty()) return "";
  return "\n## Where the router got its tiers\n\nRoute call latency (wall, "
         "lookup or map plus the trigger RPC), master lookups, and the "
         "share of triggered keys the master found SSD-only at trigger "
         "time (docs/kv_events.md, \"kvpool-router follows the stream\").\n\n"
         "| arm | tiers from | route p50 ms | route p99 ms | routes | lookup "
         "RPCs | routes from map | triggered keys | trigger accuracy |\n"
         "|---|---|---|---|---|---|---|---|---|\n" +
         rows;
}

}  // namespace kvpool::replay
