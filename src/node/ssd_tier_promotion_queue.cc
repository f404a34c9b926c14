// SsdTier's promotion queue: what feeds it (the heartbeat, prefetches, a
// resubmission to a new master; the pull loops are in ssd_tier_pull.cc) and
// the workers that drain it in batches under the in-flight byte budget.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>

#include "node/ssd_tier.h"
#include "node/ssd_tier_internal.h"
#include "node/ssd_tier_timing.h"

namespace kvpool {

using ssd_tier_internal::Stub;

using ssd_tier_internal::AddPhaseTime;
using ssd_tier_timing::ExpectedLandMs;
using ssd_tier_timing::HeldBy;
using ssd_tier_timing::PromotionDeadlineMs;
using ssd_tier_timing::PromotionExpired;
using ssd_tier_timing::PromotionOrder;
using ssd_tier_timing::PromotionUnreachable;

bool SsdTier::WaitUntilOrStop(int64_t deadline_ms,
                              const std::function<bool()>& wake) {
  // Blocks on real time, but the deadline is the Clock's: a spurious wake
  // or another thread's notify waits again. Latency measured only for a
  // metric (phase times, histograms) stays on steady_clock.
  while (!stopping_) {
    if (wake && wake()) return false;
    const int64_t left = deadline_ms - clock_->NowMs();
    if (left <= 0) return false;
    cv_.WaitFor(&mu_, std::chrono::milliseconds(left));
  }
  return true;
}

void SsdTier::EnqueuePromotions(
    const google::protobuf::RepeatedPtrField<rpc::PromotionTask>& tasks) {
  if (tasks.empty()) return;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->NowMs();
    for (const auto& t : tasks) {
      PromotionJob job{t, nullptr};
      job.deadline_ms = PromotionDeadlineMs(now, t.deadline_in_ms());
      // No deadline: after every task with one.
      const int64_t order = PromotionOrder(job.deadline_ms);
      shared_reads_.Want(TenantName(t.tenant()), t.key());
      promotions_.Push(std::move(job), order);
    }
  }
  cv_.SignalAll();
}

void SsdTier::ResubmitPromotions() {
  std::vector<PromotionJob> jobs;
  {
    MutexLock lock(&mu_);
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
    MutexLock lock(&mu_);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (codes[i] != ErrorCode::OK) continue;
      const int64_t order = PromotionOrder(jobs[i].deadline_ms);
      promotions_.Push(std::move(jobs[i]), order);
      ++kept;
    }
  }
  cv_.SignalAll();
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

void SsdTier::PausePromotionsForTest(bool paused) {
  {
    MutexLock lock(&mu_);
    promotions_paused_ = paused;
  }
  cv_.SignalAll();
}

size_t SsdTier::queued_promotions() const {
  MutexLock lock(&mu_);
  return promotions_.size();
}

std::vector<std::string> SsdTier::queued_promotion_keys() const {
  DeadlineQueue<PromotionJob> copy;
  {
    MutexLock lock(&mu_);
    copy = promotions_;
  }
  std::vector<std::string> keys;
  while (!copy.empty()) keys.push_back(copy.Pop().task.key());
  return keys;
}

bool SsdTier::PromotionBytesFit(uint64_t budget, uint64_t bytes) {
  // The batch fits the budget, or nothing else is in flight. Offload
  // writes go first: while one is queued or running, promotions run one
  // batch at a time (the sequential worker's share of the disk), since puts
  // under pressure wait for offloads to make DRAM evictable.
  if (budget == 0 || promo_inflight_ == 0) return true;
  if (!offloads_.empty() || offload_active_) return false;
  return promo_inflight_ + bytes <= budget;
}

int64_t SsdTier::AcquirePromotionBytes(uint64_t budget, uint64_t bytes) {
  MutexLock lock(&mu_);
  // Time a batch waited here (for the budget, or behind an offload) is
  // "held". A measured duration for a metric: steady_clock; the one
  // returned (the service-time estimate's) is clock_'s, as deadlines are.
  // Each stretch between wakes counts under what held it at its start: the
  // budget, or an offload alone (the budget would have let it start).
  const int64_t start_ms = clock_->NowMs();
  const bool held = !PromotionBytesFit(budget, bytes);
  if (held) promo_held_bytes_ += bytes;
  while (!PromotionBytesFit(budget, bytes)) {
    const auto since = std::chrono::steady_clock::now();
    const char* held_by = HeldBy(budget, promo_inflight_, bytes);
    budget_cv_.Wait(&mu_);
    AddPhaseTime(&promotion_phase_us_, held_by, since);
  }
  if (held) promo_held_bytes_ -= bytes;
  promo_inflight_ += bytes;
  uint64_t peak = promo_peak_.load();
  while (promo_inflight_ > peak &&
         !promo_peak_.compare_exchange_weak(peak, promo_inflight_)) {
  }
  return held ? clock_->NowMs() - start_ms : 0;
}

