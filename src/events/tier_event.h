// TierEvent: one change of a key's tiers, as the master records it under a
// shard lock. Deliberately small and flat: the hot path only fills one in
// and pushes it into an EventQueue; the key's hash, the wire names and the
// encoding are all done later on the publisher's thread (docs/kv_events.md).
#ifndef KVPOOL_EVENTS_TIER_EVENT_H_
#define KVPOOL_EVENTS_TIER_EVENT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace kvpool::events {

// What happened to the key. The wire tag follows from it: kStored,
// kOffloaded and kPromoted are BlockStored, kEvicted and the removals are
// BlockRemoved, kCleared and kReset are AllBlocksCleared.
enum class TierEventKind : uint8_t {
  kStored = 0,     // a put completed
  kOffloaded = 1,  // an SSD copy now exists
  kPromoted = 2,   // back in DRAM (or a prefetch buffer) from SSD
  kEvicted = 3,    // a DRAM / prefetch buffer copy was given up
  kRemoved = 4,    // remove / remove by regex: every copy is gone
  kReplaced = 5,   // an upsert replaced the value: the old copies are gone
  kLost = 6,       // its holder was declared dead
  kCleared = 7,    // remove_all of a tenant (key empty)
  // A new stream (a master started serving: a start, a restart, a standby
  // promoted): everything published before it, by any master, is void.
  // Made by the publisher, never pushed. It reuses two fields rather than
  // growing every event of the hot path: `key` holds the leader's address
  // and `size` the stream's epoch (the encoder writes them as the extra
  // `leader` and `epoch` fields, docs/kv_events.md).
  kReset = 8,
};

// Where a copy lives; a bit set, since a removal names every tier the key
// was in (one BlockRemoved per tier on the wire).
enum Medium : uint8_t {
  kMediumDram = 1,
  kMediumSsd = 2,
  kMediumPrefetchBuffer = 4,
};

// Who asked for a promotion; values as the master's TriggerSource.
enum class Trigger : int8_t { kNone = -1, kOnHit = 0, kExist = 1, kRouter = 2 };

struct TierEvent {
  TierEventKind kind = TierEventKind::kStored;
  uint8_t media = 0;  // Medium bits
  Trigger trigger = Trigger::kNone;
  bool ssd_copy = false;  // kEvicted: the key still has an SSD copy
  uint64_t size = 0;      // value bytes
  int64_t ts_us = 0;      // wall clock, set by EventQueue::Push
  std::string tenant;
  std::string key;
  // The node whose segment or SSD holds the copies the event is about (the
  // master emits one event per holder node); empty for kCleared and kReset.
  std::string node;
};

// Longest node id the wire carries (the master refuses longer ones at mount;
// the encoder cuts, the decoder refuses what exceeds it).
inline constexpr size_t kMaxNodeIdBytes = 256;

// Wire names ("stored", "DRAM", "on_hit", ...); docs/kv_events.md lists them.
std::string_view KindName(TierEventKind kind);
std::string_view MediumName(Medium medium);
std::string_view TriggerName(Trigger trigger);  // "" for kNone

// The integer block hash published for a key: XXH3-64 of the key's bytes
// with the top bit cleared, so decoders reading int64 and uint64 agree.
uint64_t BlockHash(std::string_view key);

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_TIER_EVENT_H_
