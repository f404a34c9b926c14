#include "events/event_encoder.h"

#include <msgpack.hpp>

#include <bit>

namespace kvpool::events {
namespace {

// msgpack's packer writes into anything with write(); appending to the
// caller's string saves the copy out of an sbuffer.
struct StringSink {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};
using Packer = msgpack::packer<StringSink>;

// Extra fields after each event's standard ones: seven, and the holder
// node as an eighth in BlockStored / BlockRemoved (AllBlocksCleared keeps
// seven, so a reset's `leader` and `epoch` stay at extras 7 and 8).
constexpr uint32_t kExtras = 7;
constexpr uint32_t kBlockExtras = kExtras + 1;
// Bytes of one encoded event besides its tenant and key: a BlockStored of
// a DRAM put is about 70.
constexpr size_t kEventOverhead = 96;

void PackStr(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// Always float 64 (0xcb): msgpack-cxx packs an integral double as an
// integer, and vLLM's `ts: float` is a float on the wire.
void PackFloat64(StringSink& sink, double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  char b[9];
  b[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) b[8 - i] = static_cast<char>(bits >> (8 * i));
  sink.write(b, sizeof(b));
}

void PackBin(Packer& pk, std::string_view s) {
  pk.pack_bin(static_cast<uint32_t>(s.size()));
  pk.pack_bin_body(s.data(), static_cast<uint32_t>(s.size()));
}

// kind, tenant, key, size, ts, trigger, ssd_copy. A reset's key and size
// are its leader and epoch (tier_event.h), written after these instead.
void PackExtras(Packer& pk, StringSink& sink, const TierEvent& ev) {
  const bool reset = ev.kind == TierEventKind::kReset;
  PackStr(pk, KindName(ev.kind));
  PackBin(pk, ev.tenant);
  PackBin(pk, reset ? std::string_view() : std::string_view(ev.key));
  pk.pack_uint64(reset ? 0 : ev.size);
  PackFloat64(sink, static_cast<double>(ev.ts_us) / 1e6);
  if (ev.trigger == Trigger::kNone) {
    pk.pack_nil();
  } else {
    PackStr(pk, TriggerName(ev.trigger));
  }
  if (ev.ssd_copy) {
    pk.pack_true();
  } else {
    pk.pack_false();
  }
}

bool IsRemoval(TierEventKind kind) {
  return kind == TierEventKind::kEvicted || kind == TierEventKind::kRemoved ||
         kind == TierEventKind::kReplaced || kind == TierEventKind::kLost;
}

// The lowest medium bit, or DRAM for an event that names none.
Medium FirstMedium(uint8_t media) {
  if (media == 0) return kMediumDram;
  return static_cast<Medium>(media & -media);
}

// The eighth extra of a block event: its holder node, bounded.
void PackNode(Packer& pk, const TierEvent& ev) {
  PackStr(pk, std::string_view(ev.node).substr(0, kMaxNodeIdBytes));
}

void PackStored(Packer& pk, StringSink& sink, const TierEvent& ev) {
  // tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id,
  // medium: vLLM's order. kvpool has no tokens: token_ids is empty and
  // block_size 0 (a block is one key, of `size` bytes).
  pk.pack_array(7 + kBlockExtras);
  PackStr(pk, "BlockStored");
  pk.pack_array(1);
  pk.pack_uint64(BlockHash(ev.key));
  pk.pack_nil();
  pk.pack_array(0);
  pk.pack_uint64(0);
  pk.pack_nil();
  PackStr(pk, MediumName(FirstMedium(ev.media)));
  PackExtras(pk, sink, ev);
  PackNode(pk, ev);
}

void PackRemoved(Packer& pk, StringSink& sink, const TierEvent& ev,
                 Medium medium) {
  pk.pack_array(3 + kBlockExtras);
  PackStr(pk, "BlockRemoved");
  pk.pack_array(1);
  pk.pack_uint64(BlockHash(ev.key));
  PackStr(pk, MediumName(medium));
  PackExtras(pk, sink, ev);
  PackNode(pk, ev);
}

// A reset is an AllBlocksCleared as well (a vLLM decoder clears its
// state), with two more fields after kvpool's seven: `leader`, `epoch`.
void PackCleared(Packer& pk, StringSink& sink, const TierEvent& ev) {
  const bool reset = ev.kind == TierEventKind::kReset;
  pk.pack_array(1 + kExtras + (reset ? 2 : 0));
  PackStr(pk, "AllBlocksCleared");
  PackExtras(pk, sink, ev);
  if (reset) {
    PackStr(pk, ev.key);
    pk.pack_uint64(ev.size);
  }
}

}  // namespace

size_t WireEventCount(const TierEvent& ev) {
  if (!IsRemoval(ev.kind) || ev.media == 0) return 1;
  return static_cast<size_t>(std::popcount(ev.media));
}

size_t EncodeBatch(std::span<const TierEvent> events, double ts,
                   uint64_t dropped_before, std::string* out, uint64_t epoch) {
  StringSink sink{out};
  Packer pk(sink);
  size_t n = 0;
  size_t bytes = 32;
  for (const auto& ev : events) {
    const size_t wire = WireEventCount(ev);
    n += wire;
    bytes += wire * (kEventOverhead + ev.tenant.size() + ev.key.size() +
                     ev.node.size());
  }
  // One allocation for the batch rather than a doubling per few events.
  out->reserve(out->size() + bytes);
  pk.pack_array(epoch != 0 ? 5 : 4);
  PackFloat64(sink, ts);
  pk.pack_array(static_cast<uint32_t>(n));
  for (const auto& ev : events) {
    if (ev.kind == TierEventKind::kCleared ||
        ev.kind == TierEventKind::kReset) {
      PackCleared(pk, sink, ev);
    } else if (!IsRemoval(ev.kind)) {
      PackStored(pk, sink, ev);
    } else if (ev.media == 0) {
      PackRemoved(pk, sink, ev, kMediumDram);
    } else {
      // Lowest bit first: DRAM, SSD, PREFETCH_BUFFER.
      for (uint8_t m = ev.media; m != 0; m &= m - 1)
        PackRemoved(pk, sink, ev, static_cast<Medium>(m & -m));
    }
  }
  pk.pack_nil();
  pk.pack_uint64(dropped_before);
  if (epoch != 0) pk.pack_uint64(epoch);
  return n;
}

}  // namespace kvpool::events
