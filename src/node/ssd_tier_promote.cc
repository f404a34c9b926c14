// One batch of SsdTier's promotions: stage DRAM replicas, read the values
// from the SSD (or take a get's read of them), write them in, and tell the
// master every outcome. The steps are PromotionBatch's methods and the
// reporter's Notify, in the order PromoteKeysFromLocalDisk calls them
// (docs/ssd_tier.md, "Promotion at the disk's speed").
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

// Whatever happens to a key of the chain, the master hears exactly one
// outcome per key, so its promotion entry, quota and pin are released at
// once: failure unless Succeed(i) was called, reported when the reporter
// goes out of scope (one BatchPromotionNotify for a batch, when the master
// has it).
class SsdTier::PromotionReporter {
 public:
  PromotionReporter(SsdTier* tier, std::span<const rpc::PromotionTask> tasks,
                    bool expired = false)
      : tier_(tier),
        tasks_(tasks),
        expired_(expired),
        success_(tasks.size(), false) {}
  PromotionReporter(const PromotionReporter&) = delete;
  PromotionReporter& operator=(const PromotionReporter&) = delete;
  ~PromotionReporter() { Notify(); }
  void Succeed(size_t i) { success_[i] = true; }

 private:
  // The notify step: counts each outcome and tells the master.
  void Notify();
  // One BatchPromotionNotify, or one NotifyPromotion per key (one key, or
  // an older master).
  void Send(std::vector<rpc::PromotionNotifyRequest> reqs);

  SsdTier* const tier_;
  std::span<const rpc::PromotionTask> tasks_;
  const bool expired_;  // every task was dropped unread past its deadline
  std::vector<bool> success_;
};

void SsdTier::PromotionReporter::Notify() {
  std::vector<rpc::PromotionNotifyRequest> reqs(tasks_.size());
  for (size_t i = 0; i < tasks_.size(); ++i) {
    reqs[i].set_node_id(tier_->node_id_);
    reqs[i].set_tenant(tasks_[i].tenant());
    reqs[i].set_key(tasks_[i].key());
    reqs[i].set_task_id(tasks_[i].task_id());
    reqs[i].set_success(success_[i]);
    reqs[i].set_expired(expired_ && !success_[i]);
    const char* result = success_[i] ? "ok" : (expired_ ? "expired" : "failed");
    tier_->metrics_
        .GetCounter("kvpool_node_promotion_total",
                    fmt::format("result=\"{}\"", result))
        .Inc();
  }
  KVPOOL_FAILPOINT("node.promotion.after_write");
  const auto notify_start = std::chrono::steady_clock::now();
  Send(std::move(reqs));
  AddPhaseTime(&tier_->promotion_phase_us_, "notify", notify_start);
}

void SsdTier::PromotionReporter::Send(
    std::vector<rpc::PromotionNotifyRequest> reqs) {
  MasterClient* master = tier_->master_;
  if (reqs.size() > 1 && tier_->batch_rpcs_.load()) {
    rpc::BatchPromotionNotifyRequest batch;
    for (auto& r : reqs) *batch.add_items() = std::move(r);
    rpc::BatchPromotionNotifyResponse resp;
    Status s = master->Call(&Stub::BatchPromotionNotify, batch, &resp);
    if (s.code() != ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) return;
    tier_->batch_rpcs_.store(false);  // an older master: key by key from now on
    for (int i = 0; i < batch.items_size(); ++i)
      reqs[size_t(i)] = batch.items(i);
  }
  for (const auto& r : reqs) {
    rpc::KeyStatus resp;
    (void)master->Call(&Stub::NotifyPromotion, r, &resp);
  }
}

