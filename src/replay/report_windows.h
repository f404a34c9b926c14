// Blocks that were SSD-only when routed, grouped by their request's
// route->get window: how much of each window band the get read from DRAM.
// The overall DRAM share mixes requests whose get came a few milliseconds
// after the route (no prefetch can land in time) with requests that waited
// long enough for any promotion; split by band, the report says which of
// the two a prefetch arm misses.
#ifndef KVPOOL_REPLAY_REPORT_WINDOWS_H_
#define KVPOOL_REPLAY_REPORT_WINDOWS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace kvpool::replay {

// Upper edges of the bands, in machine milliseconds (the last band is
// open): 20 ms holds a few promotions of one block, 100 ms is the router's
// default deadline floor (prefetch_deadline_floor_ms).
inline constexpr double kWindowBandEdgesMs[] = {20, 100, 500};

// From an arm's "windows" ([window_ms, SSD-only blocks, of them read from
// DRAM] per request): one object per band with lo_ms, hi_ms (null: open),
// requests, blocks, from_dram and dram_share (null without blocks).
nlohmann::json WindowBands(const nlohmann::json& windows);

// Sets every arm's "ssd_only_by_window" from its "windows".
void AddWindowBands(nlohmann::json* report);

// The Markdown section for the above (computed from "windows", so a report
// written before the field existed renders the same).
std::string RenderWindowBandsMarkdown(const nlohmann::json& report);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_WINDOWS_H_
