// PerThreadCache: a small per-thread, direct-mapped cache of an owner's
// id -> value map, for lookups on hot paths (per put, under a shard lock)
// that would otherwise take the owner's shared lock for a value that hardly
// ever changes: a tenant's name, a segment's node.
//
// An entry is served only while the owner's generation is the one it was
// filled under: the owner bumps its generation (under its own exclusive
// lock) whenever a value may go or change, and fills an entry with the
// generation read under its shared lock, so a hit answers what a locked
// lookup at that moment would have. Owners are told apart by a serial
// (NewCacheOwnerSerial), never by address, since a new owner may take a
// freed one's address. `Tag` gives each kind of owner its own slots.
#ifndef KVPOOL_COMMON_PER_THREAD_CACHE_H_
#define KVPOOL_COMMON_PER_THREAD_CACHE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kvpool {

// A serial for a new owner; never 0 (an empty slot's serial).
inline uint64_t NewCacheOwnerSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

template <typename Tag, typename V, size_t N = 16>
class PerThreadCache {
 public:
  // The value cached for (owner, id) under generation `gen`, or null.
  static const V* Find(uint64_t owner, uint64_t gen, uint32_t id) {
    const Slot& s = SlotOf(id);
    return s.owner == owner && s.gen == gen && s.id == id ? &s.value : nullptr;
  }
  // Remembers `value` for (owner, id) under `gen`, replacing the slot's
  // previous entry.
  static void Fill(uint64_t owner, uint64_t gen, uint32_t id, const V& value) {
    Slot& s = SlotOf(id);
    s.owner = owner;
    s.gen = gen;
    s.id = id;
    s.value = value;
  }

 private:
  struct Slot {
    uint64_t owner = 0;
    uint64_t gen = 0;
    uint32_t id = 0;
    V value{};
  };
  static Slot& SlotOf(uint32_t id) {
    static thread_local std::array<Slot, N> slots;
    return slots[id % N];
  }
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_PER_THREAD_CACHE_H_
