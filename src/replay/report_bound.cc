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

// Per record, per routed block: the first route that saw the block SSD-only
// since it was last read or seen in another tier (< 0: not SSD-only, or no
// hash to follow it by).
std::vector<std::vector<double>> TriggerTimes(
    const std::vector<RequestRecord>& records,
    const std::vector<TraceRequest>& trace) {
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
  std::unordered_map<uint64_t, double> ssd_since;
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
  return trigger;
}

const std::string& HolderOf(const RequestRecord& r, size_t j) {
  static const std::string kNone;
  return j < r.route.holders.size() ? r.route.holders[j] : kNone;
}

}  // namespace

ReachBound ReachableBeforeGet(const std::vector<RequestRecord>& records,
                              const std::vector<TraceRequest>& trace,
                              double block_read_s) {
  const std::vector<std::vector<double>> trigger = TriggerTimes(records, trace);
  ReachBound b;
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.route.routed) continue;
    std::map<std::string, std::vector<double>> by_holder;
    for (size_t j = 0; j < r.route.tiers.size(); ++j) {
      if (r.route.tiers[j] != 'S') continue;
      ++b.blocks;
      if (j >= trigger[i].size() || trigger[i][j] < 0) continue;
      by_holder[HolderOf(r, j)].push_back(trigger[i][j]);
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

ReachBound ReachableSharingDisks(const std::vector<RequestRecord>& records,
                                 const std::vector<TraceRequest>& trace,
                                 double block_read_s, bool one_disk) {
  const std::vector<std::vector<double>> trigger = TriggerTimes(records, trace);
  // One disk read: asked for at `release` on `disk`; `done` once read.
  struct Read {
    double release;
    std::string disk;
    double done = 0;
  };
  std::vector<Read> reads;
  // The same block from the same trigger is one read, whichever requests
  // it lands for.
  std::map<std::pair<uint64_t, double>, size_t> read_of;
  struct Wanted {
    size_t read;
    double get_s;
  };
  std::vector<Wanted> wanted;
  ReachBound b;
  auto disk_of = [&](const std::string& holder) {
    return one_disk ? std::string() : holder;
  };
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.route.routed) continue;
    std::vector<size_t> elsewhere;  // blocks not SSD-only at the route
    for (size_t j = 0; j < r.route.tiers.size(); ++j) {
      if (r.route.tiers[j] != 'S') {
        elsewhere.push_back(j);
        continue;
      }
      ++b.blocks;
      if (r.get_start_s <= 0 || j >= trigger[i].size() || trigger[i][j] < 0)
        continue;
      const uint64_t h = trace[r.index].hash_ids[j];
      auto [it, added] =
          read_of.emplace(std::make_pair(h, trigger[i][j]), reads.size());
      if (added) reads.push_back({trigger[i][j], disk_of(HolderOf(r, j))});
      wanted.push_back({it->second, r.get_start_s});
    }
    if (r.get_start_s <= 0) continue;
    // The get's own disk reads of blocks that were not SSD-only when routed
    // (moved to SSD since) take the disk too, from the get's start.
    const uint32_t other = r.ssd_reads > r.route_ssd_read_ssd
                               ? r.ssd_reads - r.route_ssd_read_ssd
                               : 0;
    for (uint32_t k = 0; k < other; ++k) {
      const std::string& holder =
          k < elsewhere.size() ? HolderOf(r, elsewhere[k]) : HolderOf(r, 0);
      reads.push_back({r.get_start_s, disk_of(holder)});
    }
  }
  std::vector<size_t> order(reads.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) {
    return reads[a].release < reads[c].release;
  });
  std::map<std::string, double> free_at;
  for (size_t k : order) {
    double& free = free_at[reads[k].disk];
    free = std::max(free, reads[k].release) + block_read_s;
    reads[k].done = free;
  }
  for (const Wanted& w : wanted) {
    if (reads[w.read].done <= w.get_s) ++b.reachable;
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
    const ReachBound one_disk = ReachableSharingDisks(
        records, trace, given_ms / 1e3, /*one_disk=*/true);
    const ReachBound per_holder = ReachableSharingDisks(
        records, trace, given_ms / 1e3, /*one_disk=*/false);
    j["reachable_sharing_one_disk"] = one_disk.reachable;
    j["share_sharing_one_disk"] = Round(one_disk.Share());
    j["reachable_sharing_holder_disks"] = per_holder.reachable;
    j["share_sharing_holder_disks"] = Round(per_holder.Share());
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
  if (bound.contains("share_sharing_one_disk")) {
    cell += fmt::format(
        " (shared in route order: {} one disk, {} a disk "
        "per holder)",
        Pct(Num(bound, "share_sharing_one_disk")),
        Pct(Num(bound, "share_sharing_holder_disks")));
  }
  return cell;
}

}  // namespace kvpool::replay
