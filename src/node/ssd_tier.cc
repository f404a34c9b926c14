#include "node/ssd_tier.h"
#include "common/failpoint.h"
#include "common/thread_name.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <map>
#include <unordered_map>

#include "storage/aligned_buffer.h"

namespace kvpool {
namespace {
// Adds the microseconds since `start` to the chain's time in `phase`
// (kvpool_node_promotion_phase_microseconds_total): where a promotion's time
// goes, summed over every worker, so a reader can tell a chain bound by its
// round trips from one bound by the disk.
void AddPhaseTime(MetricsRegistry* metrics, const char* phase,
                  std::chrono::steady_clock::time_point start) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  metrics
      ->GetCounter("kvpool_node_promotion_phase_microseconds_total",
                   fmt::format("phase=\"{}\"", phase),
                   "time promotion workers spent in each step of the chain")
      .Inc(uint64_t(std::max<int64_t>(0, us)));
}

}  // namespace

namespace {
using Stub = rpc::MasterService::Stub;
constexpr size_t kRegisterChunk = 4096;
}  // namespace

SsdTier::SsdTier(SsdTierConfig config, std::string node_id,
                 MasterClient* master, const SegmentTable* segments,
                 TcpDataClient* tcp)
    : config_(std::move(config)),
      node_id_(std::move(node_id)),
      master_(master),
      segments_(segments),
      tcp_(tcp) {}

SsdTier::~SsdTier() { Stop(); }

Status SsdTier::Start() {
  FileStorageConfig fc;
  fc.ssd_dir = config_.ssd_offload_path;
  fc.ssd_capacity_bytes = config_.ssd_capacity_bytes;
  fc.segment_file_size = config_.ssd_segment_file_size;
  fc.ssd_gc_interval_ms = config_.ssd_gc_interval_ms;
  fc.ssd_verify_threads = config_.ssd_verify_threads;
  // A ring serves one batch at a time, to its last completion: each
  // pipelined promotion worker may hold one through its read, and gets and
  // offloads keep the default's share beside them. (With 4 rings, 8
  // workers promoted 1,600-1,730 blocks/s where 16 rings gave 1,960-2,180:
  // docs/bench/router_prefetch.md.)
  if (config_.promotion_inflight_bytes > 0) {
    fc.ssd_io_rings = std::max<unsigned>(
        fc.ssd_io_rings, unsigned(config_.promotion_workers) + fc.ssd_io_rings);
  }
  if (config_.ssd_io_backend == "pread") {
    fc.ssd_io_backend = SsdIoBackend::kPread;
  } else if (config_.ssd_io_backend == "io_uring") {
    fc.ssd_io_backend = SsdIoBackend::kIoUring;
  } else if (config_.ssd_io_backend != "auto") {
    return Status(ErrorCode::INVALID_PARAMS,
                  "ssd_io_backend must be auto, io_uring or pread");
  }
  auto opened = FileStorage::Open(fc);
  if (!opened.ok()) return opened.status();
  storage_ = std::move(opened.value());
  stopping_ = false;
  prefetch_exited_ = false;
  offload_thread_ = std::thread([this] {
    SetThreadName("kvp-offload");
    OffloadLoop();
  });
  const int promoters = config_.promotion_inflight_bytes > 0
                            ? std::max(1, config_.promotion_workers)
                            : 1;
  for (int i = 0; i < promoters; ++i) {
    promotion_threads_.emplace_back([this] {
      SetThreadName("kvp-promote");
      PromotionLoop();
    });
  }
  metrics_.AddGauge("kvpool_node_promotion_inflight_bytes", "",
                    [this] { return double(promotion_inflight_bytes()); });
  metrics_.AddGauge("kvpool_node_promotion_inflight_budget_bytes", "", [this] {
    return double(config_.promotion_inflight_bytes);
  });
  metrics_.AddGauge(
      "kvpool_node_ssd_values_read", "",
      [this] { return double(storage_->GetStats().values_read); },
      "values read from the SSD and verified (gets and promotions)");
  metrics_.AddGauge(
      "kvpool_node_ssd_read_share_held_bytes", "",
      [this] { return double(shared_reads_.stats().held_bytes); },
      "bytes of gets' SSD reads kept for queued promotions");
  metrics_.AddGauge("kvpool_node_ssd_read_share_budget_bytes", "",
                    [this] { return double(config_.ssd_read_share_bytes); });
  for (const char* event : {"kept", "refused", "unused"}) {
    metrics_.AddGauge(
        "kvpool_node_ssd_read_share_events", fmt::format("event=\"{}\"", event),
        [this, e = std::string(event)] {
          auto s = shared_reads_.stats();
          return double(e == "kept"      ? s.offered
                        : e == "refused" ? s.refused
                                         : s.dropped);
        },
        "gets' SSD reads kept for a queued promotion, refused for the "
        "budget, and kept but unused (the promotion went first)");
  }
  metrics_.AddGauge(
      "kvpool_node_ssd_disk_full", "",
      [this] { return storage_->GetStats().disk_full ? 1.0 : 0.0; },
      "1 while the SSD's filesystem is full (writes fail fast)");
  eviction_thread_ = std::thread([this] {
    SetThreadName("kvp-ssd-evict");
    EvictionLoop();
  });
  prefetch_thread_ = std::thread([this] {
    SetThreadName("kvp-prefetch");
    PrefetchLoop();
  });
  if (config_.promotion_pull)
    pull_thread_ = std::thread([this] {
      SetThreadName("kvp-pull");
      PullLoop();
    });
  spdlog::info("node {}: SSD tier at {} ({} objects, io_uring {})", node_id_,
               config_.ssd_offload_path, storage_->GetStats().records,
               storage_->io_uring_enabled() ? "on" : "off (pread fallback)");
  return Status::OK();
}

