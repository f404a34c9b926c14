#include "replay/report_bound.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "replay/json_util.h"

namespace kvpool::replay {

namespace {

struct Event {
  double t;
  bool is_get;  // else a route
  size_t record;
};

}  // namespace

ReachBound ReachableBeforeGet(const std::vector<RequestRecord>& records,
                              const std::vector<TraceRequest>& trace,
                              double block_read_s) {
  std::vector<Event> events;
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.route.routed) continue;
    events.push_back({r.route.routed_s, false, i});
    if (r.get_start_s > 0) events.push_back({r.get_start_s, true, i});
  }
  // At equal times the get goes first: a block read and routed at once
  // starts a new trigger, the later (less favourable) one.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.t != b.t ? a.t < b.t : a.is_get > b.is_get;
  });

  // For each block: the first route that saw it SSD-only since it was last
  // read or seen in another tier.
  std::unordered_map<uint64_t, double> ssd_since;
  // Per record, per routed block: that trigger time (< 0: not SSD-only or
  // no hash to follow it by).
  std::vector<std::vector<double>> trigger(records.size());
  for (const Event& e : events) {
    const RequestRecord& r = records[e.record];
    const TraceRequest* t = r.index < trace.size() ? &trace[r.index] : nullptr;
    const size_t n = t ? std::min(r.route.tiers.size(), t->hash_ids.size()) : 0;
    if (e.is_get) {
      for (size_t j = 0; j < std::min<size_t>(n, r.read_ok); ++j) {
        ssd_since.erase(t->hash_ids[j]);
      }
      continue;
    }
    std::vector<double>& tr = trigger[e.record];
    tr.assign(r.route.tiers.size(), -1);
    for (size_t j = 0; j < n; ++j) {
      const uint64_t h = t->hash_ids[j];
      if (r.route.tiers[j] == 'S') {
        tr[j] = ssd_since.emplace(h, r.route.routed_s).first->second;
      } else {
        ssd_since.erase(h);
      }
    }
  }

  ReachBound b;
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.route.routed) continue;
    std::map<std::string, std::vector<double>> by_holder;
    for (size_t j = 0; j < r.route.tiers.size(); ++j) {
      if (r.route.tiers[j] != 'S') continue;
      ++b.blocks;
      if (j >= trigger[i].size() || trigger[i][j] < 0) continue;
      const std::string& holder =
          j < r.route.holders.size() ? r.route.holders[j] : std::string();
      by_holder[holder].push_back(trigger[i][j]);
    }
    if (r.get_start_s <= 0) continue;
    for (auto& [holder, starts] : by_holder) {
      std::sort(starts.begin(), starts.end());
      double disk_free = 0;
      for (double s : starts) {
        disk_free = std::max(disk_free, s) + block_read_s;
        if (disk_free <= r.get_start_s) ++b.reachable;
      }
    }
  }
  return b;
}

nlohmann::json ReachBoundJson(const std::vector<RequestRecord>& records,
                              const std::vector<TraceRequest>& trace,
                              double calibrated_ms, double given_ms) {
  nlohmann::json j = nlohmann::json::object();
  if (calibrated_ms > 0) {
    const ReachBound at_disk =
        ReachableBeforeGet(records, trace, calibrated_ms / 1e3);
    const ReachBound at_10x =
        ReachableBeforeGet(records, trace, calibrated_ms / 1e4);
    j["block_read_ms"] = Round(calibrated_ms, 4);
    j["blocks"] = at_disk.blocks;
    j["reachable"] = at_disk.reachable;
    j["share"] = Round(at_disk.Share());
    j["reachable_disk_10x"] = at_10x.reachable;
    j["share_disk_10x"] = Round(at_10x.Share());
  }
  if (given_ms > 0) {
    const ReachBound at_given =
        ReachableBeforeGet(records, trace, given_ms / 1e3);
    j["blocks"] = at_given.blocks;
    j["given_block_read_ms"] = Round(given_ms, 4);
    j["reachable_given"] = at_given.reachable;
    j["share_given"] = Round(at_given.Share());
  }
  return j;
}

std::string ReachBoundCell(const nlohmann::json& bound) {
  if (!bound.is_object() || !bound.contains("share")) return "-";
  std::string cell =
      Pct(Num(bound, "share")) + " / " + Pct(Num(bound, "share_disk_10x"));
  if (bound.contains("share_given")) {
    cell += fmt::format(" / {} at {} ms", Pct(Num(bound, "share_given")),
                        Num(bound, "given_block_read_ms"));
  }
  return cell;
}

}  // namespace kvpool::replay
