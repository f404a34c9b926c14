#include "bench/envelope_measure.h"

#include <malloc.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <thread>

#include "benchutil/bench_util.h"

namespace kvpool::bench {

uint64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  // Small chunks in the arenas plus the large ones malloc mmaps (the
  // tables' slot arrays).
  return uint64_t(mi.uordblks) + uint64_t(mi.hblkhd);
}

namespace {

double Ms(double sec) { return sec * 1e3; }

class HoldWindow {
 public:
  explicit HoldWindow(MasterService& svc) : svc_(svc) {
    svc_.ResetMaxShardHold();
    LockHoldTracker::ResetHistogram();
  }
  HoldStats stats() const {
    HoldStats h;
    h.max_ms = double(svc_.MaxShardHoldNs()) / 1e6;
    h.cpu_max_ms = double(svc_.MaxShardCpuHoldNs()) / 1e6;
    Summarize(&LockHoldTracker::HoldsInBucket, &h.holds, &h.over_8ms,
              &h.p999_ms);
    uint64_t cpu_holds = 0;
    Summarize(&LockHoldTracker::CpuHoldsInBucket, &cpu_holds, &h.cpu_over_8ms,
              &h.cpu_p999_ms);
    return h;
  }

 private:
  static void Summarize(uint64_t (*in_bucket)(int), uint64_t* holds,
                        uint64_t* over_8ms, double* p999_ms) {
    for (int b = 0; b < LockHoldTracker::kBuckets; ++b) {
      *holds += in_bucket(b);
      if (b >= 24) *over_8ms += in_bucket(b);
    }
    uint64_t seen = 0;
    for (int b = 0; b < LockHoldTracker::kBuckets; ++b) {
      seen += in_bucket(b);
      if (double(seen) >= 0.999 * double(*holds)) {
        *p999_ms = std::ldexp(1.0, b) / 1e6;
        break;
      }
    }
  }

  MasterService& svc_;
};

// Keys per second of QueryReadOnlyBatch over random existing keys.
double LookupRateOf(MasterService& svc, uint64_t n, int batch, int threads,
                    double seconds) {
  std::atomic<bool> go{false};
  std::atomic<uint64_t> total{0};
  std::atomic<uint64_t> missed{0};
  std::vector<std::thread> ts;
  double t0 = 0;
  std::atomic<int> ready{0};
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      // The same 64 Ki random keys per thread at every batch size: enough
      // that the table, not the cache, answers.
      constexpr size_t kPool = 65536;
      const size_t batches = kPool / size_t(batch);
      std::vector<std::string> keys(kPool);
      for (auto& k : keys) k = EnvelopeKey(rng() % n);
      BatchQueryResult out;
      uint64_t done = 0, miss = 0;
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const double start = NowSec();
      for (size_t b = 0; NowSec() - start < seconds; ++b) {
        std::span<const std::string> span(
            keys.data() + (b % batches) * size_t(batch), size_t(batch));
        out.items.clear();
        out.replicas.clear();
        svc.QueryReadOnlyBatch("", span, &out);
        for (const auto& item : out.items) miss += item.code != ErrorCode::OK;
        done += span.size();
      }
      total += done;
      missed += miss;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  t0 = NowSec();
  go = true;
  for (auto& th : ts) th.join();
  const double rate = double(total.load()) / (NowSec() - t0);
  if (missed.load() > 0) {
    std::fprintf(stderr, "bench: %lu lookups of existing keys missed\n",
                 missed.load());
    std::exit(1);
  }
  return rate;
}

void MeasureLookups(const EnvelopeOptions& opts, EnvelopeMaster& m, uint64_t n,
                    EnvelopeStep* out) {
  // More threads than cores: a thread preempted while it holds a shard
  // lock makes the hold as long as its time slice, which is the scheduler's
  // figure, not the master's; those cases do not count for the hold.
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  // Wall holds only: the CPU measure's system calls would slow the very
  // lookups whose rate this phase reports.
  LockHoldTracker::SetCpuEnabled(false);
  for (int batch : opts.lookup_batches) {
    for (int threads : opts.lookup_threads) {
      HoldWindow hold(m.svc());
      const double r = LookupRateOf(m.svc(), n, batch, threads, opts.seconds);
      std::fprintf(stderr, "    lookups batch %d, %d thread(s): %.0f keys/s\n",
                   batch, threads, r);
      out->lookups.push_back({batch, threads, r});
      if (threads <= cores) out->hold_lookup.Merge(hold.stats());
    }
  }
  // The tracker's own cost, where it is largest (a lock per key, no batch
  // to spread it over): off and on alternating, best of three each.
  double off = 0, on = 0;
  for (int rep = 0; rep < 3; ++rep) {
    LockHoldTracker::SetEnabled(false);
    off = std::max(off, LookupRateOf(m.svc(), n, 1, 1, opts.seconds / 2));
    LockHoldTracker::SetEnabled(true);
    on = std::max(on, LookupRateOf(m.svc(), n, 1, 1, opts.seconds / 2));
  }
  out->lookup_untracked_keys_per_s = off;
  out->lookup_tracked_keys_per_s = on;
  LockHoldTracker::SetCpuEnabled(true);
}

void MeasureHeartbeats(EnvelopeMaster& m, EnvelopeStep* out) {
  std::vector<double> lat;
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < m.nodes(); ++i) {
      NodeTasks tasks;
      const double t0 = NowSec();
      MustOk(m.svc().Heartbeat(m.node_id(i), 0, 16, &tasks), "Heartbeat");
      lat.push_back(NowSec() - t0);
    }
  }
  double sum = 0;
  for (double v : lat) sum += v;
  out->heartbeat_us = sum / double(lat.size()) * 1e6;
  out->heartbeat_p99_us = Percentile(lat, 99) * 1e6;
}