void SsdTier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !offload_thread_.joinable()) return;
    stopping_ = true;
    promotions_paused_ = false;  // queued tasks must drain
  }
  cv_.notify_all();
  // The pull and prefetch threads feed the promotion worker: join them
  // first.
  if (pull_thread_.joinable()) pull_thread_.join();
  if (prefetch_thread_.joinable()) prefetch_thread_.join();
  for (auto* t : {&offload_thread_, &eviction_thread_}) {
    if (t->joinable()) t->join();
  }
  for (auto& t : promotion_threads_) {
    if (t.joinable()) t.join();
  }
  promotion_threads_.clear();
}

uint64_t SsdTier::promotion_inflight_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return promo_inflight_;
}

namespace {
// The master refused this copy for good: the key was removed or replaced
// since, a newer value of it was lost, or the record is malformed. Any
// other refusal (the master does not know this node yet because it
// restarted meanwhile, or has no room for the tenant now) deletes nothing:
// the record is offered again at the next remount.
bool RefusedForGood(int code) {
  const ErrorCode c = ErrorCodeFromInt(code);
  return c == ErrorCode::OBJECT_NOT_FOUND ||
         c == ErrorCode::OBJECT_ALREADY_EXISTS ||
         c == ErrorCode::INVALID_PARAMS;
}
}  // namespace

void SsdTier::DropCopy(const std::string& tenant, const std::string& key,
                       uint64_t version) {
  Status s = storage_->RemoveIfVersion(tenant, key, version);
  if (s.ok() || s.code() == ErrorCode::OBJECT_NOT_FOUND) return;
  metrics_
      .GetCounter("kvpool_node_ssd_remove_failures_total", "",
                  "SSD copies dropped from the index but not marked dead on "
                  "disk")
      .Inc();
  spdlog::warn("node {}: SSD copy of {}/{} v{}: {}", node_id_, tenant, key,
               version, s.ToString());
}

void SsdTier::RegisterWithMaster() {
  std::vector<StoredObject> all = storage_->List();
  size_t dropped = 0, kept = 0;
  for (size_t start = 0; start < all.size(); start += kRegisterChunk) {
    size_t end = std::min(all.size(), start + kRegisterChunk);
    rpc::RegisterDiskObjectsRequest req;
    req.set_node_id(node_id_);
    for (size_t i = start; i < end; ++i) {
      auto* o = req.add_objects();
      o->set_tenant(all[i].tenant);
      o->set_key(all[i].key);
      o->set_size(all[i].size);
      o->set_version(all[i].object_version);
    }
    rpc::RegisterDiskObjectsResponse resp;
    if (Status s = master_->Call(&Stub::RegisterDiskObjects, req, &resp);
        !s.ok()) {
      spdlog::warn("node {}: re-registering SSD objects failed: {}", node_id_,
                   s.ToString());
      return;  // tried again at the next remount
    }
    for (size_t i = start; i < end && int(i - start) < resp.error_codes_size();
         ++i) {
      const int code = resp.error_codes(int(i - start));
      if (code == 0) continue;
      if (ErrorCodeFromInt(code) == ErrorCode::CLIENT_NOT_FOUND) {
        // A master that restarted after our mount: every copy stays, and
        // the remount it asks for offers them again.
        spdlog::warn(
            "node {}: the master does not know this node (it restarted?): "
            "SSD objects kept for the next remount",
            node_id_);
        return;
      }
      if (!RefusedForGood(code)) {
        ++kept;
        continue;
      }
      DropCopy(all[i].tenant, all[i].key, all[i].object_version);
      ++dropped;
    }
  }
  spdlog::info(
      "node {}: re-registered {} SSD objects ({} refused and dropped, {} "
      "refused for now and kept)",
      node_id_, all.size() - dropped - kept, dropped, kept);
  metrics_.GetCounter("kvpool_node_ssd_reregistered_total")
      .Inc(all.size() - dropped - kept);
}

void SsdTier::EnqueueOffloads(
    const google::protobuf::RepeatedPtrField<rpc::OffloadTask>& tasks) {
  if (tasks.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : tasks) offloads_.push_back(t);
  }
  cv_.notify_all();
}

void SsdTier::EnqueuePromotions(
    const google::protobuf::RepeatedPtrField<rpc::PromotionTask>& tasks) {
  if (tasks.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (const auto& t : tasks) {
      PromotionJob job{t, nullptr};
      int64_t order = 0;  // none: after every task with a deadline
      if (t.deadline_in_ms() > 0) {
        job.deadline = now + std::chrono::milliseconds(t.deadline_in_ms());
        order = std::chrono::duration_cast<std::chrono::milliseconds>(
                    job.deadline->time_since_epoch())
                    .count();
      }
      shared_reads_.Want(TenantName(t.tenant()), t.key());
      promotions_.Push(std::move(job), order);
    }
  }
  cv_.notify_all();
}

