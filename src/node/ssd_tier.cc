#include "node/ssd_tier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "storage/aligned_buffer.h"

namespace kvpool {

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
  offload_thread_ = std::thread([this] { OffloadLoop(); });
  promotion_thread_ = std::thread([this] { PromotionLoop(); });
  eviction_thread_ = std::thread([this] { EvictionLoop(); });
  prefetch_thread_ = std::thread([this] { PrefetchLoop(); });
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
  }
  cv_.notify_all();
  // The prefetch thread feeds the promotion worker: join it first.
  if (prefetch_thread_.joinable()) prefetch_thread_.join();
  for (auto* t : {&offload_thread_, &promotion_thread_, &eviction_thread_}) {
    if (t->joinable()) t->join();
  }
}

void SsdTier::RegisterWithMaster() {
  std::vector<StoredObject> all = storage_->List();
  size_t dropped = 0;
  for (size_t start = 0; start < all.size(); start += kRegisterChunk) {
    size_t end = std::min(all.size(), start + kRegisterChunk);
    rpc::RegisterDiskObjectsRequest req;
    req.set_node_id(node_id_);
    for (size_t i = start; i < end; ++i) {
      auto* o = req.add_objects();
      o->set_tenant(all[i].tenant);
      o->set_key(all[i].key);
      o->set_size(all[i].size);
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
      if (resp.error_codes(int(i - start)) != 0) {
        storage_->Remove(all[i].tenant, all[i].key);
        ++dropped;
      }
    }
  }
  spdlog::info("node {}: re-registered {} SSD objects ({} refused and dropped)",
               node_id_, all.size() - dropped, dropped);
  metrics_.GetCounter("kvpool_node_ssd_reregistered_total")
      .Inc(all.size() - dropped);
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
    for (const auto& t : tasks) promotions_.push_back(PromotionJob{t, nullptr});
  }
  cv_.notify_all();
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
    }
    RunOffloadBatch(std::move(batch));
  }
}

void SsdTier::RunOffloadBatch(std::vector<rpc::OffloadTask> batch) {
  std::vector<WriteItem> items;
  std::vector<size_t> item_of(batch.size(), SIZE_MAX);
  std::vector<ErrorCode> codes(batch.size(), ErrorCode::OK);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& t = batch[i];
    uint8_t* src = segments_->Resolve(t.segment_id(), t.offset(), t.size());
    if (src == nullptr) {
      codes[i] = ErrorCode::INVALID_PARAMS;  // not our segment (any more)
      continue;
    }
    item_of[i] = items.size();
    items.push_back(WriteItem{t.tenant(), t.key(), src, t.size()});
  }
  std::vector<Status> written = storage_->BatchWrite(items);
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
  Status s = master_->Call(&Stub::NotifyOffload, req, &resp);
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
      // so no copy exists that the master does not know of.
      storage_->Remove(batch[i].tenant(), batch[i].key());
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
  for (;;) {
    PromotionJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Stop only when the prefetch thread can add nothing more.
      cv_.wait(lock, [&] {
        return (stopping_ && prefetch_exited_) || !promotions_.empty();
      });
      if (promotions_.empty()) return;
      job = std::move(promotions_.front());
      promotions_.pop_front();
    }
    Status s = PromoteOneKeyFromLocalDisk(job.task);
    if (job.done) job.done(job.task.key(), s.code());
  }
}

