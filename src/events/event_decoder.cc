#include "events/event_decoder.h"

#include <msgpack.hpp>

namespace kvpool::events {
namespace {

// kvpool's fields follow the standard ones: this many of them.
constexpr uint32_t kExtras = 7;

Status Bad(std::string_view what) {
  return Status(ErrorCode::INVALID_PARAMS,
                "kv events: bad batch: " + std::string(what));
}

// str and bin both: a consumer written against an older or hand-made
// encoder may send either for the names and the bytes.
bool Bytes(const msgpack::object& o, std::string* out) {
  if (o.type == msgpack::type::STR) {
    out->assign(o.via.str.ptr, o.via.str.size);
    return true;
  }
  if (o.type == msgpack::type::BIN) {
    out->assign(o.via.bin.ptr, o.via.bin.size);
    return true;
  }
  return false;
}

bool ParseMedium(const msgpack::object& o, Medium* out) {
  std::string s;
  if (!Bytes(o, &s)) return false;
  for (Medium m : {kMediumDram, kMediumSsd, kMediumPrefetchBuffer}) {
    if (s == MediumName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

// Leaves *out as it is for a name it does not know.
void ParseKind(const std::string& s, TierEventKind* out) {
  for (uint8_t k = 0; k <= uint8_t(TierEventKind::kReset); ++k) {
    const auto kind = static_cast<TierEventKind>(k);
    if (s == KindName(kind)) *out = kind;
  }
}

// kind, tenant, key, size, ts, trigger, ssd_copy from `at` on.
Status ParseExtras(const msgpack::object_array& a, uint32_t at,
                   DecodedEvent* ev) {
  if (a.size < at + kExtras) return Bad("an event without kvpool's fields");
  // The tag says what happened to the medium; `kind` only why. A kind this
  // build does not know (a newer master's) is kept as the default rather
  // than failing the batch, which would make every subscriber resync.
  std::string kind;
  if (!Bytes(a.ptr[at], &kind)) return Bad("kind not a string");
  ParseKind(kind, &ev->kind);
  if (!Bytes(a.ptr[at + 1], &ev->tenant) || !Bytes(a.ptr[at + 2], &ev->key))
    return Bad("tenant or key not bytes");
  if (a.ptr[at + 3].type != msgpack::type::POSITIVE_INTEGER)
    return Bad("size not an unsigned integer");
  ev->size = a.ptr[at + 3].via.u64;
  const auto& trig = a.ptr[at + 5];
  ev->trigger = Trigger::kNone;
  if (trig.type != msgpack::type::NIL) {
    std::string t;
    if (!Bytes(trig, &t)) return Bad("trigger not a string");
    for (Trigger c : {Trigger::kOnHit, Trigger::kExist, Trigger::kRouter}) {
      if (t == TriggerName(c)) ev->trigger = c;
    }
  }
  if (a.ptr[at + 6].type != msgpack::type::BOOLEAN)
    return Bad("ssd_copy not a bool");
  ev->ssd_copy = a.ptr[at + 6].via.boolean;
  // A new stream's reset voids everything before it, whoever's.
  if (ev->kind == TierEventKind::kReset) ev->tenant.clear();
  return Status::OK();
}

Status ParseEvent(const msgpack::object& o, DecodedEvent* ev) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0)
    return Bad("an event that is not a tagged array");
  const auto& a = o.via.array;
  std::string tag;
  if (!Bytes(a.ptr[0], &tag)) return Bad("event tag not a string");
  // Where the medium is and where kvpool's fields start: after vLLM's
  // fields of that event (tag, block_hashes, ..., medium).
  uint32_t medium_at = 0, extras_at = 0;
  if (tag == "BlockStored") {
    ev->op = BlockOp::kAdd;
    medium_at = 6;
    extras_at = 7;
  } else if (tag == "BlockRemoved") {
    ev->op = BlockOp::kRemove;
    medium_at = 2;
    extras_at = 3;
  } else if (tag == "AllBlocksCleared") {
    ev->op = BlockOp::kClear;
    extras_at = 1;
  } else {
    return Bad("unknown tag '" + tag + "'");
  }
  if (medium_at > 0 &&
      (a.size <= medium_at || !ParseMedium(a.ptr[medium_at], &ev->medium)))
    return Bad("unknown medium");
  if (Status s = ParseExtras(a, extras_at, ev); !s.ok()) return s;
  // The holder node follows kvpool's seven fields of a block event; older
  // masters send none (then the node is unknown, empty).
  ev->node.clear();
  if (ev->op != BlockOp::kClear && a.size > extras_at + kExtras) {
    const auto& n = a.ptr[extras_at + kExtras];
    if (n.type != msgpack::type::NIL) {
      if (!Bytes(n, &ev->node)) return Bad("node not a string");
      if (ev->node.size() > kMaxNodeIdBytes) return Bad("node id too long");
    }
  }
  return Status::OK();
}

}  // namespace

Result<DecodedBatch> DecodeBatch(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    oh = msgpack::unpack(payload.data(), payload.size());
  } catch (const std::exception& e) {
    return Bad(std::string("msgpack: ") + e.what());
  }
  const msgpack::object& root = oh.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < 2)
    return Bad("not an EventBatch array");
  const auto& b = root.via.array;
  DecodedBatch out;
  if (b.ptr[0].type == msgpack::type::FLOAT64 ||
      b.ptr[0].type == msgpack::type::FLOAT32) {
    out.ts = b.ptr[0].via.f64;
  }
  if (b.ptr[1].type != msgpack::type::ARRAY) return Bad("events not an array");
  // dropped_before is kvpool's and optional to a reader: absent = 0.
  if (b.size >= 4 && b.ptr[3].type == msgpack::type::POSITIVE_INTEGER)
    out.dropped_before = b.ptr[3].via.u64;
  if (b.size >= 5 && b.ptr[4].type == msgpack::type::POSITIVE_INTEGER)
    out.epoch = b.ptr[4].via.u64;
  const auto& evs = b.ptr[1].via.array;
  out.events.resize(evs.size);
  for (uint32_t i = 0; i < evs.size; ++i) {
    if (Status s = ParseEvent(evs.ptr[i], &out.events[i]); !s.ok()) return s;
  }
  return out;
}

}  // namespace kvpool::events
