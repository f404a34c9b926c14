#include "router/dispatch.h"

#include <algorithm>
#include <unordered_map>

namespace kvpool {

DispatchChoice PickEngine(const std::vector<EngineInfo>& engines,
                          const std::vector<uint64_t>& in_flight,
                          const std::vector<std::string>& holders,
                          double affinity_weight) {
  DispatchChoice choice;
  if (engines.empty()) return choice;

  std::unordered_map<std::string_view, uint64_t> blocks_on;
  uint64_t found = 0;
  for (const auto& h : holders) {
    if (h.empty()) continue;
    ++blocks_on[h];
    ++found;
  }
  // Prefix blocks on nodes local to each engine. Affinity is measured by
  // the best single holder an engine is local to, so a holder with no local
  // engine never shadows a smaller one that has one.
  std::vector<uint64_t> local(engines.size(), 0), top(engines.size(), 0);
  uint64_t best_top = 0;
  for (size_t i = 0; i < engines.size(); ++i) {
    for (const auto& node : engines[i].local_node_ids) {
      auto it = blocks_on.find(node);
      if (it == blocks_on.end()) continue;
      local[i] += it->second;
      top[i] = std::max(top[i], it->second);
    }
    best_top = std::max(best_top, top[i]);
  }
  const bool pure = affinity_weight < 0;
  // Affinity is worth a share of the load, not a fixed count: at 2 requests
  // in flight per engine one request of gap is a 2:1 split, at 200 it is
  // nothing. At least one request's worth, so an idle pool still prefers
  // locality.
  double mean_load = 0;
  for (uint64_t n : in_flight) mean_load += double(n);
  mean_load /= double(engines.size());
  const double pull = affinity_weight * std::max(1.0, mean_load);
  int best = -1;
  double best_cost = 0;
  for (size_t i = 0; i < engines.size(); ++i) {
    if (pure && best_top > 0 && top[i] != best_top) continue;
    double cost = double(in_flight[i]);
    if (!pure && found > 0)
      cost += pull * double(found - local[i]) / double(found);
    const size_t b = static_cast<size_t>(best);
    if (best < 0 || cost < best_cost ||
        (cost == best_cost && local[i] > local[b])) {
      best = static_cast<int>(i);
      best_cost = cost;
    }
  }
  choice.engine = best;
  choice.affinity = best_top > 0 && top[static_cast<size_t>(best)] == best_top;
  return choice;
}

}  // namespace kvpool