// The state one batch hands from step to step. Indices `i` are task order
// (statuses_, locs_); indices `j` are positions in staged_ (the keys the
// master staged), which every per-read vector follows.
class SsdTier::PromotionBatch {
 public:
  PromotionBatch(SsdTier* tier, std::span<const rpc::PromotionTask> tasks)
      : tier_(tier),
        tasks_(tasks),
        statuses_(tasks.size(), Status::OK()),
        locs_(tasks.size()) {}
  PromotionBatch(const PromotionBatch&) = delete;
  PromotionBatch& operator=(const PromotionBatch&) = delete;
  ~PromotionBatch() {
    for (uint8_t* s : slots_) tier_->staging_.Release(s);
  }

  // 1. alloc: stages a DRAM replica for each key (the master picks where it
  // lands): one round trip for the batch when the master has the batch RPC.
  // Keeps the keys staged at the task's size.
  void AllocStart();
  bool AnyStaged() const { return !staged_.empty(); }
  // 2. read: where each staged key's bytes come from, then the disk reads.
  void PlanReads();
  void AddDiskRead(size_t j, uint8_t* into);
  // `arrived` (optional): called with a value's bytes as they come from
  // the disk (FileStorage::BatchRead's `arrived`), once per value, with
  // in_io_loop true; then once with 0 bytes and false after the reads.
  void Read(const BytesArrivedFn& arrived);
  // 3. write: each value into its staged replica; a key written is marked
  // a success in `reporter`.
  void Write(PromotionReporter* reporter);
  std::vector<Status> TakeStatuses() { return std::move(statuses_); }

 private:
  // One BatchPromotionAllocStart; false if the master lacks it (an older
  // master: key by key from now on).
  bool AllocStartBatched(
      const std::vector<rpc::PromotionAllocStartRequest>& starts,
      std::vector<rpc::PromotionAllocStartResponse>* staged_resp,
      std::vector<Status>* rpc_status);
  // Takes the master's answer for task i: its replica, or why not.
  void CheckStaged(size_t i, const Status& rpc_status,
                   const rpc::PromotionAllocStartResponse& staged_resp);
  // Puts value j into its replica when it was not read there in place.
  // *local: the replica is in this node's own segment.
  Status CopyIntoReplica(size_t j, bool* local);

  SsdTier* const tier_;
  const std::span<const rpc::PromotionTask> tasks_;
  std::vector<Status> statuses_;
  std::vector<rpc::MemoryLocation> locs_;
  std::vector<size_t> staged_;       // task indices
  std::vector<const uint8_t*> src_;  // null: read in place
  std::vector<std::unique_ptr<storage::AlignedBuffer>> owned_;
  std::vector<uint8_t*> slots_;  // staging pool slots, released at the end
  std::vector<ReadItem> reads_;
  std::vector<size_t> from_disk_;  // positions in staged_ of reads_
  std::vector<Result<uint64_t>> got_;
  // The verified checksum and version of each value read from the disk.
  std::vector<std::optional<uint64_t>> checksums_;
  std::vector<uint64_t> checksum_of_, version_of_;
};

void SsdTier::PromotionBatch::AllocStart() {
  const size_t n = tasks_.size();
  std::vector<rpc::PromotionAllocStartRequest> starts(n);
  for (size_t i = 0; i < n; ++i) {
    starts[i].set_node_id(tier_->node_id_);
    starts[i].set_tenant(tasks_[i].tenant());
    starts[i].set_key(tasks_[i].key());
    starts[i].set_size(tasks_[i].size());
    starts[i].set_task_id(tasks_[i].task_id());
  }
  std::vector<rpc::PromotionAllocStartResponse> staged_resp(n);
  std::vector<Status> rpc_status(n, Status::OK());
  const auto phase_start = std::chrono::steady_clock::now();
  const bool batched = n > 1 && tier_->batch_rpcs_.load() &&
                       AllocStartBatched(starts, &staged_resp, &rpc_status);
  if (!batched) {
    for (size_t i = 0; i < n; ++i) {
      rpc_status[i] = tier_->master_->Call(&Stub::PromotionAllocStart,
                                           starts[i], &staged_resp[i]);
    }
  }
  AddPhaseTime(&tier_->promotion_phase_us_, "alloc", phase_start);
  for (size_t i = 0; i < n; ++i) CheckStaged(i, rpc_status[i], staged_resp[i]);
}

