// The time rules of the SSD tier's loops, as pure functions of a Clock's
// now (milliseconds), so ssd_tier_timing_test checks them without sleeping:
//  - a promotion task's deadline (the master's deadline_in_ms, counted from
//    receipt) and the queue order it gives;
//  - whether a queued promotion expired before its SSD read;
//  - the retry delays of an offload's NotifyOffload.
#ifndef KVPOOL_NODE_SSD_TIER_TIMING_H_
#define KVPOOL_NODE_SSD_TIER_TIMING_H_

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

// NotifyOffload is tried this many times before the batch is rolled back.
inline constexpr int kOffloadNotifyAttempts = 3;
// The wait before try `attempt` (1-based retries: 200 ms, then 400 ms).
inline int64_t OffloadRetryDelayMs(int attempt) {
  return int64_t{100} << attempt;
}

}  // namespace kvpool::ssd_tier_timing

#endif  // KVPOOL_NODE_SSD_TIER_TIMING_H_