std::vector<ErrorCode> SsdTier::PrefetchKeys(
    const std::string& tenant, const std::vector<std::string>& keys,
    PrefetchDone on_done) {
  std::vector<ErrorCode> codes(keys.size(), ErrorCode::OK);
  PrefetchRequest req{tenant, {}, std::move(on_done)};
  for (size_t i = 0; i < keys.size(); ++i) {
    // The local index is authoritative for what this holder can promote.
    if (!storage_->LookupSize(tenant.empty() ? "default" : tenant, keys[i])
             .ok()) {
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
    for (auto& j : jobs) promotions_.push_back(std::move(j));
  }
  cv_.notify_all();
}

Status SsdTier::PromoteOneKeyFromLocalDisk(const rpc::PromotionTask& task) {
  // Whatever happens below, the master hears exactly one outcome, so its
  // promotion entry, quota and pin are released at once.
  struct Guard {
    SsdTier* tier;
    const rpc::PromotionTask& task;
    bool success = false;
    Status reported;
    ~Guard() {
      rpc::PromotionNotifyRequest req;
      req.set_node_id(tier->node_id_);
      req.set_tenant(task.tenant());
      req.set_key(task.key());
      req.set_task_id(task.task_id());
      req.set_success(success);
      rpc::KeyStatus resp;
      Status s = tier->master_->Call(&Stub::NotifyPromotion, req, &resp);
      tier->metrics_
          .GetCounter("kvpool_node_promotion_total",
                      fmt::format("result=\"{}\"", success ? "ok" : "failed"))
          .Inc();
      (void)s;
    }
  } guard{this, task};

  rpc::PromotionAllocStartRequest start;
  start.set_node_id(node_id_);
  start.set_tenant(task.tenant());
  start.set_key(task.key());
  start.set_size(task.size());
  start.set_task_id(task.task_id());
  rpc::PromotionAllocStartResponse staged;
  if (Status s = master_->Call(&Stub::PromotionAllocStart, start, &staged);
      !s.ok())
    return s;
  if (staged.error_code() != 0) {
    return Status(ErrorCodeFromInt(staged.error_code()),
                  "PromotionAllocStart refused");
  }
  const rpc::MemoryLocation& loc = staged.replica().memory();
  if (loc.length() != task.size())
    return Status(ErrorCode::INVALID_REPLICA, "staged size");
  storage::AlignedBuffer staging(task.size());
  std::vector<ReadItem> reads = {
      ReadItem{task.tenant(), task.key(), staging.data(), staging.size()}};
  auto got = storage_->BatchRead(reads);
  if (!got[0].ok()) return got[0].status();
  if (got[0].value() != task.size())
    return Status(ErrorCode::INVALID_REPLICA, "size changed");
  if (uint8_t* dst =
          segments_->Resolve(loc.segment_id(), loc.offset(), loc.length())) {
    std::memcpy(dst, staging.data(), task.size());
  } else {
    std::vector<WriteOp> ops = {
        WriteOp{loc.segment_id(), loc.offset(), loc.length(), staging.data()}};
    Status w = tcp_->Write(loc.data_endpoint(), loc.node_id(), ops);
    if (!w.ok()) return w;
    if (ops[0].result != ErrorCode::OK)
      return Status(ops[0].result, "promotion write");
  }
  guard.success = true;
  return Status::OK();
}

void SsdTier::ServeReads(std::span<KeyReadOp> ops) {
  std::vector<ReadItem> items;
  items.reserve(ops.size());
  for (auto& op : ops)
    items.push_back(ReadItem{op.tenant, op.key, op.dest, op.length});
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
    }
  }
  metrics_.GetCounter("kvpool_node_ssd_read_bytes_total").Inc(bytes);
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
      storage_->Remove(cands[i].tenant, cands[i].key);
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
  return fmt::format(
      R"({{"path":"{}","io_uring_enabled":{},"capacity_bytes":{},"bytes_used":{},"bytes_live":{},)"
      R"("files":{},"records":{},"corrupt_skipped":{},"corrupt_reads":{},"read_errors":{},)"
      R"("write_errors":{},"gc_runs":{},"gc_bytes_reclaimed":{}}})",
      config_.ssd_offload_path, st.io_uring_enabled ? "true" : "false",
      st.capacity_bytes, st.bytes_used, st.bytes_live, st.files, st.records,
      st.corrupt_skipped, st.corrupt_reads, st.read_errors, st.write_errors,
      st.gc_runs, st.gc_bytes_reclaimed);
}

}  // namespace kvpool