bool SsdTier::PromotionBatch::AllocStartBatched(
    const std::vector<rpc::PromotionAllocStartRequest>& starts,
    std::vector<rpc::PromotionAllocStartResponse>* staged_resp,
    std::vector<Status>* rpc_status) {
  rpc::BatchPromotionAllocStartRequest batch;
  for (const auto& r : starts) *batch.add_items() = r;
  rpc::BatchPromotionAllocStartResponse resp;
  Status s =
      tier_->master_->Call(&Stub::BatchPromotionAllocStart, batch, &resp);
  if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
    tier_->batch_rpcs_ = false;
    return false;
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    if (!s.ok()) {
      (*rpc_status)[i] = s;
    } else if (int(i) < resp.items_size()) {
      (*staged_resp)[i] = std::move(*resp.mutable_items(int(i)));
    } else {
      (*rpc_status)[i] = Status(ErrorCode::RPC_FAIL, "short batch reply");
    }
  }
  return true;
}

void SsdTier::PromotionBatch::CheckStaged(
    size_t i, const Status& rpc_status,
    const rpc::PromotionAllocStartResponse& staged_resp) {
  if (!rpc_status.ok()) {
    statuses_[i] = rpc_status;
    return;
  }
  if (staged_resp.error_code() != 0) {
    statuses_[i] = Status(ErrorCodeFromInt(staged_resp.error_code()),
                          "PromotionAllocStart refused");
    return;
  }
  locs_[i] = staged_resp.replica().memory();
  if (locs_[i].length() != tasks_[i].size()) {
    statuses_[i] = Status(ErrorCode::INVALID_REPLICA, "staged size");
    return;
  }
  staged_.push_back(i);
}

// Every staged key is read from the SSD in one submission, into:
//  - the staged replica itself, when it is in this node's own segment at
//    a 4096-aligned address and no staging pool is configured (O_DIRECT,
//    no copy; if the read fails the replica's bytes are garbage, but the
//    master drops a replica whose promotion failed);
//  - a slot of the staging pool (huge pages: one disk request per value),
//    then copied;
//  - else a buffer of its own, then copied or written over the network.
// A key whose bytes a get has just read from this SSD (SharedReads) is
// not read again: those bytes, from the record version still on disk, are
// copied in instead. Nor is one a get is reading now: the batch waits for
// that read (get_reads_) and takes its bytes.
void SsdTier::PromotionBatch::PlanReads() {
  const size_t m = staged_.size();
  src_.assign(m, nullptr);
  owned_.resize(m);
  slots_.assign(m, nullptr);
  got_.assign(m, ErrorCode::INTERNAL_ERROR);
  checksums_.resize(m);
  checksum_of_.assign(m, 0);
  version_of_.assign(m, 0);
  struct Joining {
    size_t j;
    uint8_t* into;
    std::shared_ptr<InFlightReads::Waiter> waiter;
  };
  std::vector<Joining> joining;
  for (size_t j = 0; j < m; ++j) {
    const size_t i = staged_[j];
    const rpc::PromotionTask& task = tasks_[i];
    const rpc::MemoryLocation& loc = locs_[i];
    uint8_t* dst =
        tier_->segments_->Resolve(loc.segment_id(), loc.offset(), loc.length());
    const std::string& tenant = TenantName(task.tenant());
    SharedReads::Bytes shared = tier_->shared_reads_.Take(tenant, task.key());
    if (shared.data && shared.size == task.size()) {
      auto now = tier_->storage_->LookupVersion(tenant, task.key());
      if (now.ok() && now.value() == shared.version) {
        owned_[j] = std::move(shared.data);
        src_[j] = owned_[j]->data();
        got_[j] = shared.size;
        tier_->metrics_.GetCounter("kvpool_node_promotion_shared_reads_total")
            .Inc();
        continue;
      }
    }
    uint8_t* into = dst;
    if ((slots_[j] = tier_->staging_.TryAcquire(task.size())) != nullptr) {
      into = slots_[j];
    } else if (dst == nullptr || reinterpret_cast<uintptr_t>(dst) % 4096 != 0) {
      owned_[j] = std::make_unique<storage::AlignedBuffer>(task.size());
      into = owned_[j]->data();
    }
    if (into != dst) src_[j] = into;
    // A get is reading this key from the disk now: take its bytes when its
    // read ends rather than read the key a second time.
    if (tier_->get_reads_.Reading(tenant, task.key())) {
      auto now = tier_->storage_->LookupVersion(tenant, task.key());
      if (now.ok()) {
        auto waiter = tier_->get_reads_.Enroll(tenant, task.key(), now.value(),
                                               into, task.size());
        if (waiter) {
          joining.push_back({j, into, std::move(waiter)});
          continue;
        }
      }
    }
    AddDiskRead(j, into);
  }
  for (Joining& g : joining) {
    if (tier_->get_reads_.Await(g.waiter)) {
      got_[g.j] = tasks_[staged_[g.j]].size();
    } else {
      AddDiskRead(g.j, g.into);
    }
  }
}

