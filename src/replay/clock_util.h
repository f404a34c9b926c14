// Steady-clock seconds as a double, and sleeping until one: the engine model
// occupies an engine for modelled prefill and decode times by waiting them
// out (the wait is the model, not a synchronisation).
#ifndef KVPOOL_REPLAY_CLOCK_UTIL_H_
#define KVPOOL_REPLAY_CLOCK_UTIL_H_

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

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CLOCK_UTIL_H_
