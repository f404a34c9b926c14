// How a key finds its master shard in the design of docs/scale.md: a key's
// routing hash picks one of kSlots slots, and a slot map (published in etcd,
// cached by clients) says which shard owns each slot. The simulation uses
// the same two steps so that its skew is the design's skew. Immutable after
// construction; safe to share between threads.
#ifndef KVPOOL_SCALE_SIM_SLOT_MAP_H_
#define KVPOOL_SCALE_SIM_SLOT_MAP_H_

#include <cstdint>
#include <vector>

namespace kvpool::scale_sim {

inline constexpr uint32_t kSlots = 16384;

// A 64-bit mix (SplitMix64's finaliser): spreads sequential ids over all
// bits, so `% kSlots` is uniform.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// What a key's routing hash is taken over.
enum class Routing : uint8_t {
  // The whole key: a request's blocks spread over the shards.
  kKey = 0,
  // A hash tag, the request's first block (Redis Cluster's `{tag}`): every
  // block of a prefix chain lives on the shard of its first block.
  kPrefix = 1,
};
const char* RoutingName(Routing r);

class SlotMap {
 public:
  // `shards` contiguous, equal ranges of slots (the last ones take the
  // remainder when kSlots is not a multiple).
  explicit SlotMap(int shards);
  // An explicit owner per slot (size kSlots), as after a migration.
  explicit SlotMap(std::vector<uint16_t> owner);

  static uint32_t SlotOf(uint64_t routing_hash) {
    return static_cast<uint32_t>(Mix64(routing_hash) % kSlots);
  }
  int ShardOf(uint64_t routing_hash) const {
    return owner_[SlotOf(routing_hash)];
  }
  int shards() const { return shards_; }
  // Slots shard `s` owns.
  uint32_t SlotsOf(int s) const;

 private:
  int shards_ = 1;
  std::vector<uint16_t> owner_;
};

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_SLOT_MAP_H_
