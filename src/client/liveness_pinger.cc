#include "client/liveness_pinger.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "common/thread_name.h"

namespace kvpool {

namespace {
std::string RandomId() {
  std::random_device rd;
  std::string id(16, '\0');
  for (size_t i = 0; i < id.size(); i += 4) {
    const uint32_t r = rd();
    for (size_t j = 0; j < 4; ++j) id[i + j] = static_cast<char>(r >> (8 * j));
  }
  id[0] = static_cast<char>(id[0] | 1);  // all zero means "no id"
  return id;
}
}  // namespace

LivenessPinger::LivenessPinger(const MasterClient* master, std::string tenant,
                               std::function<bool()> active)
    : master_(master),
      tenant_(std::move(tenant)),
      id_(RandomId()),
      active_(std::move(active)) {}

void LivenessPinger::EnsureStarted() {
  if (started_.load(std::memory_order_acquire)) return;
  MutexLock lock(&mu_);
  if (stop_ || thread_.joinable()) return;
  thread_ = std::thread([this] {
    SetThreadName("kvp-client-ping");
    Loop();
  });
  started_.store(true, std::memory_order_release);
}

void LivenessPinger::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    if (call_ != nullptr) call_->TryCancel();
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void LivenessPinger::Loop() {
  using Stub = rpc::MasterService::Stub;
  int64_t period_ms = kFirstPeriodMs;
  MutexLock lock(&mu_);
  while (!stop_) {
    lock.Unlock();
    const bool active = active_();
    lock.Lock();
    if (stop_) break;
    if (active) {
      grpc::ClientContext ctx;
      call_ = &ctx;
      lock.Unlock();
      rpc::ClientPingRequest req;
      req.set_client_id(id_);
      req.set_tenant(tenant_);
      rpc::ClientPingResponse resp;
      const Status s = master_->CallWith(&ctx, &Stub::ClientPing, req, &resp);
      lock.Lock();
      call_ = nullptr;
      if (s.ok() && resp.error_code() == 0 && resp.client_ttl_ms() > 0) {
        pings_.fetch_add(1, std::memory_order_relaxed);
        // Two pings may be lost before the master counts the silence.
        period_ms = std::clamp<int64_t>(
            static_cast<int64_t>(resp.client_ttl_ms() / 3), 50, 10000);
      } else {
        period_ms = kFirstPeriodMs;
      }
    }
    if (stop_) break;
    cv_.WaitFor(&mu_, std::chrono::milliseconds(period_ms));
  }
}

}  // namespace kvpool
