// Steady-clock seconds as a double, and sleeping until one: the engine model
// occupies an engine for modelled prefill and decode times by waiting them
// out (the wait is the model, not a synchronisation).
#ifndef KVPOOL_REPLAY_CLOCK_UTIL_H_
#define KVPOOL_REPLAY_CLOCK_UTIL_H_

#include <chrono>
#include <thread>

#include "bench/bench_util.h"

namespace kvpool::replay {

using bench::NowSec;

inline void SleepUntilSec(double t) {
  double d = t - NowSec();
  if (d > 0) std::this_thread::sleep_for(std::chrono::duration<double>(d));
}

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CLOCK_UTIL_H_
