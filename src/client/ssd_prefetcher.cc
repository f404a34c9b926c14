#include "client/ssd_prefetcher.h"

#include "common/failpoint.h"
#include "common/thread_name.h"

#include <map>

#include "transport/local_holders.h"

namespace kvpool {

SsdPrefetcher::SsdPrefetcher(SsdPrefetcherConfig config, MasterClient* master,
                             DataPlane* data, std::string tenant,
                             const Clock* clock)
    : config_(config),
      master_(master),
      data_(data),
      tenant_(std::move(tenant)),
      shared_(std::make_shared<Shared>(config.throttle, clock)) {
  for (int i = 0; i < config_.workers; ++i)
    workers_.emplace_back([this] {
      SetThreadName("kvp-cl-prefetch");
      WorkerLoop();
    });
}

SsdPrefetcher::~SsdPrefetcher() { Shutdown(); }

void SsdPrefetcher::TriggerPrefetch(const std::vector<std::string>& keys,
                                    PrefetchTrigger trigger) {
  ++shared_->triggers;
  std::vector<std::string> fresh = shared_->throttle.Reserve(
      keys, /*ignore_cooldown=*/trigger == PrefetchTrigger::kGetKick);
  if (fresh.empty()) return;
  {
    MutexLock lock(&mu_);
    if (shutdown_ || jobs_.size() >= config_.max_queued_jobs) {
      shared_->dropped += fresh.size();
      return;  // the pool is down or saturated: prefetch is best effort
    }
    shared_->keys_triggered += fresh.size();
    jobs_.push_back(Job{std::move(fresh), trigger});
  }
  cv_.Signal();
}

void SsdPrefetcher::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (shutdown_ && workers_.empty()) return;
    shutdown_ = true;
  }
  cv_.SignalAll();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

bool SsdPrefetcher::WaitIdle(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  // As wait_for with a predicate: re-check after every wake, and once more
  // when the time has run out.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!jobs_.empty() || running_ != 0) {
    if (!idle_cv_.WaitUntil(&mu_, deadline))
      return jobs_.empty() && running_ == 0;
  }
  return true;
}

void SsdPrefetcher::WorkerLoop() {
  for (;;) {
    Job job;
    {
      MutexLock lock(&mu_);
      while (!shutdown_ && jobs_.empty()) cv_.Wait(&mu_);
      if (jobs_.empty()) return;  // shut down and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    KVPOOL_FAILPOINT("client.prefetch.before_job");
    const std::vector<std::string>& keys = job.keys;
    for (size_t start = 0; start < keys.size(); start += config_.chunk_keys) {
      std::vector<std::string> chunk(
          keys.begin() + long(start),
          keys.begin() +
              long(std::min(keys.size(), start + config_.chunk_keys)));
      RunJob(chunk, job.trigger);
    }
    {
      MutexLock lock(&mu_);
      --running_;
    }
    idle_cv_.SignalAll();
  }
}

void SsdPrefetcher::Shared::OnKeyDone(const std::string& key, ErrorCode code) {
  switch (code) {
    case ErrorCode::OK:
      ++completed;
      throttle.Mark(key, PrefetchState::kCompleted);
      break;
    case ErrorCode::PROMOTION_ALREADY_EXISTS:
      ++already_resident;
      throttle.Mark(key, PrefetchState::kAlreadyResident);
      break;
    case ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS:
      // An older master without RegisterPrefetchTask: a quiet no-op.
      throttle.Mark(key, PrefetchState::kCompleted);
      break;
    case ErrorCode::NO_AVAILABLE_HANDLE:
      // DRAM is saturated: back off so eviction and offload can free it.
      throttle.EnterCooldown();
      [[fallthrough]];
    default:
      ++failed;
      throttle.Mark(key, PrefetchState::kFailed);
  }
}

void SsdPrefetcher::RunJob(const std::vector<std::string>& keys,
                           PrefetchTrigger trigger) {
  const bool for_next_get = trigger == PrefetchTrigger::kGetKick;
  rpc::BatchKeyRequest req;
  req.set_tenant(tenant_);
  for (const auto& k : keys) req.add_keys(k);
  rpc::BatchQueryReadOnlyResponse resp;
  if (Status s = master_->Call(&rpc::MasterService::Stub::BatchQueryReadOnly,
                               req, &resp);
      !s.ok()) {
    for (const auto& k : keys) shared_->OnKeyDone(k, s.code());
    return;
  }
  // holder (node id, endpoint) -> its SSD-only keys and their grants
  std::map<std::pair<std::string, std::string>, std::vector<std::string>>
      by_holder, tokens_by_holder;
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
      ++shared_->already_resident;
      shared_->throttle.Mark(keys[i], PrefetchState::kAlreadyResident);
    } else if (q.error_code() == 0 && disk && q.size() > 0) {
      by_holder[{disk->disk_node_id(), disk->disk_data_endpoint()}].push_back(
          keys[i]);
      tokens_by_holder[{disk->disk_node_id(), disk->disk_data_endpoint()}]
          .push_back(disk->disk_capability());
    } else {
      ++shared_->not_ssd_only;  // unknown, being put, or nothing on SSD
      shared_->throttle.Mark(keys[i], PrefetchState::kCompleted);
    }
  }
  for (auto& [holder, hkeys] : by_holder) {
    if (auto tier = config_.allow_local_holder ? FindLocalHolder(holder.first)
                                               : nullptr) {
      for (const auto& k : hkeys)
        shared_->throttle.Mark(k, PrefetchState::kInFlight);
      // The holder may finish after this client is gone: the callback keeps
      // only the shared counters alive, never the client.
      auto codes = tier->PrefetchKeys(
          tenant_, hkeys,
          [shared = shared_](const std::string& key, ErrorCode code) {
            shared->OnKeyDone(key, code);
          },
          for_next_get);
      (void)codes;  // rejected keys were reported through the callback
      continue;
    }
    std::vector<ErrorCode> results;
    Status s =
        data_->Prefetch(holder.second, holder.first, tenant_, hkeys, &results,
                        &tokens_by_holder[holder], for_next_get);
    for (size_t i = 0; i < hkeys.size(); ++i) {
      ErrorCode c = !s.ok()              ? s.code()
                    : i < results.size() ? results[i]
                                         : ErrorCode::INTERNAL_ERROR;
      if (c == ErrorCode::OK) {
        ++shared_
              ->delegations;  // the holder owns the execution state from here
        shared_->throttle.Mark(hkeys[i], PrefetchState::kDelegated);
      } else {
        shared_->OnKeyDone(hkeys[i], c);
      }
    }
  }
}

PrefetchStats SsdPrefetcher::stats() const {
  const Shared& sh = *shared_;
  PrefetchStats s;
  s.triggers = sh.triggers.load();
  s.keys_triggered = sh.keys_triggered.load();
  s.dedup_hits = sh.throttle.dedup_hits();
  s.cooldown_entries = sh.throttle.cooldown_entries();
  s.cooldown_skips = sh.throttle.cooldown_skips();
  s.delegations = sh.delegations.load();
  s.completed = sh.completed.load();
  s.failed = sh.failed.load();
  s.already_resident = sh.already_resident.load();
  s.not_ssd_only = sh.not_ssd_only.load();
  s.dropped = sh.dropped.load();
  return s;
}

}  // namespace kvpool