void SsdTier::DropUnreachable(const std::vector<PromotionJob>& jobs,
                              int64_t now_ms, uint64_t budget,
                              std::vector<size_t>* run,
                              std::vector<rpc::PromotionTask>* dropped) {
  int64_t land_ms = 0;
  {
    MutexLock lock(&mu_);
    const std::optional<double> service = promo_service_.ms();
    if (!service) return;
    land_ms = ExpectedLandMs(now_ms, *service,
                             promo_inflight_ + promo_held_bytes_, budget);
  }
  size_t kept = 0, n = 0;
  for (size_t i : *run) {
    if (PromotionUnreachable(jobs[i].deadline_ms, land_ms)) {
      dropped->push_back(jobs[i].task);
      ++n;
    } else {
      (*run)[kept++] = i;
    }
  }
  run->resize(kept);
  if (n > 0)
    metrics_.GetCounter("kvpool_node_promotions_unreachable_total").Inc(n);
}

void SsdTier::SkipAfterGet(const std::vector<PromotionJob>& jobs,
                           std::vector<size_t>* run,
                           std::vector<size_t>* skipped) {
  size_t kept = 0;
  for (size_t i : *run) {
    const rpc::PromotionTask& t = jobs[i].task;
    const std::string& tenant = TenantName(t.tenant());
    // Promote-on-hit and the get-side kick are triggered by a get's read:
    // they are for later readers, not for their own get, and never skipped.
    // Nor is a block two gets or more read in a row: shared, its DRAM copy
    // serves the next ones.
    const bool late = t.from_prefetch() && !jobs[i].for_next_get &&
                      recent_get_reads_.RecentReads(tenant, t.key()) == 1 &&
                      !shared_reads_.HasBytes(tenant, t.key()) &&
                      !get_reads_.Reading(tenant, t.key());
    if (late) {
      skipped->push_back(i);
    } else {
      (*run)[kept++] = i;
    }
  }
  if (!skipped->empty()) {
    metrics_
        .GetCounter("kvpool_node_promotions_skipped_after_get_total", "",
                    "prefetch promotions dropped unread because a get had "
                    "read the block from the disk first "
                    "(promotion_skip_after_get_ms)")
        .Inc(skipped->size());
  }
  run->resize(kept);
}

