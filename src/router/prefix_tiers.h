// The matched prefix of a request: which of its first blocks the store
// holds, in which tier, on which node. Found by one read-only lookup of the
// prompt's keys, or, with a tier map that follows the master's KV events
// (docs/kv_events.md, "kvpool-router follows the stream"), from the map for
// the keys it has fresh state for and by one lookup of the others.
#ifndef KVPOOL_ROUTER_PREFIX_TIERS_H_
#define KVPOOL_ROUTER_PREFIX_TIERS_H_

#include <functional>
#include <string>
#include <vector>

#include "events/tier_map.h"
#include "kvpool/router.h"

namespace kvpool {

struct PrefixTiers {
  std::vector<BlockTier> blocks;      // one per matched block, in order
  std::vector<std::string> ssd_keys;  // the SSD-only blocks' keys
  size_t keys_looked_up = 0;          // keys sent to the master
  bool lookup_rpc = false;            // a lookup was sent
  size_t blocks_from_map = 0;         // blocks the map answered
};

// One batched read-only lookup (Client::BatchGetReplicaDesc): a result per
// key, OBJECT_NOT_FOUND for a key the store does not hold.
using TierLookup = std::function<std::vector<Result<TierInfo>>(
    const std::vector<std::string>&)>;

// The router without events: one lookup of every key. The prefix ends at
// the first key not found or whose best replica is still being written.
// A lookup error other than "not found" fails the whole request.
Result<PrefixTiers> PrefixFromLookup(const std::vector<std::string>& keys,
                                     const TierLookup& lookup);

// With a tier map: blocks with fresh state come from the map; the others,
// up to the first key the map knows absent, are looked up in one call and
// written back into the map (TierMap::Learn), which makes them fresh. When
// every key the prefix needs is fresh, no lookup is sent. A block's
// node_id is the map's holder of its best tier (the events name the node
// of every copy), the node a lookup would name; empty only when neither
// the events nor a lookup named one (a master that publishes no holder).
Result<PrefixTiers> PrefixFromMap(events::TierMap* map,
                                  const std::string& tenant,
                                  const std::vector<std::string>& keys,
                                  const TierLookup& lookup);

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_PREFIX_TIERS_H_
