// The time rules of the SSD tier's loops, as pure functions of a Clock's
// now (milliseconds), so ssd_tier_timing_test checks them without sleeping:
//  - a promotion task's deadline (the master's deadline_in_ms, counted from
//    receipt) and the queue order it gives;
//  - whether a queued promotion expired before its SSD read, or could not
//    land before its deadline (promotion_drop_unreachable);
//  - the retry delays of an offload's NotifyOffload.
#ifndef KVPOOL_NODE_SSD_TIER_TIMING_H_
#define KVPOOL_NODE_SSD_TIER_TIMING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

namespace kvpool::ssd_tier_timing {

// None when the task has no deadline (it never expires here).
inline std::optional<int64_t> PromotionDeadlineMs(int64_t received_ms,
                                                  int64_t deadline_in_ms) {
  if (deadline_in_ms <= 0) return std::nullopt;
  return received_ms + deadline_in_ms;
}

// DeadlineQueue order: earliest deadline first; 0 (no deadline) after all.
inline int64_t PromotionOrder(std::optional<int64_t> deadline_ms) {
  return deadline_ms.value_or(0);
}

// A task still queued at its deadline is dropped unread: its get has come.
inline bool PromotionExpired(std::optional<int64_t> deadline_ms,
                             int64_t now_ms) {
  return deadline_ms.has_value() && now_ms >= *deadline_ms;
}

// promotion_drop_unreachable: when a batch taken from the queue now would
// have its bytes in place. `service_ms` is what recent batches took from
// leaving the queue to bytes in place, less any wait for the budget; each
// budget's worth of bytes already reading or waiting for the budget is one
// more such service before this batch's reads start. Without a budget
// (0: the sequential worker, or unbounded) nothing waits ahead.
inline int64_t ExpectedLandMs(int64_t now_ms, double service_ms,
                              uint64_t bytes_ahead, uint64_t budget) {
  double rounds = 1.0;
  if (budget > 0) rounds += double(bytes_ahead) / double(budget);
  return now_ms + int64_t(std::ceil(service_ms * rounds));
}

// A task that would land after its deadline is dropped unread as well: its
// get comes first, and the read would only take the disk from the gets and
// from the tasks that can still make it.
inline bool PromotionUnreachable(std::optional<int64_t> deadline_ms,
                                 int64_t expected_land_ms) {
  return deadline_ms.has_value() && expected_land_ms > *deadline_ms;
}

// The recent batches' service time: an exponentially weighted mean (weight
// 1/4 for the newest), none before the first batch read anything, so a
// holder that has not read yet drops nothing it would not drop without it.
class PromotionServiceTime {
 public:
  void Observe(int64_t ms) {
    const double x = double(std::max<int64_t>(ms, 0));
    mean_ms_ = mean_ms_ ? *mean_ms_ + (x - *mean_ms_) / 4.0 : x;
  }
  std::optional<double> ms() const { return mean_ms_; }

 private:
  std::optional<double> mean_ms_;
};

// What holds a promotion batch of `bytes` that may not start
// (SsdTier::PromotionBytesFit said no): the byte budget, when the bytes in
// flight leave no room for it; otherwise only the rule that offloads go
// first. Named as the phases of kvpool_node_promotion_phase_microseconds.
inline const char* HeldBy(uint64_t budget, uint64_t inflight, uint64_t bytes) {
  return budget > 0 && inflight + bytes > budget ? "held_budget"
                                                 : "held_offload";
}

// NotifyOffload is tried this many times before the batch is rolled back.
inline constexpr int kOffloadNotifyAttempts = 3;
// The wait before try `attempt` (1-based retries: 200 ms, then 400 ms).
inline int64_t OffloadRetryDelayMs(int attempt) {
  return int64_t{100} << attempt;
}

}  // namespace kvpool::ssd_tier_timing

#endif  // KVPOOL_NODE_SSD_TIER_TIMING_H_
