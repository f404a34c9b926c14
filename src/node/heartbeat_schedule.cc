#include "node/heartbeat_schedule.h"

#include <algorithm>

namespace kvpool {

HeartbeatSchedule::Next HeartbeatSchedule::After(Outcome outcome, bool had_work,
                                                 int64_t started_ms) {
  Next next;
  next.remount = outcome == Outcome::kUnknownNode;
  consecutive_failures_ =
      outcome == Outcome::kFailed ? consecutive_failures_ + 1 : 0;
  // Pace only calls that returned early without work (errors, an old
  // master that does not hold the poll), never a hand-over.
  const int64_t now = clock_->NowMs();
  next.beat_at_ms = had_work ? now : std::max(now, started_ms + period_ms_);
  return next;
}

}  // namespace kvpool
