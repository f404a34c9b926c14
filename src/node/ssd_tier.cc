// SsdTier (see ssd_tier.h): start and stop, gets served from the SSD, and
// its status. Offloads are in ssd_tier_offload.cc, the promotion queue in
// ssd_tier_promotion_queue.cc, a promotion batch in ssd_tier_promote.cc,
// registration, drops and eviction in ssd_tier_records.cc.
#include "node/ssd_tier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "common/thread_name.h"

namespace kvpool {

SsdTier::SsdTier(SsdTierConfig config, std::string node_id,
                 MasterClient* master, const SegmentTable* segments,
                 TcpDataClient* tcp, const Clock* clock)
    : config_(std::move(config)),
      node_id_(std::move(node_id)),
      clock_(clock),
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
  {
    MutexLock lock(&mu_);  // no worker runs yet; for the analysis
    stopping_ = false;
    prefetch_exited_ = false;
  }
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
    MutexLock lock(&mu_);
    if (stopping_ && !offload_thread_.joinable()) return;
    stopping_ = true;
    promotions_paused_ = false;  // queued tasks must drain
  }
  cv_.SignalAll();
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
  MutexLock lock(&mu_);
  return promo_inflight_;
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