void MeasureHousekeep(EnvelopeMaster& m, EnvelopeStep* out) {
  // Past the once-a-second gate, so the round includes its full scans
  // (reaper, abandoned puts).
  m.clock().Advance(1001);
  m.HeartbeatAll(-1);
  HoldWindow hold(m.svc());
  const double t0 = NowSec();
  m.svc().Housekeep();
  out->housekeep_ms = Ms(NowSec() - t0);
  out->hold_housekeep = hold.stats();
}

void MeasureEviction(const EnvelopeOptions& opts, EnvelopeMaster& m, uint64_t n,
                     EnvelopeStep* out) {
  const uint64_t want = uint64_t(double(n) * opts.evict_share);
  HoldWindow hold(m.svc());
  const double t0 = NowSec();
  const uint64_t freed = m.svc().EvictBytes(want * kEnvelopeValueBytes);
  out->evict_ms = Ms(NowSec() - t0);
  out->hold_evict = hold.stats();
  out->evicted_objects = freed / kEnvelopeValueBytes;
}

void MeasureNodeDeath(const EnvelopeOptions& opts, EnvelopeMaster& m,
                      uint64_t n, EnvelopeStep* out) {
  out->node_objects =
      opts.big_share_every > 0 ? n / uint64_t(opts.big_share_every) : 0;
  // Node 0 falls silent; the others beat every half second of the fake
  // clock until housekeeping declares it dead. The round that does is the
  // figure (the others only tick the liveness clock).
  HoldWindow hold(m.svc());
  double worst = 0;
  for (int round = 0; round < 200; ++round) {
    m.clock().Advance(500);
    m.HeartbeatAll(0);
    const double t0 = NowSec();
    m.svc().Housekeep();
    worst = std::max(worst, NowSec() - t0);
    // Declared dead: its segment is gone (a beat would count as one).
    if (m.svc().segments().Info(m.segment_of(0)) == nullptr) break;
  }
  out->node_death_ms = Ms(worst);
  out->hold_node_death = hold.stats();
}

}  // namespace

