// Time source for everything that expires: leases, TTLs, timeouts.
// Production code uses SystemClock; tests inject a FakeClock so that lease
// and eviction behaviour is checked without sleeping.
#ifndef KVPOOL_COMMON_CLOCK_H_
#define KVPOOL_COMMON_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvpool {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds; only differences are meaningful.
  virtual int64_t NowMs() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static SystemClock* Default() {
    static SystemClock clock;
    return &clock;
  }
};

// Thread-safe manual clock for tests.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void Advance(int64_t ms) { now_.fetch_add(ms); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_CLOCK_H_