void SsdTier::PromotionBatch::AddDiskRead(size_t j, uint8_t* into) {
  const rpc::PromotionTask& task = tasks_[staged_[j]];
  reads_.push_back(ReadItem{task.tenant(), task.key(), into, task.size(),
                            &checksum_of_[j], &version_of_[j]});
  from_disk_.push_back(j);
}

void SsdTier::PromotionBatch::Read(const BytesArrivedFn& arrived) {
  if (reads_.empty()) return;
  // Behind any get reading the disk now, not beside it; before Begin, so
  // that no get joins a read that is waiting for gets.
  if (tier_->gets_first_.enabled()) {
    const auto held_start = std::chrono::steady_clock::now();
    tier_->gets_first_.AwaitGets();
    AddPhaseTime(&tier_->promotion_phase_us_, "held_gets", held_start);
  }
  const auto phase_start = std::chrono::steady_clock::now();
  // Gets of these keys that arrive meanwhile join this read (InFlightReads)
  // instead of reading the disk again.
  InFlightReads& joins = tier_->in_flight_reads_;
  for (const ReadItem& item : reads_)
    joins.Begin(TenantName(item.tenant), item.key);
  std::vector<bool> reported(reads_.size(), false);
  FileStorage::ArrivedFn on_arrived;
  if (arrived) {
    on_arrived = [&](size_t r) {
      if (reported[r]) return;  // read again after its record moved
      reported[r] = true;
      arrived(tasks_[staged_[from_disk_[r]]].size(), /*in_io_loop=*/true);
    };
  }
  auto read = tier_->storage_->BatchRead(reads_, on_arrived);
  if (arrived) arrived(0, /*in_io_loop=*/false);
  for (size_t r = 0; r < from_disk_.size(); ++r) {
    const size_t j = from_disk_[r];
    const ReadItem& item = reads_[r];
    if (read[r].ok()) {
      checksums_[j] = checksum_of_[j];
      joins.End(TenantName(item.tenant), item.key, version_of_[j],
                {static_cast<const uint8_t*>(item.dest), read[r].value()});
    } else {
      joins.End(TenantName(item.tenant), item.key, 0, {});
    }
    got_[j] = std::move(read[r]);
  }
  AddPhaseTime(&tier_->promotion_phase_us_, "read", phase_start);
}