void SsdTier::PromotionLoop() {
  const size_t batch = std::max<size_t>(1, config_.promotion_read_batch);
  const uint64_t budget = config_.promotion_inflight_bytes;  // 0: unbounded
  for (;;) {
    std::vector<PromotionJob> jobs;
    uint64_t bytes = 0;
    {
      MutexLock lock(&mu_);
      // Stop only when the pull and prefetch threads can add nothing more
      // and the queue is empty.
      while (promotions_.empty() || promotions_paused_) {
        if (promotions_.empty() && stopping_ && prefetch_exited_) return;
        cv_.Wait(&mu_);
      }
      // A batch never holds more than the budget (a single larger task
      // runs alone, see PromotionBytesFit).
      while (jobs.size() < batch && !promotions_.empty()) {
        const uint64_t size = promotions_.Front().task.size();
        if (!jobs.empty() && budget > 0 && bytes + size > budget) break;
        bytes += size;
        jobs.push_back(promotions_.Pop());
      }
    }
    // The pull thread may be waiting for this room (ssd_tier_pull.cc).
    if (config_.promotion_pull || RoomPulls()) cv_.SignalAll();
    // A task whose deadline passed while it waited here is dropped before
    // its SSD read: its get has come (or will before the read could land),
    // and the disk is better spent on the tasks that can still make it.
    const int64_t now = clock_->NowMs();
    std::vector<rpc::PromotionTask> tasks, expired;
    std::vector<size_t> run;  // indices into jobs
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (PromotionExpired(jobs[i].deadline_ms, now)) {
        expired.push_back(jobs[i].task);
      } else {
        run.push_back(i);
      }
    }
    if (config_.promotion_drop_unreachable)
      DropUnreachable(jobs, now, budget, &run, &expired);
    ReportExpired(expired);
    std::vector<size_t> skipped;  // indices into jobs
    if (recent_get_reads_.enabled()) SkipAfterGet(jobs, &run, &skipped);
    if (!skipped.empty()) {
      std::vector<rpc::PromotionTask> failed;
      for (size_t i : skipped) failed.push_back(jobs[i].task);
      ReportFailed(failed);
      for (size_t i : skipped) {
        if (jobs[i].done)
          jobs[i].done(jobs[i].task.key(), ErrorCode::OBJECT_NOT_FOUND);
      }
    }
    tasks.reserve(run.size());
    uint64_t run_bytes = 0;
    for (size_t i : run) {
      tasks.push_back(jobs[i].task);
      run_bytes += jobs[i].task.size();
    }
    // The budget bounds bytes being read or copied: a batch takes its share
    // after the alloc round trip (which moves no bytes, so that a round trip
    // to the master never holds budget the disk could use) and gives it back
    // once its bytes are in place, before the notify round trip.
    bool acquired = false;
    int64_t held_ms = 0;
    uint64_t held_bytes = 0;  // of run_bytes, not yet given back
    auto acquire = [&] {
      held_ms = AcquirePromotionBytes(budget, run_bytes);
      held_bytes = run_bytes;
      acquired = true;
    };
    // Each value's share goes back as its bytes arrive, while the batch's
    // other reads are still at the disk: held to the batch's end, a third
    // to a half of the budget sat in reads that had ended
    // (docs/ssd_tier.md). Inside the I/O backend's completion loop, under
    // its ring's lock, it only tries mu_ (taking it there would order the
    // ring's lock before mu_); what it cannot give back then goes with the
    // next value, or when the reads are over.
    uint64_t arrived_bytes = 0;
    auto give_back = [&](uint64_t bytes, bool in_io_loop) {
      if (!acquired) return;
      arrived_bytes += bytes;
      if (arrived_bytes == 0) return;
      if (in_io_loop) {
        if (!mu_.TryLock()) return;
      } else {
        mu_.Lock();
      }
      const uint64_t n = std::min(arrived_bytes, held_bytes);
      promo_inflight_ -= n;
      held_bytes -= n;
      arrived_bytes = 0;
      mu_.Unlock();
      budget_cv_.SignalAll();
    };
    // A batch that read something tells how long one takes from leaving
    // the queue to bytes in place, its wait for the budget aside.
    auto release = [&] {
      if (!acquired) return;
      acquired = false;
      {
        MutexLock lock(&mu_);
        promo_inflight_ -= held_bytes;
        held_bytes = 0;
        promo_service_.Observe(clock_->NowMs() - now - held_ms);
      }
      budget_cv_.SignalAll();
    };
    std::vector<Status> got;
    if (!tasks.empty())
      got = PromoteKeysFromLocalDisk(tasks, release, acquire, give_back);
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
    PrefetchDone on_done, bool for_next_get) {
  std::vector<ErrorCode> codes(keys.size(), ErrorCode::OK);
  // The master's name for the empty tenant, so the task and its reads find
  // what offload stored.
  PrefetchRequest req{tenant.empty() ? "default" : tenant,
                      {},
                      std::move(on_done),
                      for_next_get};
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
    MutexLock lock(&mu_);
    if (stopping_) {
      for (auto& c : codes) c = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
      return codes;  // the job is dropped, as the seed asks of a stopped pool
    }
    for (const auto& k : req.keys) shared_reads_.Want(req.tenant, k);
    prefetches_.push_back(std::move(req));
  }
  cv_.SignalAll();
  metrics_.GetCounter("kvpool_node_prefetch_requests_total").Inc();
  return codes;
}

void SsdTier::PrefetchLoop() {
  for (;;) {
    PrefetchRequest req;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && prefetches_.empty()) cv_.Wait(&mu_);
      if (prefetches_.empty()) {
        prefetch_exited_ = true;
        cv_.SignalAll();
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
    jobs.push_back(
        PromotionJob{std::move(t), req.done, std::nullopt, req.for_next_get});
  }
  if (jobs.empty()) return;
  {
    MutexLock lock(&mu_);
    for (auto& j : jobs) promotions_.Push(std::move(j), 0);
  }
  cv_.SignalAll();
}

}  // namespace kvpool
