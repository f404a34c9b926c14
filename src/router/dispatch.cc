#include "router/dispatch.h"

#include <unordered_map>

namespace kvpool {

namespace {

// Least loaded among `candidates` (flags indexed like engines); the first in
// config order wins a tie so the choice is deterministic.
int LeastLoaded(const std::vector<uint64_t>& in_flight,
                const std::vector<bool>& candidates) {
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i]) continue;
    if (best < 0 || in_flight[i] < in_flight[static_cast<size_t>(best)])
      best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

DispatchChoice PickEngine(const std::vector<EngineInfo>& engines,
                          const std::vector<uint64_t>& in_flight,
                          const std::vector<std::string>& holders) {
  DispatchChoice choice;
  if (engines.empty()) return choice;

  std::unordered_map<std::string_view, uint64_t> blocks_on;
  for (const auto& h : holders) {
    if (!h.empty()) ++blocks_on[h];
  }
  // Engines local to the best-served holders. A holder with no local engine
  // cannot give locality, so it must not shadow a smaller one that can.
  uint64_t best_count = 0;
  std::vector<bool> local(engines.size(), false);
  for (size_t i = 0; i < engines.size(); ++i) {
    for (const auto& node : engines[i].local_node_ids) {
      auto it = blocks_on.find(node);
      if (it == blocks_on.end()) continue;
      if (it->second > best_count) {
        best_count = it->second;
        local.assign(engines.size(), false);
      }
      if (it->second == best_count) local[i] = true;
    }
  }
  if (best_count > 0) {
    choice.engine = LeastLoaded(in_flight, local);
    choice.affinity = true;
    return choice;
  }
  choice.engine =
      LeastLoaded(in_flight, std::vector<bool>(engines.size(), true));
  return choice;
}

}  // namespace kvpool