void SsdTier::PromotionBatch::Write(PromotionReporter* reporter) {
  const auto phase_start = std::chrono::steady_clock::now();
  for (size_t j = 0; j < staged_.size(); ++j) {
    const size_t i = staged_[j];
    const rpc::PromotionTask& task = tasks_[i];
    if (!got_[j].ok()) {
      statuses_[i] = got_[j].status();
      continue;
    }
    if (got_[j].value() != task.size()) {
      statuses_[i] = Status(ErrorCode::INVALID_REPLICA, "size changed");
      continue;
    }
    bool local = true;
    if (Status w = CopyIntoReplica(j, &local); !w.ok()) {
      statuses_[i] = w;
      continue;
    }
    if (slots_[j] != nullptr) {
      tier_->metrics_.GetCounter("kvpool_node_promotion_staged_in_pool_total")
          .Inc();
    }
    if (local && checksums_[j] && tier_->written_hook_) {
      tier_->written_hook_(
          locs_[i].segment_id(), locs_[i].offset(), task.size(), version_of_[j],
          TenantName(task.tenant()), task.key(), *checksums_[j]);
    }
    reporter->Succeed(i);
  }
  AddPhaseTime(&tier_->promotion_phase_us_, "write", phase_start);
}

// A local segment directly, a remote one over the data plane.
Status SsdTier::PromotionBatch::CopyIntoReplica(size_t j, bool* local) {
  const rpc::MemoryLocation& loc = locs_[staged_[j]];
  const uint64_t size = tasks_[staged_[j]].size();
  *local = true;
  if (src_[j] == nullptr) {
    tier_->metrics_.GetCounter("kvpool_node_promotion_in_place_total").Inc();
    return Status::OK();
  }
  if (uint8_t* dst = tier_->segments_->Resolve(loc.segment_id(), loc.offset(),
                                               loc.length())) {
    std::memcpy(dst, src_[j], size);
    return Status::OK();
  }
  *local = false;
  std::vector<WriteOp> ops = {WriteOp{loc.segment_id(), loc.offset(),
                                      loc.length(), src_[j], ErrorCode::OK,
                                      GrantOf(loc)}};
  Status w = tier_->tcp_->Write(loc.data_endpoint(), loc.node_id(), ops);
  if (!w.ok()) return w;
  if (ops[0].result != ErrorCode::OK)
    return Status(ops[0].result, "promotion write");
  return Status::OK();
}

const std::string& SsdTier::TenantName(const std::string& tenant) {
  static const std::string kDefault = "default";
  return tenant.empty() ? kDefault : tenant;
}

void SsdTier::ReportExpired(std::span<const rpc::PromotionTask> tasks) {
  if (tasks.empty()) return;
  PromotionReporter report(this, tasks, /*expired=*/true);
}

void SsdTier::ReportFailed(std::span<const rpc::PromotionTask> tasks) {
  if (tasks.empty()) return;
  PromotionReporter report(this, tasks, /*expired=*/false);
}

Status SsdTier::PromoteOneKeyFromLocalDisk(const rpc::PromotionTask& task) {
  return PromoteKeysFromLocalDisk(std::span<const rpc::PromotionTask>(&task, 1))
      .front();
}

std::vector<Status> SsdTier::PromoteKeysFromLocalDisk(
    std::span<const rpc::PromotionTask> tasks,
    const std::function<void()>& data_done,
    const std::function<void()>& before_data,
    const BytesArrivedFn& bytes_arrived) {
  // 4. notify: the reporter tells the master every outcome on every way
  // out, after data_done.
  PromotionReporter reporter(this, tasks);
  struct DataDone {
    const std::function<void()>& fn;
    ~DataDone() {
      if (fn) fn();
    }
  } data_done_on_exit{data_done};
  // Declared last, so its staging slots and buffers go back first.
  PromotionBatch batch(this, tasks);
  batch.AllocStart();
  if (batch.AnyStaged()) {
    if (before_data) before_data();
    batch.PlanReads();
    batch.Read(bytes_arrived);
    KVPOOL_FAILPOINT("node.promotion.after_read");
    batch.Write(&reporter);
  }
  return batch.TakeStatuses();
}

}  // namespace kvpool
