#include "scale_sim/slot_map.h"

#include <algorithm>

namespace kvpool::scale_sim {

const char* RoutingName(Routing r) {
  return r == Routing::kKey ? "key" : "prefix";
}

SlotMap::SlotMap(int shards)
    : shards_(std::clamp(shards, 1, 4096)), owner_(kSlots) {
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    owner_[slot] = static_cast<uint16_t>(uint64_t{slot} * shards_ / kSlots);
  }
}

SlotMap::SlotMap(std::vector<uint16_t> owner) : owner_(std::move(owner)) {
  owner_.resize(kSlots, 0);
  shards_ = 1 + *std::max_element(owner_.begin(), owner_.end());
}

uint32_t SlotMap::SlotsOf(int s) const {
  return static_cast<uint32_t>(std::count(owner_.begin(), owner_.end(), s));
}

}  // namespace kvpool::scale_sim