void SsdTier::ResubmitPromotions() {
  std::vector<PromotionJob> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!promotions_.empty()) jobs.push_back(promotions_.Pop());
  }
  if (jobs.empty()) return;
  std::map<std::string, std::vector<size_t>> by_tenant;
  for (size_t i = 0; i < jobs.size(); ++i)
    by_tenant[jobs[i].task.tenant()].push_back(i);
  std::vector<ErrorCode> codes(jobs.size(), ErrorCode::RPC_FAIL);
  for (const auto& [tenant, idx] : by_tenant) {
    rpc::RegisterPrefetchTaskRequest req;
    req.set_node_id(node_id_);
    req.set_tenant(tenant);
    for (size_t i : idx) req.add_keys(jobs[i].task.key());
    rpc::RegisterPrefetchTaskResponse resp;
    if (Status s = master_->Call(&Stub::RegisterPrefetchTask, req, &resp);
        !s.ok()) {
      spdlog::warn("node {}: could not resubmit {} promotions: {}", node_id_,
                   idx.size(), s.ToString());
      for (size_t i : idx) codes[i] = s.code();
      continue;
    }
    for (size_t j = 0; j < idx.size() && int(j) < resp.results_size(); ++j) {
      const auto& r = resp.results(int(j));
      codes[idx[j]] = ErrorCodeFromInt(r.error_code());
      if (r.error_code() == 0) {
        jobs[idx[j]].task.set_task_id(r.task_id());
        jobs[idx[j]].task.set_size(r.size());
      }
    }
  }
  size_t kept = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (codes[i] != ErrorCode::OK) continue;
      const int64_t order =
          jobs[i].deadline
              ? std::chrono::duration_cast<std::chrono::milliseconds>(
                    jobs[i].deadline->time_since_epoch())
                    .count()
              : 0;
      promotions_.Push(std::move(jobs[i]), order);
      ++kept;
    }
  }
  cv_.notify_all();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (codes[i] == ErrorCode::OK) continue;
    shared_reads_.Unwant(TenantName(jobs[i].task.tenant()), jobs[i].task.key());
    if (jobs[i].done) jobs[i].done(jobs[i].task.key(), codes[i]);
  }
  metrics_.GetCounter("kvpool_node_promotions_resubmitted_total")
      .Inc(static_cast<uint64_t>(kept));
  spdlog::info("node {}: {} of {} queued promotions resubmitted to the master",
               node_id_, kept, jobs.size());
}

void SsdTier::DropRecord(const std::string& tenant, const std::string& key,
                         uint64_t version) {
  const std::string& t = tenant.empty() ? std::string("default") : tenant;
  auto stored = storage_->LookupVersion(t, key);
  if (!stored.ok()) return;
  // A newer value's record (written after the master sent this) stays.
  if (version != 0 && stored.value() > version) return;
  if (storage_->RemoveIfVersion(t, key, stored.value()).ok())
    metrics_.GetCounter("kvpool_node_disk_drops_total").Inc();
}

void SsdTier::DropRecords(
    const google::protobuf::RepeatedPtrField<rpc::DiskDropTask>& drops) {
  uint64_t n = 0;
  for (const auto& d : drops) {
    n += storage_->Remove(d.tenant().empty() ? "default" : d.tenant(), d.key())
             .ok();
  }
  if (drops.size() > 0)
    metrics_.GetCounter("kvpool_node_disk_drops_total").Inc(n);
}

void SsdTier::PausePromotionsForTest(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    promotions_paused_ = paused;
  }
  cv_.notify_all();
}

size_t SsdTier::queued_promotions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return promotions_.size();
}

std::vector<std::string> SsdTier::queued_promotion_keys() const {
  DeadlineQueue<PromotionJob> copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    copy = promotions_;
  }
  std::vector<std::string> keys;
  while (!copy.empty()) keys.push_back(copy.Pop().task.key());
  return keys;
}

void SsdTier::PullLoop() {
  const auto interval =
      std::chrono::milliseconds(config_.promotion_pull_interval_ms);
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A fixed cadence, whatever the pull took: the RFC's 100 ms loop.
      next += interval;
      if (cv_.wait_until(lock, next, [&] { return stopping_; })) return;
    }
    if (pull_paused_) continue;
    rpc::PullPromotionTasksRequest req;
    req.set_node_id(node_id_);
    req.set_max_tasks(static_cast<uint32_t>(config_.promotion_max_per_pull));
    req.set_known_epoch(master_->known_epoch());
    rpc::PullPromotionTasksResponse resp;
    Status s = master_->Call(&Stub::PullPromotionTasks, req, &resp);
    if (s.ok() && !master_->AcceptEpoch(resp.epoch())) {
      // A replaced leader's tasks (docs/ha.md): never run.
      metrics_.GetCounter("kvpool_node_stale_epoch_replies_total").Inc();
      continue;
    }
    if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      // An older master (UNIMPLEMENTED): it ignored our mount flag and keeps
      // handing promotions over with the heartbeat. Ask again now and then,
      // not never: after a roll-forward the new master honours the flag of
      // our next mount, and then only the pull brings promotions.
      std::lock_guard<std::mutex> lock(pull_mu_);
      if (!pull_stats_.master_lacks_pull) {
        spdlog::warn(
            "node {}: master has no PullPromotionTasks; promotions "
            "stay on the heartbeat (asking again every {} ms)",
            node_id_, 10 * config_.promotion_pull_interval_ms);
      }
      pull_stats_.master_lacks_pull = true;
      next += 9 * interval;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(pull_mu_);
      if (pull_stats_.master_lacks_pull && s.ok()) {
        spdlog::info("node {}: master serves PullPromotionTasks again",
                     node_id_);
        pull_stats_.master_lacks_pull = false;
      }
    }
    if (!s.ok() || resp.error_code() != 0) continue;  // remount is the hb's
    const uint64_t n = static_cast<uint64_t>(resp.tasks_size());
    {
      std::lock_guard<std::mutex> lock(pull_mu_);
      ++pull_stats_.pulls;
      pull_stats_.tasks += n;
      pull_stats_.max_tasks_per_pull =
          std::max(pull_stats_.max_tasks_per_pull, n);
    }
    metrics_.GetCounter("kvpool_node_promotion_pulls_total").Inc();
    if (n > 0) {
      metrics_.GetCounter("kvpool_node_promotion_pulled_tasks_total").Inc(n);
      EnqueuePromotions(resp.tasks());
    }
  }
}

