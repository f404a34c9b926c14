#include "events/event_queue.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace kvpool::events {
namespace {

// One record's fixed part, copied in and out with memcpy (the log has no
// alignment); the three strings follow it in this order.
struct RecordHeader {
  uint64_t size;
  uint32_t tenant_len;
  uint32_t key_len;
  uint32_t node_len;
  TierEventKind kind;
  uint8_t media;
  Trigger trigger;
  bool ssd_copy;
};
static_assert(sizeof(RecordHeader) == 24);

// Copies s to dst and returns the end. Tenant names, node ids and many
// keys are a few bytes: those are copied by fixed-size moves (two that
// may overlap) instead of a call into libc per string.
char* CopyBytes(char* dst, std::string_view s) {
  const size_t n = s.size();
  const char* src = s.data();
  if (n >= 8 && n <= 16) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4 && n < 8) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n > 16) {
    std::memcpy(dst, src, n);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
  return dst + n;
}

}  // namespace

EventQueue::EventQueue(size_t capacity) : capacity_(capacity) {}

void EventQueue::Log::Grow(size_t bytes) {
  const size_t grown = std::max({capacity * 2, used + bytes, size_t{4096}});
  // For overwrite: zeroing a buffer about to be written costs as much as
  // the copy.
  auto bigger = std::make_unique_for_overwrite<char[]>(grown);
  if (used > 0) std::memcpy(bigger.get(), data.get(), used);
  data = std::move(bigger);
  capacity = grown;
}

bool EventQueue::Append(const TierEventHead& head, std::string_view tenant,
                        std::string_view key, std::string_view node) {
  const RecordHeader h{head.size,
                       static_cast<uint32_t>(tenant.size()),
                       static_cast<uint32_t>(key.size()),
                       static_cast<uint32_t>(node.size()),
                       head.kind,
                       head.media,
                       head.trigger,
                       head.ssd_copy};
  const size_t bytes = sizeof(h) + tenant.size() + key.size() + node.size();
  SpinLockHolder lock(&mu_);
  if (log_.events >= capacity_) {
    ++dropped_since_drain_;
    dropped_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  char* p = log_.Reserve(bytes);
  std::memcpy(p, &h, sizeof(h));
  p = CopyBytes(p + sizeof(h), tenant);
  p = CopyBytes(p, key);
  CopyBytes(p, node);
  log_.used += bytes;
  ++log_.events;
  return true;
}

bool EventQueue::Push(const TierEvent& ev) {
  return Append({ev.kind, ev.media, ev.trigger, ev.ssd_copy, ev.size},
                ev.tenant, ev.key, ev.node);
}

void EventQueue::Decode(const Log& log, int64_t ts_us,
                        std::vector<TierEvent>* out) {
  // Over the events *out already holds: their strings keep their buffers,
  // so keys longer than a string's inline bytes cost no allocation per
  // drain once the publisher's vector has grown.
  size_t n = 0;
  const char* p = log.data.get();
  const char* end = p + log.used;
  while (p < end) {
    RecordHeader h;
    std::memcpy(&h, p, sizeof(h));
    p += sizeof(h);
    if (n == out->size()) out->emplace_back();
    TierEvent& ev = (*out)[n++];
    ev.kind = h.kind;
    ev.media = h.media;
    ev.trigger = h.trigger;
    ev.ssd_copy = h.ssd_copy;
    ev.size = h.size;
    ev.ts_us = ts_us;
    ev.tenant.assign(p, h.tenant_len);
    p += h.tenant_len;
    ev.key.assign(p, h.key_len);
    p += h.key_len;
    ev.node.assign(p, h.node_len);
    p += h.node_len;
  }
  out->resize(n);
}

uint64_t EventQueue::Drain(std::vector<TierEvent>* out) {
  MutexLock drain_lock(&drain_mu_);
  uint64_t dropped;
  {
    SpinLockHolder lock(&mu_);
    // The appenders get the drained log's buffer back, emptied below on
    // the previous drain: after warm-up neither side allocates.
    std::swap(log_, draining_);
    dropped = dropped_since_drain_;
    dropped_since_drain_ = 0;
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  Decode(draining_, int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000, out);
  draining_.used = 0;
  draining_.events = 0;
  return dropped;
}

}  // namespace kvpool::events
