// Puts gets' SSD reads before promotion reads on a holder's shared disk.
//
// A promotion reads ahead for a get that may come; a get is a request that
// waits now. Served first come, first served, a get arriving behind a
// pipelined executor's batches shares the disk with up to the executor's
// whole in-flight budget. Reads already handed to the kernel cannot be
// recalled, so the rule acts where reads are submitted: while any get is
// reading this holder's disk, a promotion waits before it submits its next
// batch of reads, for at most `max_wait_ms` so that a steady stream of gets
// cannot starve promotions. A get therefore waits behind the promotion reads
// already in flight, never behind ones submitted after it arrived (up to the
// wait bound). max_wait_ms == 0 disables the rule: promotions never wait.
// Thread-safe.
#ifndef KVPOOL_NODE_GETS_FIRST_H_
#define KVPOOL_NODE_GETS_FIRST_H_

#include <chrono>
#include <cstdint>

#include "common/mutex.h"

namespace kvpool {

class GetsFirst {
 public:
  struct Stats {
    uint64_t yields = 0;     // promotion batches that found a get reading
    uint64_t timed_out = 0;  // of them: went ahead after max_wait_ms
    uint64_t waited_us = 0;  // total time promotions waited
    int64_t gets_reading = 0;
  };

  explicit GetsFirst(int64_t max_wait_ms) : max_wait_ms_(max_wait_ms) {}
  GetsFirst(const GetsFirst&) = delete;
  GetsFirst& operator=(const GetsFirst&) = delete;

  bool enabled() const { return max_wait_ms_ > 0; }

  // Held by a get for the duration of its disk reads.
  class GetReads {
   public:
    explicit GetReads(GetsFirst* gate);
    ~GetReads();
    GetReads(const GetReads&) = delete;
    GetReads& operator=(const GetReads&) = delete;

   private:
    GetsFirst* gate_;  // nullptr when the rule is off
  };

  // Called by a promotion right before it submits reads: returns at once
  // when no get is reading (or the rule is off), else when the last get's
  // reads end or max_wait_ms has passed, whichever is first.
  void AwaitGets();

  Stats stats() const;

 private:
  const int64_t max_wait_ms_;
  mutable Mutex mu_;
  CondVar cv_;
  int64_t gets_reading_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_GETS_FIRST_H_
