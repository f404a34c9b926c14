// The msgpack encoding of a batch of TierEvents in vLLM's KV-events wire
// format (EventBatch with tagged BlockStored / BlockRemoved /
// AllBlocksCleared events), with kvpool's fields appended after the
// standard ones so a decoder written for vLLM's schema still reads them.
// docs/kv_events.md is the field-by-field description; this file and that
// one must agree (kv_events_test.py decodes the bytes by the document).
#ifndef KVPOOL_EVENTS_EVENT_ENCODER_H_
#define KVPOOL_EVENTS_EVENT_ENCODER_H_

#include <cstdint>
#include <span>
#include <string>

#include "events/tier_event.h"

namespace kvpool::events {

// Wire events one TierEvent becomes: one per medium of a removal, else 1.
size_t WireEventCount(const TierEvent& ev);

// Appends to *out the msgpack of
//   [ts, [event...], data_parallel_rank = nil, dropped_before, epoch]
// `ts` is seconds since the epoch; `dropped_before` (kvpool's extra) is how
// many events the queue dropped just before this batch; `epoch` (kvpool's
// too) names the stream the batch belongs to, and is left out when 0 (a
// publisher without a stream: unit tests, benchmarks). Returns the number
// of wire events written.
size_t EncodeBatch(std::span<const TierEvent> events, double ts,
                   uint64_t dropped_before, std::string* out,
                   uint64_t epoch = 0);

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_EVENT_ENCODER_H_
