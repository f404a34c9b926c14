// TierMap: a subscriber's picture of which tiers hold each key, per tenant,
// built from the master's KV events (docs/kv_events.md, "kvpool-router
// follows the stream"), so a router can answer "where is this block" without
// asking the master.
//
// Promises:
//  - A key's state is *fresh* only when the map has seen every change of it
//    since a point where its state was known: since an AllBlocksCleared of
//    its tenant, since the start of the stream, or since a lookup of the key
//    (Learn). A key the map holds no entry for is fresh-absent only while
//    its tenant's absence can be trusted (nothing of the tenant lost to a
//    gap or to the capacity bound).
//  - MarkAllStale (an unfillable gap, a new master) makes every key stale
//    at once; events keep updating stale entries but never make them fresh.
//    Only Learn (a lookup's answer) or an AllBlocksCleared does.
//  - Memory is bounded: at most `capacity` entries over all tenants. Past
//    it, the least recently updated entry goes (counted), and its tenant's
//    absence is no longer trusted: unknown keys of it are then looked up.
//  - AllBlocksCleared of a tenant forgets the tenant and trusts its absence
//    again; one with an empty tenant does so for every tenant (the reset a
//    master announces after a failover or restart).
// Thread-safe: one writer (the subscriber's thread, and Learn from routing
// threads) and many readers (Query) under a reader/writer lock.
#ifndef KVPOOL_EVENTS_TIER_MAP_H_
#define KVPOOL_EVENTS_TIER_MAP_H_

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "events/event_decoder.h"

namespace kvpool::events {

// A copy of a key: its tier and the node holding it.
struct Holder {
  uint8_t medium = 0;  // one Medium bit
  std::string node;
  bool operator==(const Holder&) const = default;
};

// Holders a key's entry keeps, over all tiers (a key has few replicas; past
// this, the oldest in the list is forgotten, and the tier bits still say
// which tiers hold the key).
inline constexpr size_t kMaxHoldersPerKey = 8;

// One key as the map sees it.
struct KeyState {
  bool fresh = false;  // the map's view can be trusted (above)
  uint8_t media = 0;   // Medium bits; 0 = no copy
  uint64_t size = 0;
  // The node a get would read from, as a lookup answers: the first holder
  // of a memory copy (DRAM or prefetch buffer) when there is one, else the
  // first of an SSD copy. Empty when the events and lookups named none (a
  // master that publishes no holder).
  std::string node;
};

struct TierMapStats {
  uint64_t entries = 0;
  uint64_t tenants = 0;
  uint64_t events_applied = 0;
  uint64_t capacity_evictions = 0;  // entries dropped for the bound
  uint64_t stale_marks = 0;         // MarkAllStale calls
  uint64_t tenant_resets = 0;       // AllBlocksCleared applied
  uint64_t learned = 0;             // lookups written in by Learn
  uint64_t learn_skipped = 0;       // lookups an event overtook
};

class TierMap {
 public:
  // At most `capacity` key entries (>= 1).
  explicit TierMap(size_t capacity);
  TierMap(const TierMap&) = delete;
  TierMap& operator=(const TierMap&) = delete;

  // Applies a batch's events in order.
  void Apply(std::span<const DecodedEvent> events);
  // Nothing the map holds can be trusted any more (an unfillable gap).
  void MarkAllStale();
  // The stream is followed from its start (sequence 0 seen, or replayed),
  // which describes the master's whole state: everything the map holds is
  // forgotten and every key is known absent until the stream says
  // otherwise (at start the map is empty; after a new master, what it held
  // described the old one). Lookups sent before it are not written.
  void ResetToStreamStart();

  // The state of each of `keys` of `tenant`, in order, under one lock.
  void Query(const std::string& tenant, std::span<const std::string> keys,
             std::vector<KeyState>* out) const;

  // A token for Learn: take it before the lookup RPC.
  uint64_t version() const;
  // Writes a lookup's answer (media 0 = not found) as fresh, unless the key
  // changed, its tenant was reset or the map went stale after `since` (the
  // version() taken before the lookup): then the lookup may be older than
  // what the map holds, and the key is left as it is. A lookup says
  // "memory", not which memory: pass kMediumDram for it, and the first
  // removal of a DRAM or prefetch buffer copy then drops the memory copy
  // (believing a copy gone costs a needless trigger; believing a gone copy
  // there would cost a read from SSD the router did not prefetch).
  // `holders` are the lookup's complete copies in the master's order
  // (memory ones as kMediumDram); `media` their tiers.
  void Learn(const std::string& tenant, const std::string& key, uint8_t media,
             uint64_t size, std::vector<Holder> holders, uint64_t since);
  // The same with one holder for every tier of `media` (none when empty).
  void Learn(const std::string& tenant, const std::string& key, uint8_t media,
             uint64_t size, const std::string& node, uint64_t since);

  // The holders the map keeps for a key, in the entry's order (memory
  // copies first, as the master lists them, then SSD copies); empty for a
  // key it has no entry for. For tests and diagnostics.
  std::vector<Holder> HoldersOf(const std::string& tenant,
                                const std::string& key) const;

  TierMapStats stats() const;
  size_t capacity() const { return capacity_; }

 private:
  struct Tenant;
  struct Entry {
    uint8_t media = 0;
    uint64_t generation = 0;  // fresh iff == generation_
    uint64_t version = 0;     // version_ when last written
    uint64_t size = 0;
    // The memory bit came from a lookup, which does not say which memory.
    bool memory_unsure = false;
    // Memory holders first, newest first (as the master lists them), then
    // SSD holders, oldest first; at most kMaxHoldersPerKey.
    std::vector<Holder> holders;
    std::list<std::pair<Tenant*, const std::string*>>::iterator lru;
  };
  struct Tenant {
    std::unordered_map<std::string, Entry> keys;
    bool absence_trusted = false;
    uint64_t reset_version = 0;
  };

  Tenant& TenantLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry of `key`, created (stale or fresh-absent as the tenant says)
  // when missing; most recently updated either way.
  Entry& EntryLocked(Tenant& t, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(Tenant& t, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResetTenantLocked(Tenant& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A BlockStored / BlockRemoved on the entry's tiers and holders.
  static void AddCopy(Entry& e, uint8_t medium, const std::string& node);
  static void RemoveCopy(Entry& e, uint8_t medium, const std::string& node);
  void EnforceCapacityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  mutable SharedMutex mu_;
  std::unordered_map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
  // Most recently updated first; points into tenants_ (node-based maps, so
  // the pointers stay valid until the entry is erased).
  std::list<std::pair<Tenant*, const std::string*>> lru_ ABSL_GUARDED_BY(mu_);
  size_t entries_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stale_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether a tenant first seen now starts with trusted absence.
  bool new_tenants_trusted_ ABSL_GUARDED_BY(mu_) = false;
  TierMapStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_TIER_MAP_H_
