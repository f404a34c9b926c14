// SsdTier (see ssd_tier.h): start and stop, gets served from the SSD, and
// its status. Offloads are in ssd_tier_offload.cc, the promotion queue in
// ssd_tier_promotion_queue.cc, a promotion batch in ssd_tier_promote.cc,
// registration, drops and eviction in ssd_tier_records.cc.
#include "node/ssd_tier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "common/failpoint.h"
#include "common/thread_name.h"

namespace kvpool {
namespace {

// The joined / missed / timed_out counts of one InFlightReads, as one gauge
// labelled by event.
void AddJoinEventGauges(MetricsRegistry* metrics, const char* name,
                        const InFlightReads* reads, const char* help) {
  for (const char* event : {"joined", "missed", "timed_out"}) {
    metrics->AddGauge(
        name, fmt::format("event=\"{}\"", event),
        [reads, e = std::string(event)] {
          auto s = reads->stats();
          return double(e == "joined"   ? s.joined
                        : e == "missed" ? s.missed
                                        : s.timeouts);
        },
        help);
  }
}

}  // namespace

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
  metrics_.AddGauge("kvpool_node_promotion_drop_unreachable", "", [this] {
    return config_.promotion_drop_unreachable ? 1.0 : 0.0;
  });
  metrics_.AddGauge(
      "kvpool_node_promotion_service_ms", "",
      [this] {
        MutexLock lock(&mu_);
        return promo_service_.ms().value_or(0.0);
      },
      "recent promotion batches' time from the queue to bytes in place, "
      "less any wait for the budget (0 before the first)");
  metrics_.GetCounter("kvpool_node_promotions_unreachable_total", "",
                      "tasks dropped unread because they could not land "
                      "before their deadline (promotion_drop_unreachable)");
  metrics_.AddGauge(
      "kvpool_node_ssd_values_read", "",
      [this] { return double(storage_->GetStats().values_read); },
      "values read from the SSD and verified (gets and promotions)");
  metrics_.AddGauge(
      "kvpool_node_ssd_disk_reads", "",
      [this] { return double(storage_->io_read_timing().reads); },
      "reads the SSD tier's I/O backend finished (gets, promotions, "
      "recovery; a value may take more than one)");
  metrics_.AddGauge(
      "kvpool_node_ssd_disk_read_seconds", "",
      [this] { return double(storage_->io_read_timing().read_ns) / 1e9; },
      "their summed time from submission to completion: over a stretch, "
      "its growth / the stretch's length is the mean reads in flight");
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
  metrics_.AddGauge("kvpool_node_promotion_yield_to_gets_ms", "", [this] {
    return double(config_.promotion_yield_to_gets_ms);
  });
  for (const char* event : {"yielded", "timed_out"}) {
    metrics_.AddGauge(
        "kvpool_node_promotion_gets_first_events",
        fmt::format("event=\"{}\"", event),
        [this, e = std::string(event)] {
          auto s = gets_first_.stats();
          return double(e == "yielded" ? s.yields : s.timed_out);
        },
        "promotion read batches that found a get reading the disk and waited "
        "(yielded), and those that went ahead after the bound (timed_out)");
  }
  metrics_.AddGauge(
      "kvpool_node_promotion_gets_first_wait_seconds", "",
      [this] { return double(gets_first_.stats().waited_us) / 1e6; },
      "total time promotion reads waited for gets' reads");
  AddJoinEventGauges(&metrics_, "kvpool_node_promotion_read_join_events",
                     &get_reads_,
                     "promotions that found a get reading their key from "
                     "this SSD: served from its read (joined), or read the "
                     "disk themselves (missed; timed_out: the wait ran out)");
  AddJoinEventGauges(&metrics_, "kvpool_node_ssd_read_join_events",
                     &in_flight_reads_,
                     "gets that found a promotion reading their key: served "
                     "from its read (joined), or read the disk themselves "
                     "(missed; timed_out: the wait ran out)");
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
  if (config_.promotion_pull || RoomPulls())
    pull_thread_ = std::thread([this] {
      SetThreadName("kvp-pull");
      if (config_.promotion_pull) {
        PullLoop();
      } else {
        RoomPullLoop();
      }
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
  // A key a promotion is reading right now: join that read rather than
  // read the disk again (node/in_flight_reads.h), if the record is the one
  // the promotion reads.
  std::vector<std::shared_ptr<InFlightReads::Waiter>> joined(ops.size());
  std::vector<size_t> from_disk;
  from_disk.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (in_flight_reads_.Reading(items[i].tenant, items[i].key)) {
      auto v = storage_->LookupVersion(items[i].tenant, items[i].key);
      if (v.ok()) {
        joined[i] =
            in_flight_reads_.Enroll(items[i].tenant, items[i].key, v.value(),
                                    ops[i].dest, ops[i].length);
      }
    }
    if (!joined[i]) from_disk.push_back(i);
  }
  uint64_t bytes = ReadForGets(ops, items, from_disk);
  std::vector<size_t> again;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!joined[i]) continue;
    if (in_flight_reads_.Await(joined[i])) {
      ops[i].result = ErrorCode::OK;
      bytes += ops[i].length;
    } else {
      again.push_back(i);
    }
  }
  if (!again.empty()) bytes += ReadForGets(ops, items, again);
  metrics_.GetCounter("kvpool_node_ssd_read_bytes_total").Inc(bytes);
  ssd_read_duration_.ObserveSince(start);
}

