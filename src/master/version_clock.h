// Versions of stored values that stay ordered across master restarts: a
// hybrid clock, max(wall-clock microseconds, last + 1). A new master starts
// above every version the previous one issued as long as the wall clock did
// not step back by more than the time the restart took, and seeing a higher
// version (a node re-registering one) moves the clock past it. So a copy a
// node re-registers can always be ordered against a value this master took.
// Thread-safe.
#ifndef KVPOOL_MASTER_VERSION_CLOCK_H_
#define KVPOOL_MASTER_VERSION_CLOCK_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvpool {

class VersionClock {
 public:
  // A version greater than every version returned or observed before.
  uint64_t Next() {
    uint64_t last = last_.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t next = std::max(WallMicros(), last + 1);
      if (last_.compare_exchange_weak(last, next, std::memory_order_relaxed))
        return next;
    }
  }
  // Moves the clock past `v` (a version issued elsewhere).
  void Observe(uint64_t v) {
    uint64_t last = last_.load(std::memory_order_relaxed);
    while (v > last &&
           !last_.compare_exchange_weak(last, v, std::memory_order_relaxed)) {
    }
  }

 private:
  static uint64_t WallMicros() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
  }
  std::atomic<uint64_t> last_{0};
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_VERSION_CLOCK_H_
