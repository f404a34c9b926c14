// The replay report's view of where the router got its tiers: from one
// lookup per request, or from the tier map it keeps from the master's KV
// events (--router_kv_events; docs/kv_events.md, "kvpool-router follows
// the stream"). Per arm: the route call's latency, the master round trips
// it made, and the trigger accuracy. Used by report.cc.
#ifndef KVPOOL_REPLAY_REPORT_ROUTER_TIERS_H_
#define KVPOOL_REPLAY_REPORT_ROUTER_TIERS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/arm.h"

namespace kvpool::replay {

// {"router_tiers": {...}} for an arm that routed, {} for one that did not.
// trigger_accuracy: of the keys the router triggered as SSD-only, the
// share the master found SSD-only when the trigger reached it (QUEUED or
// THROTTLED_*, against IN_MEMORY / NO_LOCAL_DISK / NOT_FOUND): judged by
// the master's state at trigger time, not by the holder's later read.
nlohmann::json RouterTiersJson(const ArmResult& a,
                               const std::vector<double>& route_ms);

// A Markdown table of the above, one row per routed arm ("" when none).
std::string RenderRouterTiersMarkdown(const nlohmann::json& report);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_ROUTER_TIERS_H_
