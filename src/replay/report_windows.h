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

// How the router's deadlines compare with the windows they estimate, from
// an arm's "request_rows": over requests with SSD-only blocks and a
// deadline, the distribution (report.h Distribution) of deadline / window
// for those whose window was at least kWindowBandEdgesMs[0] (the ones a
// prefetch could serve; shorter windows make the ratio meaningless), with
// "requests", and "late_share": the share of them whose deadline came after
// their get. Null when the arm sent no deadline.
nlohmann::json DeadlineOverWindow(const nlohmann::json& arm);

// Sets every arm's "ssd_only_by_window" from its "windows", and its
// "deadline_over_window".
void AddWindowBands(nlohmann::json* report);

// The Markdown section for the above (computed from "windows", so a report
// written before the field existed renders the same).
std::string RenderWindowBandsMarkdown(const nlohmann::json& report);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_WINDOWS_H_