PullStats SsdTier::pull_stats() const {
  std::lock_guard<std::mutex> lock(pull_mu_);
  return pull_stats_;
}

void SsdTier::OffloadLoop() {
  for (;;) {
    std::vector<rpc::OffloadTask> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !offloads_.empty(); });
      if (offloads_.empty()) return;  // stopping and drained
      while (!offloads_.empty() && batch.size() < config_.offload_batch) {
        batch.push_back(std::move(offloads_.front()));
        offloads_.pop_front();
      }
      offload_active_ = true;
    }
    RunOffloadBatch(std::move(batch));
    {
      std::lock_guard<std::mutex> lock(mu_);
      offload_active_ = false;
    }
    cv_.notify_all();  // promotions held back for the offload may go
  }
}

void SsdTier::RunOffloadBatch(std::vector<rpc::OffloadTask> batch) {
  std::vector<WriteItem> items;
  std::vector<size_t> item_of(batch.size(), SIZE_MAX);
  std::vector<ErrorCode> codes(batch.size(), ErrorCode::OK);
  // One write per key, its newest version: a rollback of a refused older
  // version (by key) would otherwise delete the record of the newer one
  // that the master accepted. The older ones are answered as stale.
  std::unordered_map<std::string, size_t> newest;
  for (size_t i = 0; i < batch.size(); ++i) {
    std::string k = batch[i].tenant() + '\0' + batch[i].key();
    auto [it, fresh] = newest.emplace(std::move(k), i);
    if (!fresh && batch[i].version() > batch[it->second].version())
      it->second = i;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& t = batch[i];
    if (newest[t.tenant() + '\0' + t.key()] != i) {
      codes[i] = ErrorCode::OBJECT_NOT_FOUND;  // superseded in this batch
      continue;
    }
    uint8_t* src = segments_->Resolve(t.segment_id(), t.offset(), t.size());
    if (src == nullptr) {
      codes[i] = ErrorCode::INVALID_PARAMS;  // not our segment (any more)
      continue;
    }
    item_of[i] = items.size();
    items.push_back(WriteItem{t.tenant(), t.key(), src, t.size(), t.version()});
  }
  const auto write_start = std::chrono::steady_clock::now();
  std::vector<Status> written = storage_->BatchWrite(items);
  ssd_write_duration_.ObserveSince(write_start);
  KVPOOL_FAILPOINT("node.offload.after_write");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (item_of[i] != SIZE_MAX) codes[i] = written[item_of[i]].code();
  }
  // The copy is in the local index before the master hears of it, so a
  // replica the master records is always readable here.
  rpc::NotifyOffloadRequest req;
  req.set_node_id(node_id_);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto* r = req.add_results();
    r->set_tenant(batch[i].tenant());
    r->set_key(batch[i].key());
    r->set_version(batch[i].version());
    r->set_error_code(ToInt(codes[i]));
  }
  rpc::NotifyOffloadResponse resp;
  // Retried before rolling back: the master may have recorded the copies
  // and only the reply was lost, and a rollback then loses the value (the
  // ACK is idempotent, so a repeat is harmless).
  Status s = master_->Call(&Stub::NotifyOffload, req, &resp);
  for (int attempt = 1; !s.ok() && attempt < 3; ++attempt) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(100 << attempt),
                       [&] { return stopping_; }))
        break;
    }
    resp.Clear();
    s = master_->Call(&Stub::NotifyOffload, req, &resp);
  }
  uint64_t ok = 0, failed = 0, rolled_back = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (codes[i] != ErrorCode::OK) {
      ++failed;
      continue;
    }
    bool accepted = s.ok() && int(i) < resp.error_codes_size() &&
                    resp.error_codes(int(i)) == 0;
    if (accepted) {
      ++ok;
    } else {
      // Refused (stale value) or the master could not be told: roll back,
      // so no copy exists that the master does not know of. Only the record
      // this batch wrote: a newer one of the key stays.
      DropCopy(batch[i].tenant(), batch[i].key(), batch[i].version());
      ++rolled_back;
    }
  }
  metrics_.GetCounter("kvpool_node_offload_total", "result=\"ok\"").Inc(ok);
  metrics_.GetCounter("kvpool_node_offload_total", "result=\"failed\"")
      .Inc(failed);
  metrics_.GetCounter("kvpool_node_offload_total", "result=\"rolled_back\"")
      .Inc(rolled_back);
}

