// One batch of SsdTier's promotions: stage DRAM replicas, read the values
// from the SSD (or take a get's read of them), write them in, and tell the
// master every outcome.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "common/failpoint.h"
#include "node/ssd_tier.h"
#include "node/ssd_tier_internal.h"
#include "storage/aligned_buffer.h"

namespace kvpool {

using ssd_tier_internal::Stub;

using ssd_tier_internal::AddPhaseTime;

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

}  // namespace kvpool
