#include "client/ssd_prefetcher.h"

#include <map>

#include "node/local_holders.h"
#include "node/ssd_tier.h"

namespace kvpool {

SsdPrefetcher::SsdPrefetcher(SsdPrefetcherConfig config, MasterClient* master, DataPlane* data,
                             std::string tenant, const Clock* clock)
    : config_(config),
      master_(master),
      data_(data),
      tenant_(std::move(tenant)),
      throttle_(config.throttle, clock) {
  for (int i = 0; i < config_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

SsdPrefetcher::~SsdPrefetcher() { Shutdown(); }

void SsdPrefetcher::TriggerPrefetch(const std::vector<std::string>& keys, bool ignore_cooldown) {
  ++triggers_;
  std::vector<std::string> fresh = throttle_.Reserve(keys, ignore_cooldown);
  if (fresh.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ || jobs_.size() >= config_.max_queued_jobs) {
      dropped_ += fresh.size();
      return;  // the pool is down or saturated: prefetch is best effort
    }
    keys_triggered_ += fresh.size();
    jobs_.push_back(std::move(fresh));
  }
  cv_.notify_one();
}

void SsdPrefetcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ && workers_.empty()) return;
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

bool SsdPrefetcher::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return jobs_.empty() && running_ == 0; });
}

void SsdPrefetcher::WorkerLoop() {
  for (;;) {
    std::vector<std::string> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return shutdown_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // shut down and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    for (size_t start = 0; start < job.size(); start += config_.chunk_keys) {
      std::vector<std::string> chunk(
          job.begin() + long(start),
          job.begin() + long(std::min(job.size(), start + config_.chunk_keys)));
      RunJob(chunk);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    idle_cv_.notify_all();
  }
}

void SsdPrefetcher::OnKeyDone(const std::string& key, ErrorCode code) {
  switch (code) {
    case ErrorCode::OK:
      ++completed_;
      throttle_.Mark(key, PrefetchState::kCompleted);
      break;
    case ErrorCode::PROMOTION_ALREADY_EXISTS:
      ++already_resident_;
      throttle_.Mark(key, PrefetchState::kAlreadyResident);
      break;
    case ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS:
      // An older master without RegisterPrefetchTask: a quiet no-op.
      throttle_.Mark(key, PrefetchState::kCompleted);
      break;
    case ErrorCode::NO_AVAILABLE_HANDLE:
      // DRAM is saturated: back off so eviction and offload can free it.
      throttle_.EnterCooldown();
      [[fallthrough]];
    default:
      ++failed_;
      throttle_.Mark(key, PrefetchState::kFailed);
  }
}

void SsdPrefetcher::RunJob(const std::vector<std::string>& keys) {
  rpc::BatchKeyRequest req;
  req.set_tenant(tenant_);
  for (const auto& k : keys) req.add_keys(k);
  rpc::BatchQueryReadOnlyResponse resp;
  if (Status s = master_->Call(&rpc::MasterService::Stub::BatchQueryReadOnly, req, &resp);
      !s.ok()) {
    for (const auto& k : keys) OnKeyDone(k, s.code());
    return;
  }
  // holder (node id, endpoint) -> its SSD-only keys
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> by_holder;
  for (size_t i = 0; i < keys.size() && int(i) < resp.items_size(); ++i) {
    const auto& q = resp.items(int(i));
    bool memory = false;
    const rpc::ReplicaDescriptor* disk = nullptr;
    for (const auto& r : q.replicas()) {
      if (r.status() != rpc::COMPLETE) continue;
      if (r.kind() == rpc::MEMORY) memory = true;
      if (r.kind() == rpc::LOCAL_DISK && !disk) disk = &r;
    }
    if (q.error_code() == 0 && memory) {
      ++already_resident_;
      throttle_.Mark(keys[i], PrefetchState::kAlreadyResident);
    } else if (q.error_code() == 0 && disk && q.size() > 0) {
      by_holder[{disk->disk_node_id(), disk->disk_data_endpoint()}].push_back(keys[i]);
    } else {
      ++not_ssd_only_;  // unknown, being put, or nothing on SSD: nothing to do
      throttle_.Mark(keys[i], PrefetchState::kCompleted);
    }
  }
  for (auto& [holder, hkeys] : by_holder) {
    if (auto tier = config_.allow_local_holder ? FindLocalHolder(holder.first) : nullptr) {
      for (const auto& k : hkeys) throttle_.Mark(k, PrefetchState::kInFlight);
      auto codes = tier->PrefetchKeys(tenant_, hkeys, [this](const std::string& key,
                                                             ErrorCode code) {
        OnKeyDone(key, code);
      });
      (void)codes;  // rejected keys were reported through the callback
      continue;
    }
    std::vector<ErrorCode> results;
    Status s = data_->Prefetch(holder.second, holder.first, tenant_, hkeys, &results);
    for (size_t i = 0; i < hkeys.size(); ++i) {
      ErrorCode c = !s.ok() ? s.code() : i < results.size() ? results[i] : ErrorCode::INTERNAL_ERROR;
      if (c == ErrorCode::OK) {
        ++delegations_;  // the holder owns the execution state from here
        throttle_.Mark(hkeys[i], PrefetchState::kDelegated);
      } else {
        OnKeyDone(hkeys[i], c);
      }
    }
  }
}

PrefetchStats SsdPrefetcher::stats() const {
  PrefetchStats s;
  s.triggers = triggers_.load();
  s.keys_triggered = keys_triggered_.load();
  s.dedup_hits = throttle_.dedup_hits();
  s.cooldown_entries = throttle_.cooldown_entries();
  s.cooldown_skips = throttle_.cooldown_skips();
  s.delegations = delegations_.load();
  s.completed = completed_.load();
  s.failed = failed_.load();
  s.already_resident = already_resident_.load();
  s.not_ssd_only = not_ssd_only_.load();
  s.dropped = dropped_.load();
  return s;
}

}  // namespace kvpool
