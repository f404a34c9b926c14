// SIGINT/SIGTERM/SIGHUP for `kvpool bench soak`: blocked in every thread and
// taken synchronously by the waits of the main thread, so that an
// interrupted soak still stops its server processes, and so that every wait
// of the main thread (sampling interval, start-up polls) ends at once on a
// signal.
#ifndef KVPOOL_BENCH_SOAK_SIGNALS_H_
#define KVPOOL_BENCH_SOAK_SIGNALS_H_

#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <ctime>

namespace kvpool::soak {

class SignalWaiter {
 public:
  // Must run before any thread is created: threads inherit the mask, and a
  // thread that left the signals unblocked would take them asynchronously
  // (default action: the bench dies and its servers stay behind).
  SignalWaiter() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SignalWaiter() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

  // Waits `seconds`; returns false at once when one of the signals arrives
  // (remembered in signal()), true when the time passed.
  bool Wait(double seconds) {
    if (signal_ != 0) return false;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(seconds);
    ts.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
    const int sig = sigtimedwait(&set_, nullptr, &ts);
    if (sig > 0) {
      signal_ = sig;
      return false;
    }
    // Timeout, or EINTR from some other signal: either way the caller
    // checks its own clock and waits again if it must.
    return true;
  }
  int signal() const { return signal_; }
  bool interrupted() const { return signal_ != 0; }

 private:
  sigset_t set_, old_;
  int signal_ = 0;
};

}  // namespace kvpool::soak

#endif  // KVPOOL_BENCH_SOAK_SIGNALS_H_