void SsdTier::PromotionLoop() {
  const size_t batch = std::max<size_t>(1, config_.promotion_read_batch);
  const uint64_t budget = config_.promotion_inflight_bytes;  // 0: unbounded
  // The next job fits the budget, or nothing else is in flight. Offload
  // writes go first: while one is queued or running, promotions run one
  // batch at a time (the sequential worker's share of the disk), since puts
  // under pressure wait for offloads to make DRAM evictable.
  auto fits = [&] {
    if (budget == 0 || promo_inflight_ == 0) return true;
    if (!offloads_.empty() || offload_active_) return false;
    return promo_inflight_ + promotions_.Front().task.size() <= budget;
  };
  for (;;) {
    std::vector<PromotionJob> jobs;
    uint64_t bytes = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Time spent with tasks queued but held back (the budget, an offload
      // in progress) is "held"; waiting for work is not counted.
      std::optional<std::chrono::steady_clock::time_point> held_since;
      // Stop only when the pull and prefetch threads can add nothing more
      // and the queue is empty.
      cv_.wait(lock, [&] {
        const bool ready =
            !promotions_.empty() && fits() && !promotions_paused_;
        if (!ready && !promotions_.empty() && !held_since)
          held_since = std::chrono::steady_clock::now();
        return ready || (promotions_.empty() && stopping_ && prefetch_exited_);
      });
      if (held_since) {
        AddPhaseTime(&metrics_,
                     !offloads_.empty() || offload_active_ ? "held_offload"
                                                           : "held_budget",
                     *held_since);
      }
      if (promotions_.empty()) return;
      while (jobs.size() < batch && !promotions_.empty()) {
        const uint64_t size = promotions_.Front().task.size();
        if (!jobs.empty() && budget > 0 &&
            promo_inflight_ + bytes + size > budget) {
          break;
        }
        bytes += size;
        jobs.push_back(promotions_.Pop());
      }
      promo_inflight_ += bytes;
      uint64_t peak = promo_peak_.load();
      while (promo_inflight_ > peak &&
             !promo_peak_.compare_exchange_weak(peak, promo_inflight_)) {
      }
    }
    // A task whose deadline passed while it waited here is dropped before
    // its SSD read: its get has come (or will before the read could land),
    // and the disk is better spent on the tasks that can still make it.
    const auto now = std::chrono::steady_clock::now();
    std::vector<rpc::PromotionTask> tasks, expired;
    std::vector<size_t> run;  // indices into jobs
    tasks.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].deadline && now >= *jobs[i].deadline) {
        expired.push_back(jobs[i].task);
      } else {
        tasks.push_back(jobs[i].task);
        run.push_back(i);
      }
    }
    ReportExpired(expired);
    // The batch's bytes leave the budget once they are in place (before the
    // notify round trip), or at once if nothing of it runs.
    bool released = false;
    auto release = [&] {
      if (released) return;
      released = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        promo_inflight_ -= bytes;
      }
      cv_.notify_all();
    };
    std::vector<Status> got;
    if (!tasks.empty()) got = PromoteKeysFromLocalDisk(tasks, release);
    release();
    for (const auto& j : jobs)
      shared_reads_.Unwant(TenantName(j.task.tenant()), j.task.key());
    for (size_t k = 0; k < run.size(); ++k) {
      const PromotionJob& j = jobs[run[k]];
      if (j.done) j.done(j.task.key(), got[k].code());
    }
  }
}

std::vector<ErrorCode> SsdTier::PrefetchKeys(
    const std::string& tenant, const std::vector<std::string>& keys,
    PrefetchDone on_done) {
  std::vector<ErrorCode> codes(keys.size(), ErrorCode::OK);
  // The master's name for the empty tenant, so the task and its reads find
  // what offload stored.
  PrefetchRequest req{
      tenant.empty() ? "default" : tenant, {}, std::move(on_done)};
  for (size_t i = 0; i < keys.size(); ++i) {
    // The local index is authoritative for what this holder can promote.
    if (!storage_->LookupSize(req.tenant, keys[i]).ok()) {
      codes[i] = ErrorCode::OBJECT_NOT_FOUND;
      if (req.done) req.done(keys[i], ErrorCode::OBJECT_NOT_FOUND);
      continue;
    }
    req.keys.push_back(keys[i]);
  }
  if (req.keys.empty()) return codes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      for (auto& c : codes) c = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
      return codes;  // the job is dropped, as the seed asks of a stopped pool
    }
    for (const auto& k : req.keys) shared_reads_.Want(req.tenant, k);
    prefetches_.push_back(std::move(req));
  }
  cv_.notify_all();
  metrics_.GetCounter("kvpool_node_prefetch_requests_total").Inc();
  return codes;
}

void SsdTier::PrefetchLoop() {
  for (;;) {
    PrefetchRequest req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !prefetches_.empty(); });
      if (prefetches_.empty()) {
        prefetch_exited_ = true;
        cv_.notify_all();
        return;
      }
      req = std::move(prefetches_.front());
      prefetches_.pop_front();
    }
    RegisterPrefetches(std::move(req));
  }
}

void SsdTier::RegisterPrefetches(PrefetchRequest req) {
  rpc::RegisterPrefetchTaskRequest r;
  r.set_node_id(node_id_);
  r.set_tenant(req.tenant);
  for (const auto& k : req.keys) r.add_keys(k);
  rpc::RegisterPrefetchTaskResponse resp;
  Status s = master_->Call(&Stub::RegisterPrefetchTask, r, &resp);
  std::vector<PromotionJob> jobs;
  for (size_t i = 0; i < req.keys.size(); ++i) {
    ErrorCode code = !s.ok() ? s.code()
                     : int(i) < resp.results_size()
                         ? ErrorCodeFromInt(resp.results(int(i)).error_code())
                         : ErrorCode::INTERNAL_ERROR;
    if (code != ErrorCode::OK) {
      // PROMOTION_ALREADY_EXISTS is a quiet skip; an older master
      // (UNAVAILABLE_IN_CURRENT_STATUS) makes prefetch a no-op.
      metrics_
          .GetCounter("kvpool_node_prefetch_registrations_total",
                      fmt::format("result=\"{}\"", ErrorCodeName(code)))
          .Inc();
      if (req.done) req.done(req.keys[i], code);
      shared_reads_.Unwant(req.tenant, req.keys[i]);
      continue;
    }
    rpc::PromotionTask t;
    t.set_tenant(req.tenant);
    t.set_key(req.keys[i]);
    t.set_size(resp.results(int(i)).size());
    t.set_task_id(resp.results(int(i)).task_id());
    t.set_trigger_source(rpc::EXIST);
    t.set_from_prefetch(true);
    jobs.push_back(PromotionJob{std::move(t), req.done});
  }
  if (jobs.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& j : jobs) promotions_.Push(std::move(j), 0);
  }
  cv_.notify_all();
}

