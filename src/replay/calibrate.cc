#include "replay/calibrate.h"

#include <fmt/format.h>

#include <algorithm>

#include "benchutil/bench_keys.h"
#include "node/node.h"
#include "replay/clock_util.h"
#include "replay/phases.h"
#include "storage/aligned_buffer.h"

namespace kvpool::replay {

namespace {

// Times one BatchGetInto of `batch` keys from `keys` (window `s`) into
// `buf`; returns ms, or < 0 unless every block came from the wanted tier
// (judged by ssd_bytes_read).
double TimeBatch(Client& c, const std::vector<std::string>& keys, int s,
                 int batch, uint64_t bb, uint8_t* buf, bool want_ssd) {
  std::vector<std::string> k;
  std::vector<void*> ptrs;
  for (int i = 0; i < batch; ++i) {
    k.push_back(keys[(size_t(s) * batch + i) % keys.size()]);
    ptrs.push_back(buf + uint64_t(i) * bb);
  }
  std::vector<uint64_t> sizes(k.size(), bb);
  const uint64_t ssd0 = c.counters().ssd_bytes_read;
  const double t = NowSec();
  auto r = c.BatchGetInto(k, ptrs, sizes);
  const double dt = (NowSec() - t) * 1e3;
  const uint64_t ssd = c.counters().ssd_bytes_read - ssd0;
  bool ok = std::all_of(r.begin(), r.end(), [&](const auto& x) {
    return x.ok() && x.value() == bb;
  });
  return ok && ssd == (want_ssd ? uint64_t(batch) * bb : 0) ? dt : -1;
}

}  // namespace

Result<Calibration> Calibrate(LocalClusterOptions o,
                              const CalibrationOptions& opt, Progress* progress,
                              ClusterKind kind, const std::string& bin_dir,
                              const ExternalCluster& external) {
  Calibration cal;
  const double t0 = NowSec();
  o.enable_prefetch_trigger = true;
  o.promotion_on_hit = false;  // reads must not move what they measure
  auto cluster_p = MakeReplayCluster(kind, o, bin_dir, external);
  ReplayCluster& cluster = *cluster_p;
  if (Status s = cluster.Start(); !s.ok()) return s;
  auto client_r = cluster.NewClient();
  if (!client_r.ok()) return client_r.status();
  Client& c = *client_r.value();
  const uint64_t bb = opt.block_bytes;
  // Every calibration block on node0, so one holder promotes them all. At
  // most a quarter of node0's DRAM, so the promotions fit below the mark.
  const int n = std::max(
      opt.batch,
      std::min<int>(opt.ceiling_keys,
                    int(o.segment_size / 4 / std::max<uint64_t>(bb, 1))));
  std::vector<std::string> keys;
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) {
    keys.push_back(fmt::format("cal-{}", i));
    ids.push_back((1ull << 62) | uint64_t(i));
  }
  ReplicateConfig rc;
  rc.preferred_segment = cluster.node_id(0);
  // The SSD set first: it must be pushed out of DRAM before anything reads
  // it, since a read leases a block and a leased block is not evicted.
  if (progress) progress->Phase(0, 0, "calibrate", "make SSD-only", 0, "");
  {
    BlockWriter w(c, bb);
    if (w.Put(keys, ids, rc) > 0) {
      return Status(ErrorCode::INTERNAL_ERROR,
                    "calibration puts failed: " + w.last_error().ToString());
    }
  }
  bench::WaitFor(60, [&] {
    for (const auto& d : bench::Descs(c, keys)) {
      bool disk = false;
      if (d.ok()) {
        for (const auto& r : d->replicas) {
          disk |= r.kind == ReplicaInfo::Kind::kLocalDisk && r.complete;
        }
      }
      if (!disk) return false;
    }
    return true;
  });
  // Filler pushes the blocks out of DRAM (LRU: they are older), then goes,
  // so the promotions below have room.
  std::vector<std::string> filler;
  {
    BlockWriter w(c, bb);
    const uint64_t dram = o.segment_size * uint64_t(o.num_nodes);
    while (bench::CountTier(c, keys, "memory") > 0 &&
           filler.size() * bb < 4 * dram) {
      std::vector<std::string> k;
      std::vector<uint64_t> id;
      for (int i = 0; i < 32; ++i) {
        k.push_back(fmt::format("cal-filler-{}", filler.size()));
        id.push_back(filler.size());
        filler.push_back(k.back());
      }
      w.Put(k, id);
    }
  }
  uint64_t filler_kept = 0;  // removes refused: these still take DRAM
  for (const auto& f : filler) filler_kept += !c.Remove(f, /*force=*/true).ok();
  std::vector<std::string> ssd_only;
  auto tiers = bench::Tiers(c, keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (tiers[i] == "local_disk") ssd_only.push_back(keys[i]);
  }
  if (int(ssd_only.size()) < opt.batch) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  fmt::format("only {} calibration blocks became SSD-only",
                              ssd_only.size()));
  }
  SettleResult settle = Settle(cluster, o.eviction_high_watermark_ratio, 30);

  std::vector<std::string> dram_keys;
  {
    std::vector<uint64_t> dram_ids;
    for (int i = 0; i < opt.batch; ++i) {
      dram_keys.push_back(fmt::format("cal-dram-{}", i));
      dram_ids.push_back((1ull << 61) | uint64_t(i));
    }
    BlockWriter w(c, bb);
    // A starved machine can leave the offloads of the filler (and so the
    // DRAM it frees) behind the first settle: wait once more before giving
    // up.
    uint64_t failed = w.Put(dram_keys, dram_ids);
    if (failed > 0) {
      settle = Settle(cluster, o.eviction_high_watermark_ratio, 30);
      std::vector<std::string> again;
      std::vector<uint64_t> again_ids;
      auto exist = c.BatchIsExist(dram_keys);
      for (size_t i = 0; i < dram_keys.size(); ++i) {
        if (exist[i].ok() && exist[i].value()) continue;
        again.push_back(dram_keys[i]);
        again_ids.push_back(dram_ids[i]);
      }
      failed = w.Put(again, again_ids);
    }
    if (failed > 0) {
      const ClusterSnapshot& l = settle.last;
      return Status(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("calibration DRAM puts failed: {} (settled {} after "
                      "{:.1f} s: DRAM {} of {} used, {} objects, {} memory "
                      "and {} disk replicas, {} offloads in flight; {} "
                      "filler blocks, {} not removed; {} SSD-only)",
                      w.last_error().ToString(), settle.settled, settle.sec,
                      l.main_used, l.main_capacity, l.objects,
                      l.memory_replicas, l.disk_replicas, l.offloads_in_flight,
                      filler.size(), filler_kept, ssd_only.size()));
    }
  }
  // DRAM and SSD batches alternate, so both see the same background load
  // (other processes on a shared machine), and their ratio is not skewed by
  // a burst that hit only one of them.
  if (progress) progress->Phase(0, 0, "calibrate", "DRAM and SSD reads", 0, "");
  storage::AlignedBuffer buf(uint64_t(opt.batch) * bb);
  if (Status s = c.RegisterBuffer(buf.data(), buf.size()); !s.ok()) return s;
  std::vector<double> dram_ms, ssd_ms;
  for (int s = 0; s < opt.samples; ++s) {
    double d = TimeBatch(c, dram_keys, s, opt.batch, bb, buf.data(), false);
    if (d >= 0) dram_ms.push_back(d);
    double x = TimeBatch(c, ssd_only, s, opt.batch, bb, buf.data(), true);
    if (x >= 0) ssd_ms.push_back(x);
  }
  c.UnregisterBuffer(buf.data()).IgnoreError();  // teardown
  if (dram_ms.empty() || ssd_ms.empty()) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  fmt::format("calibration reads: {} DRAM and {} SSD batches "
                              "came from the expected tier",
                              dram_ms.size(), ssd_ms.size()));
  }
  cal.dram_batch_p50_ms = bench::Percentile(dram_ms, 50);
  cal.ssd_batch_p50_ms = bench::Percentile(ssd_ms, 50);
  cal.reads.batch = opt.batch;
  cal.reads.samples = opt.samples;
  cal.reads.dram_ms = cal.dram_batch_p50_ms / opt.batch;
  cal.reads.ssd_ms = cal.ssd_batch_p50_ms / opt.batch;

  // The ceiling: every SSD-only block triggered at once on one holder; the
  // rate from the trigger to the last promotion reported.
  if (progress) {
    progress->Phase(0, 0, "calibrate", "promotion ceiling", ssd_only.size(),
                    "blocks");
  }
  auto promoted = [&] {
    return cluster.NodePromotions(0, true) + cluster.NodePromotions(0, false);
  };
  const uint64_t p0 = promoted();
  double trig = NowSec();
  uint64_t queued = 0;
  // A trigger is throttled while DRAM is above the watermark (eviction of
  // the filler can lag on a loaded machine): wait it out, a few times.
  for (int attempt = 0; attempt < 5 && queued == 0; ++attempt) {
    bench::WaitFor(10, [&] {
      return cluster.Snapshot().MainRatio() <
             o.eviction_high_watermark_ratio - o.eviction_ratio;
    });
    trig = NowSec();
    auto st = c.BatchPrefetchToMemory(ssd_only);
    if (!st.ok()) return st.status();
    for (auto s : *st) queued += s == PrefetchToMemoryStatus::kQueued;
  }
  bench::WaitFor(120, [&] {
    if (progress) progress->Update(promoted() - p0);
    return promoted() - p0 >= queued;
  });
  cal.ceiling_sec = NowSec() - trig;
  cal.ceiling_keys = int(promoted() - p0);
  cal.promotion_ceiling_per_s =
      cal.ceiling_sec > 0 ? double(cal.ceiling_keys) / cal.ceiling_sec : 0;

  // Reads of the promoted blocks: the DRAM read a prefetch buys, and the
  // path it takes (a promoted replica should be read like any other).
  {
    storage::AlignedBuffer pbuf(uint64_t(opt.batch) * bb);
    if (c.RegisterBuffer(pbuf.data(), pbuf.size()).ok()) {
      std::vector<double> ms;
      const ClientCounters before = c.counters();
      for (int s = 0; s < opt.samples; ++s) {
        double d = TimeBatch(c, ssd_only, s, opt.batch, bb, pbuf.data(), false);
        if (d >= 0) ms.push_back(d);
      }
      const ClientCounters after = c.counters();
      c.UnregisterBuffer(pbuf.data()).IgnoreError();  // teardown
      cal.promoted_batches = int(ms.size());
      cal.promoted_dram_ms = bench::Percentile(ms, 50) / opt.batch;
      cal.promoted_shm_bytes = after.shm_bytes_read - before.shm_bytes_read;
      cal.promoted_tcp_bytes = after.tcp_bytes_read - before.tcp_bytes_read;
    }
  }
  if (progress) progress->Finish();
  cal.sec = NowSec() - t0;
  return cal;
}

}  // namespace kvpool::replay
