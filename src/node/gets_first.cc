#include "node/gets_first.h"

namespace kvpool {

GetsFirst::GetReads::GetReads(GetsFirst* gate)
    : gate_(gate->enabled() ? gate : nullptr) {
  if (gate_ == nullptr) return;
  MutexLock lock(&gate_->mu_);
  ++gate_->gets_reading_;
}

GetsFirst::GetReads::~GetReads() {
  if (gate_ == nullptr) return;
  bool last = false;
  {
    MutexLock lock(&gate_->mu_);
    last = --gate_->gets_reading_ == 0;
  }
  if (last) gate_->cv_.SignalAll();
}

void GetsFirst::AwaitGets() {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  if (gets_reading_ == 0) return;
  ++stats_.yields;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(max_wait_ms_);
  while (gets_reading_ > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ++stats_.timed_out;
      break;
    }
    cv_.WaitUntil(&mu_, deadline);
  }
  stats_.waited_us +=
      uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count());
}

GetsFirst::Stats GetsFirst::stats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.gets_reading = gets_reading_;
  return s;
}

}  // namespace kvpool
