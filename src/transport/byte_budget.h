// Bytes that requests in flight hold in the data server's memory
// (descriptor lists, SSD_READ and PREFETCH bodies, SSD read buffers), across
// all sessions: a request that would take it past its cap is refused, so a
// crowd of clients announcing big requests cannot make the node allocate
// without bound. ByteBudget is thread-safe; a BudgetHold belongs to one
// session and is used by one thread at a time.
#ifndef KVPOOL_TRANSPORT_BYTE_BUDGET_H_
#define KVPOOL_TRANSPORT_BYTE_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace kvpool {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}
  // Takes `n` bytes if that keeps the total at most the cap.
  bool TryAcquire(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > cap_ || used > cap_ - n) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    return true;
  }
  void Release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

// Bytes one session holds of a ByteBudget; gives them back when reset or
// destroyed (a session that ends mid-request included).
class BudgetHold {
 public:
  explicit BudgetHold(ByteBudget* budget) : budget_(budget) {}
  ~BudgetHold() { Reset(); }
  BudgetHold(const BudgetHold&) = delete;
  BudgetHold& operator=(const BudgetHold&) = delete;
  // Holds `n` bytes in all (more or fewer than now); false, holding what it
  // held, if the budget has no room.
  bool Resize(uint64_t n) {
    if (n > held_) {
      if (!budget_->TryAcquire(n - held_)) return false;
    } else {
      budget_->Release(held_ - n);
    }
    held_ = n;
    return true;
  }
  void Reset() { Resize(0); }

 private:
  ByteBudget* const budget_;
  uint64_t held_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_BYTE_BUDGET_H_
