// The reading side of kvpool's KV-events wire format (docs/kv_events.md):
// one EventBatch payload back into tier changes, each a single medium added
// or removed, or a tenant cleared. It reads the wire tag for what happened
// to the medium (so it agrees with any vLLM consumer) and kvpool's appended
// fields for whose key it was. Pure functions, no state, any thread.
#ifndef KVPOOL_EVENTS_EVENT_DECODER_H_
#define KVPOOL_EVENTS_EVENT_DECODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "events/tier_event.h"
#include "kvpool/status.h"

namespace kvpool::events {

// What one wire event does to a key's set of tiers.
enum class BlockOp : uint8_t {
  kAdd,     // BlockStored: a copy now exists in `medium`
  kRemove,  // BlockRemoved: the copy in `medium` is gone
  kClear,   // AllBlocksCleared: every block of `tenant` is gone
};

struct DecodedEvent {
  BlockOp op = BlockOp::kAdd;
  Medium medium = kMediumDram;  // kAdd, kRemove
  TierEventKind kind = TierEventKind::kStored;
  Trigger trigger = Trigger::kNone;
  bool ssd_copy = false;
  uint64_t size = 0;
  // kClear with an empty tenant, or a reset (kind kReset): every tenant.
  std::string tenant;
  std::string key;  // empty for kClear
  // kAdd, kRemove: the node holding the copy (kvpool's eighth field);
  // empty when the publisher sent none (a master before the field).
  std::string node;
};

struct DecodedBatch {
  double ts = 0;                // seconds since the epoch
  uint64_t dropped_before = 0;  // kvpool: changes lost just before it
  uint64_t epoch = 0;           // kvpool: the stream's epoch (0: none sent)
  std::vector<DecodedEvent> events;
};

// INVALID_PARAMS naming what is wrong for a payload that is not a batch in
// the documented layout (bad msgpack, an unknown tag or medium, missing
// kvpool fields). A batch either decodes whole or not at all.
Result<DecodedBatch> DecodeBatch(std::string_view payload);

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_EVENT_DECODER_H_