namespace {
// Whatever happens to a key of the chain, the master hears exactly one
// outcome per key, so its promotion entry, quota and pin are released at
// once: failure unless Succeed(i) was called, reported when the reporter
// goes out of scope (one BatchPromotionNotify for a batch, when the master
// has it).
class PromotionReporter {
 public:
  PromotionReporter(MasterClient* master, MetricsRegistry* metrics,
                    const std::string& node_id,
                    std::span<const rpc::PromotionTask> tasks,
                    std::atomic<bool>* batch_rpcs, bool expired = false)
      : master_(master),
        metrics_(metrics),
        node_id_(node_id),
        tasks_(tasks),
        batch_rpcs_(batch_rpcs),
        expired_(expired),
        success_(tasks.size(), false) {}
  PromotionReporter(const PromotionReporter&) = delete;
  PromotionReporter& operator=(const PromotionReporter&) = delete;
  ~PromotionReporter() {
    std::vector<rpc::PromotionNotifyRequest> reqs(tasks_.size());
    for (size_t i = 0; i < tasks_.size(); ++i) {
      reqs[i].set_node_id(node_id_);
      reqs[i].set_tenant(tasks_[i].tenant());
      reqs[i].set_key(tasks_[i].key());
      reqs[i].set_task_id(tasks_[i].task_id());
      reqs[i].set_success(success_[i]);
      reqs[i].set_expired(expired_ && !success_[i]);
      const char* result =
          success_[i] ? "ok" : (expired_ ? "expired" : "failed");
      metrics_
          ->GetCounter("kvpool_node_promotion_total",
                       fmt::format("result=\"{}\"", result))
          .Inc();
    }
    KVPOOL_FAILPOINT("node.promotion.after_write");
    const auto notify_start = std::chrono::steady_clock::now();
    struct NotifyTime {
      MetricsRegistry* metrics;
      std::chrono::steady_clock::time_point start;
      ~NotifyTime() { AddPhaseTime(metrics, "notify", start); }
    } notify_time{metrics_, notify_start};
    if (reqs.size() > 1 && batch_rpcs_->load()) {
      rpc::BatchPromotionNotifyRequest batch;
      for (auto& r : reqs) *batch.add_items() = std::move(r);
      rpc::BatchPromotionNotifyResponse resp;
      Status s = master_->Call(&Stub::BatchPromotionNotify, batch, &resp);
      if (s.code() != ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) return;
      batch_rpcs_->store(false);  // an older master: key by key from now on
      for (int i = 0; i < batch.items_size(); ++i)
        reqs[size_t(i)] = batch.items(i);
    }
    for (const auto& r : reqs) {
      rpc::KeyStatus resp;
      (void)master_->Call(&Stub::NotifyPromotion, r, &resp);
    }
  }
  void Succeed(size_t i) { success_[i] = true; }

 private:
  MasterClient* master_;
  MetricsRegistry* metrics_;
  const std::string& node_id_;
  std::span<const rpc::PromotionTask> tasks_;
  std::atomic<bool>* batch_rpcs_;
  const bool expired_;  // every task was dropped unread past its deadline
  std::vector<bool> success_;
};
}  // namespace

const std::string& SsdTier::TenantName(const std::string& tenant) {
  static const std::string kDefault = "default";
  return tenant.empty() ? kDefault : tenant;
}

void SsdTier::ReportExpired(std::span<const rpc::PromotionTask> tasks) {
  if (tasks.empty()) return;
  PromotionReporter report(master_, &metrics_, node_id_, tasks, &batch_rpcs_,
                           /*expired=*/true);
}

Status SsdTier::PromoteOneKeyFromLocalDisk(const rpc::PromotionTask& task) {
  return PromoteKeysFromLocalDisk(std::span<const rpc::PromotionTask>(&task, 1))
      .front();
}

