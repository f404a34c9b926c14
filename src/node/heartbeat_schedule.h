// When the node's heartbeat loop beats again, and what it does about one
// beat's outcome, read from an injected Clock so that tests check the
// cadence with a FakeClock instead of sleeping (node_test).
//
// The heartbeat is a long poll: the master holds it up to the period and
// answers at once when it has work. A beat that returned early without work
// (an error, an older master that does not hold the poll) is paced to the
// period, so a failing master is not called in a hot loop; a beat that
// handed work over is followed at once, so queued tasks are not delayed.
// A master that does not know the node (it restarted, or declared the node
// dead) is answered with a remount.
#ifndef KVPOOL_NODE_HEARTBEAT_SCHEDULE_H_
#define KVPOOL_NODE_HEARTBEAT_SCHEDULE_H_

#include <cstdint>

#include "common/clock.h"

namespace kvpool {

class HeartbeatSchedule {
 public:
  enum class Outcome {
    kOk,           // the master answered
    kFailed,       // the call failed, or a stale leader answered
    kUnknownNode,  // the master answered CLIENT_NOT_FOUND
  };
  struct Next {
    bool remount = false;  // mount the node's segments again first
    // Clock time at which to beat again (<= now: at once).
    int64_t beat_at_ms = 0;
  };

  // `clock` must outlive the schedule.
  HeartbeatSchedule(const Clock* clock, int64_t period_ms)
      : clock_(clock), period_ms_(period_ms) {}

  // Clock time a beat starts at (pass it to After).
  int64_t BeatStarted() const { return clock_->NowMs(); }
  // The beat that started at `started_ms` ended now with `outcome`.
  // `had_work`: the reply handed over tasks, drops or DRAM events.
  Next After(Outcome outcome, bool had_work, int64_t started_ms);
  // While heartbeats are paused (a test's hung node): when to look again.
  int64_t PausedUntil() const { return clock_->NowMs() + period_ms_; }

  // Failed beats in a row (0 after any answer); for logs and tests.
  int consecutive_failures() const { return consecutive_failures_; }
  int64_t period_ms() const { return period_ms_; }

 private:
  const Clock* const clock_;
  const int64_t period_ms_;
  int consecutive_failures_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_HEARTBEAT_SCHEDULE_H_