void RunStep(const EnvelopeOptions& opts, uint64_t n, EnvelopeStep* out) {
  out->objects = n;
  LockHoldTracker::SetEnabled(true);
  const uint64_t heap0 = HeapInUse();
  const uint64_t rss0 = RssBytes();
  auto m = std::make_unique<EnvelopeMaster>(opts.nodes, opts.big_share_every,
                                            /*remount=*/false);
  std::fprintf(stderr, "  [fill] %lu objects on %d nodes\n", n, opts.nodes);
  const uint64_t window = std::min(opts.put_window, n);
  std::vector<double> put_lat;
  HoldWindow fill_hold(m->svc());
  const double t0 = NowSec();
  std::vector<double> fill_lat;  // for the slowest batch of the whole fill
  m->Fill(0, n - window, 128, &fill_lat);
  const double t1 = NowSec();
  m->Fill(n - window, n, 128, &put_lat);
  out->fill_s = NowSec() - t0;
  out->hold_fill = fill_hold.stats();
  out->put_batch = 128;
  out->put_keys_per_s = double(window) / (NowSec() - t1);
  out->put_p50_us = Percentile(put_lat, 50) * 1e6;
  out->put_p99_us = Percentile(put_lat, 99) * 1e6;
  out->put_max_us =
      std::max(Percentile(put_lat, 100), Percentile(fill_lat, 100)) * 1e6;
  out->bytes_per_object = double(HeapInUse() - heap0) / double(n);
  out->rss_bytes_per_object = double(RssBytes() - rss0) / double(n);
  std::fprintf(stderr, "  [memory] %.1f B/object heap, %.1f RSS\n",
               out->bytes_per_object, out->rss_bytes_per_object);
  std::fprintf(stderr, "  [lookups]\n");
  MeasureLookups(opts, *m, n, out);
  std::fprintf(stderr, "  [heartbeat, housekeeping]\n");
  MeasureHeartbeats(*m, out);
  MeasureHousekeep(*m, out);
  std::fprintf(stderr, "  [eviction] %.0f%% of the objects\n",
               opts.evict_share * 100);
  MeasureEviction(opts, *m, n, out);
  std::fprintf(stderr, "  [node death] node 0 of %d\n", opts.nodes);
  MeasureNodeDeath(opts, *m, n, out);
}

void RunRestart(const EnvelopeOptions& opts, uint64_t n, EnvelopeStep* out) {
  LockHoldTracker::SetEnabled(true);
  EnvelopeMaster m(opts.nodes, 0, /*remount=*/true);
  std::fprintf(stderr, "  [restart] %lu objects re-registered by %d nodes\n", n,
               opts.nodes);
  // Node s holds keys s, s + nodes, ... at consecutive offsets, and sends
  // its directory in batches of 4096 sorted by offset, as kvpool-node does
  // (the gRPC hop is not in this figure: bench restart has it).
  constexpr uint64_t kBatch = 4096;
  const uint64_t nodes = uint64_t(opts.nodes);
  std::atomic<int> next_node{0};
  std::atomic<uint64_t> refused{0};
  HoldWindow hold(m.svc());
  const double t0 = NowSec();
  std::vector<std::thread> ts;
  for (int t = 0; t < opts.restart_threads; ++t) {
    ts.emplace_back([&] {
      std::vector<MemoryObjectIn> batch;
      for (int s; (s = next_node.fetch_add(1)) < opts.nodes;) {
        const uint64_t count = n / nodes + (uint64_t(s) < n % nodes ? 1 : 0);
        for (uint64_t j = 0; j < count || j == 0;) {
          batch.clear();
          const uint64_t end = std::min(count, j + kBatch);
          for (; j < end; ++j) {
            MemoryObjectIn o;
            o.key = EnvelopeKey(j * nodes + uint64_t(s));
            o.offset = j * kEnvelopeValueBytes;
            o.size = kEnvelopeValueBytes;
            o.version = j * nodes + uint64_t(s) + 1;
            batch.push_back(std::move(o));
          }
          auto codes = m.svc().RegisterMemoryObjects(
              m.node_id(s), m.segment_of(s), batch, /*done=*/j >= count);
          MustOk(codes.status(), "RegisterMemoryObjects");
          for (ErrorCode c : codes.value()) refused += c != ErrorCode::OK;
          if (count == 0) break;
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  out->restart_s = NowSec() - t0;
  out->hold_restart = hold.stats();
  out->restart_objects = n - refused.load();
  // Served: a sample of keys is found again.
  BatchQueryResult q;
  std::vector<std::string> sample;
  for (uint64_t i = 0; i < 1000; ++i)
    sample.push_back(EnvelopeKey(i * n / 1000));
  m.svc().QueryReadOnlyBatch("", sample, &q);
  for (const auto& item : q.items) {
    if (item.code != ErrorCode::OK) {
      std::fprintf(stderr, "bench: a re-registered key is not served\n");
      std::exit(1);
    }
  }
}

}  // namespace kvpool::bench
