#include "events/tier_event.h"

#include <xxhash.h>

namespace kvpool::events {

std::string_view KindName(TierEventKind kind) {
  switch (kind) {
    case TierEventKind::kStored:
      return "stored";
    case TierEventKind::kOffloaded:
      return "offloaded";
    case TierEventKind::kPromoted:
      return "promoted";
    case TierEventKind::kEvicted:
      return "evicted";
    case TierEventKind::kRemoved:
      return "removed";
    case TierEventKind::kReplaced:
      return "replaced";
    case TierEventKind::kLost:
      return "lost";
    case TierEventKind::kCleared:
      return "cleared";
    case TierEventKind::kReset:
      return "reset";
  }
  return "unknown";
}

std::string_view MediumName(Medium medium) {
  switch (medium) {
    case kMediumDram:
      return "DRAM";
    case kMediumSsd:
      return "SSD";
    case kMediumPrefetchBuffer:
      return "PREFETCH_BUFFER";
  }
  return "UNKNOWN";
}

std::string_view TriggerName(Trigger trigger) {
  switch (trigger) {
    case Trigger::kOnHit:
      return "on_hit";
    case Trigger::kExist:
      return "exist";
    case Trigger::kRouter:
      return "router";
    case Trigger::kNone:
      break;
  }
  return "";
}

uint64_t BlockHash(std::string_view key) {
  return XXH3_64bits(key.data(), key.size()) & 0x7fffffffffffffffull;
}

}  // namespace kvpool::events
