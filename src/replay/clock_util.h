// Steady-clock seconds as a double, and sleeping until one: the engine model
// occupies an engine for modelled prefill and decode times by waiting them
// out (the wait is the model, not a synchronisation).
#ifndef KVPOOL_REPLAY_CLOCK_UTIL_H_
#define KVPOOL_REPLAY_CLOCK_UTIL_H_

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <thread>

#include "benchutil/bench_util.h"

namespace kvpool::replay {

using bench::NowSec;

// Returns only once NowSec() >= t: sleep_for truncates the wait to whole
// nanoseconds, so one sleep can end a hair before t, and a step the model
// says ends at t must not be seen to end earlier (a request admitted after
// it would appear admitted before the step that freed its memory).
inline void SleepUntilSec(double t) {
  for (double d = t - NowSec(); d > 0; d = t - NowSec()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(d));
  }
}

// Moves the calling thread to real-time priority (SCHED_FIFO, the lowest
// level), or back to normal with `on` false. For the threads that keep the
// modelled world's clock — the engines' step threads, the dispatcher of
// arrivals: they stand for GPUs and clients, which do not share this
// machine's cores with the store, so the store's threads must not delay
// them. They sleep nearly all the time, and the kernel keeps 5% of every
// second for normal threads whatever they do. Returns false where the
// process may not (no CAP_SYS_NICE); the replay reports it.
inline bool RunAsModelClock(bool on = true) {
  sched_param p{};
  p.sched_priority = on ? 1 : 0;
  return pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER,
                               &p) == 0;
}

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CLOCK_UTIL_H_