std::vector<Status> SsdTier::PromoteKeysFromLocalDisk(
    std::span<const rpc::PromotionTask> tasks,
    const std::function<void()>& data_done) {
  const size_t n = tasks.size();
  std::vector<Status> out(n, Status::OK());
  PromotionReporter reporter(master_, &metrics_, node_id_, tasks, &batch_rpcs_);
  // Declared after the reporter, so it runs first on every way out.
  struct DataDone {
    const std::function<void()>& fn;
    ~DataDone() {
      if (fn) fn();
    }
  } data_done_on_exit{data_done};
  // 1. Stage a DRAM replica for each key (the master picks where it lands):
  // one round trip for the batch when the master has the batch RPC.
  std::vector<rpc::PromotionAllocStartRequest> starts(n);
  for (size_t i = 0; i < n; ++i) {
    starts[i].set_node_id(node_id_);
    starts[i].set_tenant(tasks[i].tenant());
    starts[i].set_key(tasks[i].key());
    starts[i].set_size(tasks[i].size());
    starts[i].set_task_id(tasks[i].task_id());
  }
  std::vector<rpc::PromotionAllocStartResponse> staged_resp(n);
  std::vector<Status> rpc_status(n, Status::OK());
  bool done = false;
  auto phase_start = std::chrono::steady_clock::now();
  if (n > 1 && batch_rpcs_.load()) {
    rpc::BatchPromotionAllocStartRequest batch;
    for (const auto& r : starts) *batch.add_items() = r;
    rpc::BatchPromotionAllocStartResponse resp;
    Status s = master_->Call(&Stub::BatchPromotionAllocStart, batch, &resp);
    if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      batch_rpcs_ = false;
    } else {
      done = true;
      for (size_t i = 0; i < n; ++i) {
        if (!s.ok()) {
          rpc_status[i] = s;
        } else if (int(i) < resp.items_size()) {
          staged_resp[i] = std::move(*resp.mutable_items(int(i)));
        } else {
          rpc_status[i] = Status(ErrorCode::RPC_FAIL, "short batch reply");
        }
      }
    }
  }
  if (!done) {
    for (size_t i = 0; i < n; ++i) {
      rpc_status[i] =
          master_->Call(&Stub::PromotionAllocStart, starts[i], &staged_resp[i]);
    }
  }
  AddPhaseTime(&metrics_, "alloc", phase_start);
  std::vector<rpc::MemoryLocation> locs(n);
  std::vector<size_t> staged;
  for (size_t i = 0; i < n; ++i) {
    if (!rpc_status[i].ok()) {
      out[i] = rpc_status[i];
      continue;
    }
    if (staged_resp[i].error_code() != 0) {
      out[i] = Status(ErrorCodeFromInt(staged_resp[i].error_code()),
                      "PromotionAllocStart refused");
      continue;
    }
    locs[i] = staged_resp[i].replica().memory();
    if (locs[i].length() != tasks[i].size()) {
      out[i] = Status(ErrorCode::INVALID_REPLICA, "staged size");
      continue;
    }
    staged.push_back(i);
  }
  if (staged.empty()) return out;
  // 2. Read every staged key from the SSD in one submission, into:
  //  - the staged replica itself, when it is in this node's own segment at
  //    a 4096-aligned address and no staging pool is configured (O_DIRECT,
  //    no copy; if the read fails the replica's bytes are garbage, but the
  //    master drops a replica whose promotion failed);
  //  - a slot of the staging pool (huge pages: one disk request per value),
  //    then copied;
  //  - else a buffer of its own, then copied or written over the network.
  // A key whose bytes a get has just read from this SSD (SharedReads) is
  // not read again: those bytes, from the record version still on disk, are
  // copied in instead.
  std::vector<const uint8_t*> src(staged.size(), nullptr);  // null: in place
  std::vector<std::unique_ptr<storage::AlignedBuffer>> owned(staged.size());
  std::vector<uint8_t*> slots(staged.size(), nullptr);
  struct SlotGuard {
    StagingPool* pool;
    std::vector<uint8_t*>& slots;
    ~SlotGuard() {
      for (uint8_t* s : slots) pool->Release(s);
    }
  } slot_guard{&staging_, slots};
  std::vector<ReadItem> reads;
  std::vector<Result<uint64_t>> got(staged.size(), ErrorCode::INTERNAL_ERROR);
  // The verified checksum and version of each value read from the disk.
  std::vector<std::optional<uint64_t>> checksums(staged.size());
  std::vector<uint64_t> checksum_of(staged.size(), 0),
      version_of(staged.size(), 0);
  std::vector<size_t> from_disk;  // indices into staged
  for (size_t j = 0; j < staged.size(); ++j) {
    const size_t i = staged[j];
    const rpc::MemoryLocation& loc = locs[i];
    uint8_t* dst =
        segments_->Resolve(loc.segment_id(), loc.offset(), loc.length());
    const std::string& tenant = TenantName(tasks[i].tenant());
    SharedReads::Bytes shared = shared_reads_.Take(tenant, tasks[i].key());
    if (shared.data && shared.size == tasks[i].size()) {
      auto now = storage_->LookupVersion(tenant, tasks[i].key());
      if (now.ok() && now.value() == shared.version) {
        owned[j] = std::move(shared.data);
        src[j] = owned[j]->data();
        got[j] = shared.size;
        metrics_.GetCounter("kvpool_node_promotion_shared_reads_total").Inc();
        continue;
      }
    }
    uint8_t* into = dst;
    if ((slots[j] = staging_.TryAcquire(tasks[i].size())) != nullptr) {
      into = slots[j];
    } else if (dst == nullptr || reinterpret_cast<uintptr_t>(dst) % 4096 != 0) {
      owned[j] = std::make_unique<storage::AlignedBuffer>(tasks[i].size());
      into = owned[j]->data();
    }
    if (into != dst) src[j] = into;
    reads.push_back(ReadItem{tasks[i].tenant(), tasks[i].key(), into,
                             tasks[i].size(), &checksum_of[j], &version_of[j]});
    from_disk.push_back(j);
  }
  if (!reads.empty()) {
    phase_start = std::chrono::steady_clock::now();
    auto read = storage_->BatchRead(reads);
    for (size_t r = 0; r < from_disk.size(); ++r) {
      if (read[r].ok()) checksums[from_disk[r]] = checksum_of[from_disk[r]];
      got[from_disk[r]] = std::move(read[r]);
    }
    AddPhaseTime(&metrics_, "read", phase_start);
  }
  phase_start = std::chrono::steady_clock::now();
  // 3. Write each into its staged replica: a local segment directly, a
  // remote one over the data plane.
  for (size_t j = 0; j < staged.size(); ++j) {
    const size_t i = staged[j];
    const rpc::MemoryLocation& loc = locs[i];
    if (!got[j].ok()) {
      out[i] = got[j].status();
      continue;
    }
    if (got[j].value() != tasks[i].size()) {
      out[i] = Status(ErrorCode::INVALID_REPLICA, "size changed");
      continue;
    }
    bool local = true;
    if (src[j] == nullptr) {
      metrics_.GetCounter("kvpool_node_promotion_in_place_total").Inc();
    } else if (uint8_t* dst = segments_->Resolve(loc.segment_id(), loc.offset(),
                                                 loc.length())) {
      std::memcpy(dst, src[j], tasks[i].size());
    } else {
      local = false;
      std::vector<WriteOp> ops = {WriteOp{loc.segment_id(), loc.offset(),
                                          loc.length(), src[j], ErrorCode::OK,
                                          GrantOf(loc)}};
      Status w = tcp_->Write(loc.data_endpoint(), loc.node_id(), ops);
      if (!w.ok()) {
        out[i] = w;
        continue;
      }
      if (ops[0].result != ErrorCode::OK) {
        out[i] = Status(ops[0].result, "promotion write");
        continue;
      }
    }
    if (slots[j] != nullptr)
      metrics_.GetCounter("kvpool_node_promotion_staged_in_pool_total").Inc();
    if (local && checksums[j] && written_hook_) {
      written_hook_(loc.segment_id(), loc.offset(), tasks[i].size(),
                    version_of[j], TenantName(tasks[i].tenant()),
                    tasks[i].key(), *checksums[j]);
    }
    reporter.Succeed(i);
  }
  AddPhaseTime(&metrics_, "write", phase_start);
  return out;  // the reporter tells the master every outcome on its way out
}

