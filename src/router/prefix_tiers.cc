#include "router/prefix_tiers.h"

#include <optional>

namespace kvpool {
namespace {

// The node a get of this block would read from: the first complete replica
// of the best tier.
std::string Holder(const TierInfo& t, const std::string& tier) {
  const auto want = tier == "memory" ? ReplicaInfo::Kind::kMemory
                                     : ReplicaInfo::Kind::kLocalDisk;
  for (const auto& r : t.replicas) {
    if (r.complete && r.kind == want) return r.node_id;
  }
  return "";
}

// The tiers of the complete replicas, as the map records them (a lookup
// does not tell DRAM from a prefetch buffer: both are "memory").
uint8_t MediaOf(const TierInfo& t) {
  uint8_t media = 0;
  for (const auto& r : t.replicas) {
    if (!r.complete) continue;
    media |= r.kind == ReplicaInfo::Kind::kMemory ? uint8_t{events::kMediumDram}
                                                  : uint8_t{events::kMediumSsd};
  }
  return media;
}

// The complete replicas' holders in the lookup's (the master's) order, as
// the map keeps them: memory ones as DRAM (a lookup does not say which).
std::vector<events::Holder> HoldersOf(const TierInfo& t) {
  std::vector<events::Holder> out;
  for (const auto& r : t.replicas) {
    if (!r.complete) continue;
    out.push_back(events::Holder{r.kind == ReplicaInfo::Kind::kMemory
                                     ? uint8_t{events::kMediumDram}
                                     : uint8_t{events::kMediumSsd},
                                 r.node_id});
  }
  return out;
}

Status LookupError(const Result<TierInfo>& t) {
  // Transport failure or a master error: no decision can be trusted.
  return Status(
      t.code() == ErrorCode::RPC_FAIL ? ErrorCode::RPC_FAIL : t.code(),
      "router: tier lookup failed: " + t.status().ToString());
}

// Appends the block a lookup found; false at the end of the prefix.
bool AppendLooked(const std::string& key, const TierInfo& t, PrefixTiers* p) {
  std::string tier = t.BestTier();
  // A put in flight is not readable yet: the engine would recompute it.
  if (tier == "processing") return false;
  BlockTier b;
  b.node_id = Holder(t, tier);
  b.size = t.size;
  if (tier == "local_disk") p->ssd_keys.push_back(key);
  b.tier = std::move(tier);
  p->blocks.push_back(std::move(b));
  return true;
}

// Appends the block the map knows; false at the end of the prefix.
bool AppendKnown(const std::string& key, const events::KeyState& s,
                 PrefixTiers* p) {
  if (s.media == 0) return false;
  BlockTier b;
  const bool memory =
      (s.media & (events::kMediumDram | events::kMediumPrefetchBuffer)) != 0;
  b.tier = memory ? "memory" : "local_disk";
  b.node_id = s.node;
  b.size = s.size;
  if (!memory) p->ssd_keys.push_back(key);
  p->blocks.push_back(std::move(b));
  ++p->blocks_from_map;
  return true;
}

}  // namespace

Result<PrefixTiers> PrefixFromLookup(const std::vector<std::string>& keys,
                                     const TierLookup& lookup) {
  PrefixTiers p;
  p.lookup_rpc = true;
  p.keys_looked_up = keys.size();
  auto tiers = lookup(keys);
  for (size_t i = 0; i < keys.size() && i < tiers.size(); ++i) {
    const auto& t = tiers[i];
    if (!t.ok()) {
      if (t.code() == ErrorCode::OBJECT_NOT_FOUND) break;  // end of prefix
      return LookupError(t);
    }
    if (!AppendLooked(keys[i], t.value(), &p)) break;
  }
  return p;
}

Result<PrefixTiers> PrefixFromMap(events::TierMap* map,
                                  const std::string& tenant,
                                  const std::vector<std::string>& keys,
                                  const TierLookup& lookup) {
  std::vector<events::KeyState> known;
  map->Query(tenant, keys, &known);
  // The keys the prefix may need and the map cannot answer: every stale
  // one before the first key the map knows absent (past it, nothing is
  // part of the prefix whatever the store holds).
  std::vector<size_t> stale;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (known[i].fresh && known[i].media == 0) break;
    if (!known[i].fresh) stale.push_back(i);
  }
  PrefixTiers p;
  std::vector<std::optional<Result<TierInfo>>> looked(keys.size());
  if (!stale.empty()) {
    std::vector<std::string> ask;
    ask.reserve(stale.size());
    for (size_t i : stale) ask.push_back(keys[i]);
    const uint64_t since = map->version();
    auto tiers = lookup(ask);
    p.lookup_rpc = true;
    p.keys_looked_up = ask.size();
    for (size_t j = 0; j < stale.size() && j < tiers.size(); ++j) {
      const auto& t = tiers[j];
      if (t.ok()) {
        map->Learn(tenant, ask[j], MediaOf(t.value()), t->size,
                   HoldersOf(t.value()), since);
      } else if (t.code() == ErrorCode::OBJECT_NOT_FOUND) {
        map->Learn(tenant, ask[j], 0, 0, "", since);
      }
      looked[stale[j]] = std::move(tiers[j]);
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (known[i].fresh) {
      if (!AppendKnown(keys[i], known[i], &p)) break;
      continue;
    }
    if (!looked[i].has_value()) break;  // the lookup answered fewer keys
    const auto& t = *looked[i];
    if (!t.ok()) {
      if (t.code() == ErrorCode::OBJECT_NOT_FOUND) break;
      return LookupError(t);
    }
    if (!AppendLooked(keys[i], t.value(), &p)) break;
  }
  return p;
}

}  // namespace kvpool