uint64_t SsdTier::ReadForGets(std::span<KeyReadOp> ops,
                              const std::vector<ReadItem>& all,
                              const std::vector<size_t>& which) {
  if (which.empty()) return 0;
  std::vector<ReadItem> items;
  items.reserve(which.size());
  for (size_t i : which) items.push_back(all[i]);
  // A key a queued promotion wants: note its record's version before the
  // read, so the bytes are kept only if the record did not change under it.
  std::vector<std::optional<uint64_t>> share(items.size());
  if (shared_reads_.enabled()) {
    for (size_t n = 0; n < items.size(); ++n) {
      if (!shared_reads_.Wanted(items[n].tenant, items[n].key)) continue;
      auto v = storage_->LookupVersion(items[n].tenant, items[n].key);
      if (v.ok()) share[n] = v.value();
    }
  }
  // A promotion of such a key that comes to read it meanwhile joins this
  // read instead of reading the disk a second time.
  for (size_t n = 0; n < items.size(); ++n) {
    if (share[n]) get_reads_.Begin(items[n].tenant, items[n].key);
  }
  std::vector<Result<uint64_t>> got;
  {
    GetsFirst::GetReads first(&gets_first_);
    KVPOOL_FAILPOINT("node.get_read.during");  // a long get read, for tests
    got = storage_->BatchRead(items);
  }
  uint64_t bytes = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    KeyReadOp& op = ops[which[n]];
    if (!got[n].ok()) {
      op.result = got[n].code() == ErrorCode::BUFFER_OVERFLOW
                      ? ErrorCode::OBJECT_NOT_FOUND
                      : got[n].code();
    } else if (got[n].value() != op.length) {
      op.result =
          ErrorCode::OBJECT_NOT_FOUND;  // not the value the master meant
    } else {
      op.result = ErrorCode::OK;
      bytes += op.length;
      recent_get_reads_.Note(items[n].tenant, items[n].key);
      auto after = share[n]
                       ? storage_->LookupVersion(items[n].tenant, items[n].key)
                       : Result<uint64_t>(ErrorCode::OBJECT_NOT_FOUND);
      if (after.ok() && after.value() == *share[n]) {
        const std::span<const uint8_t> read{
            static_cast<const uint8_t*>(op.dest), op.length};
        // A promotion that joined this read has its bytes already.
        if (get_reads_.End(items[n].tenant, items[n].key, *share[n], read) ==
            0) {
          shared_reads_.Offer(items[n].tenant, items[n].key, *share[n], read);
        }
        continue;
      }
    }
    if (share[n]) get_reads_.End(items[n].tenant, items[n].key, 0, {});
  }
  return bytes;
}

std::string SsdTier::StatusJson() const {
  FileStorageStats st = storage_->GetStats();
  const PullStats pull = pull_stats();
  return fmt::format(
      R"({{"path":"{}","io_uring_enabled":{},"capacity_bytes":{},"bytes_used":{},"bytes_live":{},)"
      R"("files":{},"records":{},"corrupt_skipped":{},"corrupt_reads":{},"read_errors":{},)"
      R"("write_errors":{},"gc_runs":{},"gc_bytes_reclaimed":{},)"
      R"("promotion_pull":{{"enabled":{},"pulls":{},"tasks":{},)"
      R"("max_tasks_per_pull":{},"pulls_on_room":{},"master_lacks_pull":{}}}}})",
      config_.ssd_offload_path, st.io_uring_enabled ? "true" : "false",
      st.capacity_bytes, st.bytes_used, st.bytes_live, st.files, st.records,
      st.corrupt_skipped, st.corrupt_reads, st.read_errors, st.write_errors,
      st.gc_runs, st.gc_bytes_reclaimed,
      config_.promotion_pull ? "true" : "false", pull.pulls, pull.tasks,
      pull.max_tasks_per_pull, pull.pulls_on_room,
      pull.master_lacks_pull ? "true" : "false");
}

}  // namespace kvpool