void SsdTier::ServeReads(std::span<KeyReadOp> ops) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<ReadItem> items;
  items.reserve(ops.size());
  for (auto& op : ops) {
    // A client whose tenant is "" means the master's "default".
    items.push_back(ReadItem{op.tenant.empty() ? "default" : op.tenant, op.key,
                             op.dest, op.length});
  }
  // A key a queued promotion wants: note its record's version before the
  // read, so the bytes are kept only if the record did not change under it.
  std::vector<std::optional<uint64_t>> share(ops.size());
  if (shared_reads_.enabled()) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!shared_reads_.Wanted(items[i].tenant, items[i].key)) continue;
      auto v = storage_->LookupVersion(items[i].tenant, items[i].key);
      if (v.ok()) share[i] = v.value();
    }
  }
  auto got = storage_->BatchRead(items);
  uint64_t bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!got[i].ok()) {
      ops[i].result = got[i].code() == ErrorCode::BUFFER_OVERFLOW
                          ? ErrorCode::OBJECT_NOT_FOUND
                          : got[i].code();
    } else if (got[i].value() != ops[i].length) {
      ops[i].result =
          ErrorCode::OBJECT_NOT_FOUND;  // not the value the master meant
    } else {
      ops[i].result = ErrorCode::OK;
      bytes += ops[i].length;
      auto after = share[i]
                       ? storage_->LookupVersion(items[i].tenant, items[i].key)
                       : Result<uint64_t>(ErrorCode::OBJECT_NOT_FOUND);
      if (after.ok() && after.value() == *share[i]) {
        shared_reads_.Offer(
            items[i].tenant, items[i].key, *share[i],
            {static_cast<const uint8_t*>(ops[i].dest), ops[i].length});
      }
    }
  }
  metrics_.GetCounter("kvpool_node_ssd_read_bytes_total").Inc(bytes);
  ssd_read_duration_.ObserveSince(start);
}

void SsdTier::EvictionLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock,
                 std::chrono::milliseconds(config_.ssd_eviction_interval_ms));
    if (stopping_) break;
    lock.unlock();
    EvictIfNeeded();
    lock.lock();
  }
}

void SsdTier::EvictIfNeeded() {
  std::vector<StoredObject> cands = storage_->PickEvictionCandidates();
  if (cands.empty()) return;
  rpc::RemoveDiskReplicasRequest req;
  req.set_node_id(node_id_);
  for (const auto& c : cands) {
    auto* o = req.add_objects();
    o->set_tenant(c.tenant);
    o->set_key(c.key);
    o->set_size(c.size);
  }
  rpc::RemoveDiskReplicasResponse resp;
  if (Status s = master_->Call(&Stub::RemoveDiskReplicas, req, &resp);
      !s.ok()) {
    metrics_.GetCounter("kvpool_node_ssd_evict_rpc_failures_total").Inc();
    return;  // nothing freed: the master still counts on these copies
  }
  uint64_t freed = 0, kept = 0;
  for (size_t i = 0; i < cands.size() && int(i) < resp.error_codes_size();
       ++i) {
    if (resp.error_codes(int(i)) == 0) {
      DropCopy(cands[i].tenant, cands[i].key, cands[i].object_version);
      ++freed;
    } else {
      ++kept;
    }
  }
  metrics_.GetCounter("kvpool_node_ssd_evicted_total").Inc(freed);
  metrics_.GetCounter("kvpool_node_ssd_evict_refused_total").Inc(kept);
}

std::string SsdTier::StatusJson() const {
  FileStorageStats st = storage_->GetStats();
  const PullStats pull = pull_stats();
  return fmt::format(
      R"({{"path":"{}","io_uring_enabled":{},"capacity_bytes":{},"bytes_used":{},"bytes_live":{},)"
      R"("files":{},"records":{},"corrupt_skipped":{},"corrupt_reads":{},"read_errors":{},)"
      R"("write_errors":{},"gc_runs":{},"gc_bytes_reclaimed":{},)"
      R"("promotion_pull":{{"enabled":{},"pulls":{},"tasks":{},)"
      R"("max_tasks_per_pull":{},"master_lacks_pull":{}}}}})",
      config_.ssd_offload_path, st.io_uring_enabled ? "true" : "false",
      st.capacity_bytes, st.bytes_used, st.bytes_live, st.files, st.records,
      st.corrupt_skipped, st.corrupt_reads, st.read_errors, st.write_errors,
      st.gc_runs, st.gc_bytes_reclaimed,
      config_.promotion_pull ? "true" : "false", pull.pulls, pull.tasks,
      pull.max_tasks_per_pull, pull.master_lacks_pull ? "true" : "false");
}

}  // namespace kvpool
