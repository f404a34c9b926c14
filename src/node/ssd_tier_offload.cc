// SsdTier's offloads: DRAM values the master hands over are written to the
// SSD in batches, and kept only once the master has recorded the copy.
#include <unordered_map>

#include "common/failpoint.h"
#include "node/ssd_tier.h"
#include "node/ssd_tier_internal.h"
#include "node/ssd_tier_timing.h"

namespace kvpool {

using ssd_tier_internal::Stub;
using ssd_tier_timing::kOffloadNotifyAttempts;
using ssd_tier_timing::OffloadRetryDelayMs;

void SsdTier::EnqueueOffloads(
    const google::protobuf::RepeatedPtrField<rpc::OffloadTask>& tasks) {
  if (tasks.empty()) return;
  {
    MutexLock lock(&mu_);
    for (const auto& t : tasks) offloads_.push_back(t);
  }
  cv_.SignalAll();
}

void SsdTier::OffloadLoop() {
  for (;;) {
    std::vector<rpc::OffloadTask> batch;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && offloads_.empty()) cv_.Wait(&mu_);
      if (offloads_.empty()) return;  // stopping and drained
      while (!offloads_.empty() && batch.size() < config_.offload_batch) {
        batch.push_back(std::move(offloads_.front()));
        offloads_.pop_front();
      }
      offload_active_ = true;
    }
    RunOffloadBatch(std::move(batch));
    {
      MutexLock lock(&mu_);
      offload_active_ = false;
    }
    cv_.SignalAll();
    budget_cv_.SignalAll();  // promotions held back for the offload may go
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
  for (int attempt = 1; !s.ok() && attempt < kOffloadNotifyAttempts;
       ++attempt) {
    {
      MutexLock lock(&mu_);
      if (WaitUntilOrStop(clock_->NowMs() + OffloadRetryDelayMs(attempt)))
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

}  // namespace kvpool
