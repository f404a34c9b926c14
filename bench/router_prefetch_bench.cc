// kvpool bench router-prefetch: what the router-triggered prefetch buys a
// get, and how fast one holder promotes, on LocalClusters with the SSD tier
// on, a PREFETCH_BUFFER per holder and the main DRAM held just under its
// high watermark by resident filler (the RFC's "moderate pressure").
//
// (a) Share of gets served from DRAM as a function of the trigger->get
//     window (0, 20, 50, 100, 200, 500 ms): each request triggers
//     BatchPrefetchToMemory for `blocks` fresh SSD-only keys, waits the
//     window, then gets them one after the other. A get is a DRAM hit when
//     it did not grow Client::counters().ssd_bytes_read. Columns are holder
//     configurations: promotions on the long-poll heartbeat, on the pull
//     thread (100 ms, 32 per pull) with the sequential worker, and on the
//     pull thread with batched SSD reads. The baseline is window 0.
// (b) Promotions per second of one holder for `rate_keys` 1 MiB blocks
//     triggered at once, against the RFC's single-worker ceiling of
//     100-200 keys/s, sequential worker vs batched reads.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "bench/bench_main.h"
#include "bench/ssd_bench.h"
#include "bench/svg_chart.h"
#include "benchutil/bench_keys.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "node/node.h"
#include "replay/cpu_usage.h"
#include "storage/aligned_buffer.h"
#include "storage/file_storage.h"

namespace kvpool {

namespace {

using bench::CountTier;
using bench::MakeSsdOnly;
using bench::MustOk;
using bench::NowSec;
using bench::Percentile;
using bench::Value;
using bench::WaitFor;

constexpr int kWindowsMs[] = {0, 20, 50, 100, 200, 500};

struct HolderMode {
  std::string name;
  bool pull;
  int64_t read_batch;
  int64_t max_per_pull = 32;
  uint64_t inflight_bytes = 0;  // > 0: the pipelined promotion executor
  int workers = 4;
  uint64_t staging_bytes = 0;  // > 0: huge-page staging pool for the reads
  // Reads the holder keeps at the disk at once, for fio's queue depth.
  int Depth(uint64_t value) const {
    if (inflight_bytes == 0) return int(read_batch);
    return int(std::max<uint64_t>(
        1, std::min<uint64_t>(inflight_bytes / value,
                              uint64_t(workers) * uint64_t(read_batch))));
  }
};

const HolderMode kShareModes[] = {
    {"heartbeat", false, 1},
    {"pull-seq", true, 1},
    {"pull-batch8", true, 8},
};

const HolderMode kRateModes[] = {
    {"heartbeat", false, 1},
    {"pull-seq", true, 1},
    {"pull-batch8", true, 8},
    {"pull-batch32", true, 32},
    // The RFC's cadence caps a pull worker at max_per_pull / interval
    // (320 keys/s): a larger take shows what batching itself can do.
    {"pull-b32-take128", true, 32, 128},
    // The pipelined executor (issue #14), tasks delivered by the heartbeat
    // (no pull cadence cap): workers x batch 8, bytes in flight bounded.
    {"pipe-8MiB", false, 8, 32, 8ull << 20},
    {"pipe-16MiB", false, 8, 32, 16ull << 20},
    {"pipe-32MiB", false, 8, 32, 32ull << 20},
    {"pipe-32MiB-b16", false, 16, 32, 32ull << 20},
    {"pipe-32MiB-w8", false, 8, 32, 32ull << 20, 8},
    // The same executor fed by the pull thread (100 ms cadence): it pulls
    // again as soon as its workers free half its queue.
    {"pull-pipe-32MiB-w8", true, 8, 32, 32ull << 20, 8},
    // More workers than the budget's batches: a worker's RPCs overlap the
    // others' reads, so the disk sees the whole budget more of the time.
    {"pipe-16MiB-w8-b2", false, 2, 32, 16ull << 20, 8},
    {"pipe-32MiB-w16-b4", false, 4, 32, 32ull << 20, 16},
    // One read per batch: the budget's reads are replaced one by one as
    // they end, as fio's are, instead of a batch's at its slowest read.
    {"pipe-32MiB-w32-b1", false, 1, 32, 32ull << 20, 32},
    {"pipe-64MiB-w16-b4", false, 4, 32, 64ull << 20, 16},
    // Twice the batches the rings can read at once: while some batches are
    // in their master round trips, the others keep the rings busy.
    {"pipe-64MiB-w8", false, 8, 32, 64ull << 20, 8},
    {"pipe-64MiB-w1", false, 8, 32, 64ull << 20, 1},
    {"pipe-128MiB-w16", false, 8, 32, 128ull << 20, 16},
    // The same with the reads staged in huge pages and copied, instead of
    // read into the (4 KiB-page) segment in place.
    {"pipe-32MiB-w8-huge", false, 8, 32, 32ull << 20, 8, 32ull << 20},
    {"pipe-32MiB-huge", false, 8, 32, 32ull << 20, 4, 32ull << 20},
};

// /proc/meminfo's ShmemHugePages, as printed there ("? kB" if unreadable).
std::string ShmemHugePages() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ShmemHugePages:", 0) == 0) {
      const size_t v = line.find_first_not_of(' ', line.find(':') + 1);
      return v == std::string::npos ? line : line.substr(v);
    }
  }
  return "? kB";
}

LocalClusterOptions ClusterOptions(const BenchOptions& opts,
                                   const std::string& root,
                                   const HolderMode& mode, int nodes,
                                   uint64_t buffer) {
  LocalClusterOptions o;
  o.num_nodes = nodes;
  o.segment_size = opts.node_dram_bytes;
  o.enable_ssd = true;
  o.ssd_root = root;
  o.ssd_capacity_bytes = 4ull << 30;
  o.ssd_segment_file_size = 64ull << 20;
  o.heartbeat_interval_ms = 200;
  o.default_kv_lease_ttl = 2000;  // a loaded 2-core box can stall an RPC
  o.enable_prefetch_trigger = true;
  // Covers the longest window and the gets; consumed blocks then leave the
  // buffer by its own eviction.
  o.prefetch_trigger_lease_ttl_ms = 1500;
  o.prefetch_buffer_size = buffer;
  o.promotion_pull = mode.pull;
  o.promotion_read_batch = mode.read_batch;
  o.promotion_max_per_pull = mode.max_per_pull;
  o.promotion_inflight_bytes = mode.inflight_bytes;
  o.promotion_workers = mode.workers;
  o.promotion_staging_bytes = mode.staging_bytes;
  o.segment_dir = opts.segment_dir;
  return o;
}

// Puts resident filler until the main DRAM is between 85% and 90% full:
// the watermark gate still admits prefetches, and a put would evict.
uint64_t HoldMainNearWatermark(Client& c, uint64_t value) {
  uint64_t n = 0;
  for (;;) {
    auto r = c.Stat();
    if (!r.ok()) return n;
    uint64_t used = 0, cap = 0;
    for (const auto& s : r->segments) {
      if (s.kind != "main") continue;
      used += s.used;
      cap += s.capacity;
    }
    if (cap == 0 || double(used + value) > 0.88 * double(cap)) return n;
    MustOk(c.Put(fmt::format("resident-{}", n), Value(n, value)),
           "resident put");
    ++n;
  }
}

double MainRatio(Client& c) {
  auto r = c.Stat();
  if (!r.ok()) return 0;
  uint64_t used = 0, cap = 0;
  for (const auto& s : r->segments) {
    if (s.kind != "main") continue;
    used += s.used;
    cap += s.capacity;
  }
  return cap ? double(used) / double(cap) : 0;
}

// ---------------------------------------------------------- (a) window

struct ShareCell {
  int window_ms = 0;
  std::string mode;
  int keys = 0, dram_hits = 0, errors = 0;
  int queued = 0, throttled = 0;
  double mean_effective_window_ms = 0;
  double get_p50_ms = 0;
  double Share() const { return keys ? double(dram_hits) / keys : 0; }
};

std::vector<ShareCell> RunShare(const BenchOptions& opts,
                                const std::string& root, const HolderMode& mode,
                                double* main_ratio) {
  const int requests = std::max(1, opts.router_requests);
  const int blocks = std::max(1, opts.router_blocks);
  // The buffer holds what arrives during one lease (the RFC's sizing,
  // window x rate x block, with the lease as the window): here up to ~40
  // blocks per second per holder for 1.5 s.
  LocalCluster cluster(ClusterOptions(
      opts, root, mode, 2, uint64_t(blocks) * 16 * opts.router_block_bytes));
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    return {};
  }
  auto c = cluster.NewClient().value();
  const int per_window = requests * blocks;
  auto pool = MakeSsdOnly(*c, "rp-" + mode.name,
                          per_window * int(std::size(kWindowsMs)),
                          opts.router_block_bytes, 2 * opts.node_dram_bytes);
  // Removed filler frees its DRAM only once its leases end.
  bench::WaitDramFree(*c, 0.5, 10);
  uint64_t resident = HoldMainNearWatermark(*c, opts.router_block_bytes);
  *main_ratio = MainRatio(*c);
  std::fprintf(stderr,
               "  %s: %zu SSD-only keys, %lu resident, main at %.0f%%\n",
               mode.name.c_str(), pool.size(), resident, 100 * *main_ratio);
  storage::AlignedBuffer buf(opts.router_block_bytes);
  std::vector<ShareCell> out;
  size_t next = 0;
  for (int window : kWindowsMs) {
    ShareCell cell;
    cell.window_ms = window;
    cell.mode = mode.name;
    std::vector<double> lat_ms;
    double window_sum = 0;
    for (int r = 0; r < requests; ++r) {
      if (next + size_t(blocks) > pool.size()) break;
      std::vector<std::string> keys(pool.begin() + long(next),
                                    pool.begin() + long(next + blocks));
      next += size_t(blocks);
      auto st = c->BatchPrefetchToMemory(keys);
      double triggered = NowSec();
      if (!st.ok()) {
        cell.errors += blocks;
        continue;
      }
      for (auto s : st.value()) {
        cell.queued += s == PrefetchToMemoryStatus::kQueued;
        cell.throttled += s == PrefetchToMemoryStatus::kThrottledWatermark ||
                          s == PrefetchToMemoryStatus::kThrottledCap;
      }
      // The window is the variable under test: sleeping is the measurement.
      std::this_thread::sleep_for(std::chrono::milliseconds(window));
      for (const auto& k : keys) {
        uint64_t before = c->counters().ssd_bytes_read;
        double t = NowSec();
        window_sum += (t - triggered) * 1e3;
        auto got = c->GetInto(k, buf.data(), buf.size());
        lat_ms.push_back((NowSec() - t) * 1e3);
        if (!got.ok() || got.value() != opts.router_block_bytes) {
          std::fprintf(
              stderr, "    get %s: %s\n", k.c_str(),
              got.ok() ? "short read" : got.status().ToString().c_str());
          ++cell.errors;
          continue;
        }
        ++cell.keys;
        cell.dram_hits += c->counters().ssd_bytes_read == before;
      }
      // Let this request's promotions finish before the next one starts.
      auto& svc = cluster.master().service();
      WaitFor(10, [&] { return svc.promotion_counters().in_flight == 0; });
    }
    cell.mean_effective_window_ms =
        cell.keys ? window_sum / double(cell.keys + cell.errors) : 0;
    cell.get_p50_ms = Percentile(lat_ms, 50);
    std::fprintf(stderr,
                 "  %-11s window %3d ms: %2d/%2d gets from DRAM (queued %d, "
                 "throttled %d), get p50 %.3f ms\n",
                 mode.name.c_str(), window, cell.dram_hits, cell.keys,
                 cell.queued, cell.throttled, cell.get_p50_ms);
    out.push_back(cell);
  }
  c.reset();
  cluster.Stop();
  return out;
}

// ------------------------------------------------------------ (b) rate

struct RateRow {
  std::string mode;
  int keys = 0;
  int queued = 0;
  int promoted = 0;
  double seconds = 0;
  bool settled = true;  // main DRAM below the watermark before triggering
  int depth = 1;
  double fio_blocks_per_s = 0;  // fio at the same block size and depth
  double fio_read_ms = 0;       // ... its mean read, submission to completion
  std::string fio_error;
  // The holder's disk reads while it promoted (IoBackend::read_timing):
  // mean read time, and mean reads in flight (summed read time / seconds).
  double read_ms = 0, in_flight = 0;
  // A cell whose triggers were throttled measured the throttle, not a rate.
  bool Throttled() const { return queued < keys; }
  // 1 MiB puts (with their offloads) issued while the promotions ran, and
  // as many afterwards on the same cluster without promotions.
  int puts = 0;
  double put_p50_ms = 0, put_p99_ms = 0;
  double quiet_put_p50_ms = 0, quiet_put_p99_ms = 0;
  double KeysPerSec() const { return seconds > 0 ? promoted / seconds : 0; }
};

RateRow RunRate(const BenchOptions& opts, const std::string& root,
                const HolderMode& mode) {
  RateRow row;
  row.mode = mode.name;
  const int n = std::max(1, opts.router_rate_keys);
  const uint64_t value = 1ull << 20;
  // One holder: every key's SSD copy is on it, and its buffer takes them all.
  LocalCluster cluster(
      ClusterOptions(opts, root, mode, 1, uint64_t(n + 8) * value * 10 / 9));
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    return row;
  }
  auto c = cluster.NewClient().value();
  auto keys =
      MakeSsdOnly(*c, "rate-" + mode.name, n, value, opts.node_dram_bytes);
  row.keys = int(keys.size());
  bench::WaitDramFree(*c, 0.5, 10);
  // The filler's eviction must be over, or every trigger is throttled.
  row.settled = WaitFor(60, [&] { return MainRatio(*c) < 0.85; });
  auto& svc = cluster.master().service();
  const uint64_t base = svc.promotion_counters().completed;
  auto putter = cluster.NewClient().value();
  std::vector<double> under, quiet;
  std::atomic<bool> promoting{true};
  std::atomic<int> put_failures{0};
  std::thread puts([&] {
    for (int i = 0; opts.router_rate_puts && promoting.load() && i < 1000;
         ++i) {
      const double t = NowSec();
      if (!putter
               ->Put(fmt::format("put-under-{}", i), Value(uint64_t(i), value))
               .ok())
        ++put_failures;
      under.push_back((NowSec() - t) * 1e3);
    }
  });
  // How the tasks travelled: beats and pulls the master answered while
  // the holder promoted (a beat answered at once per task is a spin).
  auto calls = [&](const char* method) {
    return svc.metrics().HistogramCount("kvpool_master_rpc_duration_seconds",
                                        fmt::format("method=\"{}\"", method));
  };
  const uint64_t beats0 = calls("Heartbeat");
  const uint64_t pulls0 = calls("PullPromotionTasks");
  // Which threads use the 2 cores while the holder promotes.
  const replay::CpuReading cpu0 = replay::ReadCpu();
  auto disk_reads = [&] {
    storage::IoReadTiming sum;
    for (size_t i = 0; i < cluster.num_nodes(); ++i) {
      SsdTier* t = cluster.node(i).ssd();
      if (t == nullptr || t->storage() == nullptr) continue;
      const auto r = t->storage()->io_read_timing();
      sum.reads += r.reads;
      sum.read_ns += r.read_ns;
    }
    return sum;
  };
  const storage::IoReadTiming reads0 = disk_reads();
  double t0 = NowSec();
  for (size_t start = 0; start < keys.size(); start += 64) {
    std::vector<std::string> chunk(
        keys.begin() + long(start),
        keys.begin() + long(std::min(keys.size(), start + 64)));
    auto st = c->BatchPrefetchToMemory(chunk);
    if (!st.ok()) continue;
    for (auto s : st.value())
      row.queued += s == PrefetchToMemoryStatus::kQueued;
  }
  WaitFor(120, [&] { return svc.promotion_counters().in_flight == 0; });
  row.seconds = NowSec() - t0;
  const replay::CpuReading cpu1 = replay::ReadCpu();
  const storage::IoReadTiming reads1 = disk_reads();
  if (reads1.reads > reads0.reads && row.seconds > 0) {
    const double ns = double(reads1.read_ns - reads0.read_ns);
    row.read_ms = ns / 1e6 / double(reads1.reads - reads0.reads);
    row.in_flight = ns / 1e9 / row.seconds;
  }
  row.promoted = int(svc.promotion_counters().completed - base);
  const uint64_t beats = calls("Heartbeat") - beats0;
  const uint64_t pulls = calls("PullPromotionTasks") - pulls0;
  promoting = false;
  puts.join();
  for (size_t i = 0; i < under.size(); ++i) {
    const double t = NowSec();
    if (!putter->Put(fmt::format("put-quiet-{}", i), Value(uint64_t(i), value))
             .ok())
      ++put_failures;
    quiet.push_back((NowSec() - t) * 1e3);
  }
  row.puts = int(under.size());
  if (put_failures > 0) {
    // Their latencies are in the rows: say so rather than pass them off.
    std::fprintf(stderr, "warning: %d of %zu timed puts failed\n",
                 put_failures.load(), 2 * under.size());
  }
  if (!under.empty()) {
    row.put_p50_ms = Percentile(under, 50);
    row.put_p99_ms = Percentile(under, 99);
    row.quiet_put_p50_ms = Percentile(quiet, 50);
    row.quiet_put_p99_ms = Percentile(quiet, 99);
  }
  putter.reset();
  std::fprintf(stderr,
               "  %-12s %d/%d keys queued, %d promoted in %.2f s: %.0f keys/s "
               "(main at %.0f%%)\n",
               mode.name.c_str(), row.queued, row.keys, row.promoted,
               row.seconds, row.KeysPerSec(), 100 * MainRatio(*c));
  // Where the workers' time went, summed over the holders (the chain's
  // steps; docs/ssd_tier.md).
  {
    std::string phases;
    for (const char* phase :
         {"alloc", "read", "write", "notify", "held_budget", "held_offload"}) {
      uint64_t us = 0;
      for (size_t i = 0; i < cluster.num_nodes(); ++i) {
        if (SsdTier* t = cluster.node(i).ssd()) {
          us += t->metrics().CounterValue(
              "kvpool_node_promotion_phase_microseconds_total",
              fmt::format("phase=\"{}\"", phase));
        }
      }
      phases += fmt::format(" {} {:.2f} s", phase, double(us) / 1e6);
    }
    // A huge tmpfs falls back to 4 KiB pages where the kernel has no free
    // 2 MiB page, and a 1 MiB read into those is two disk requests: say how
    // much shared memory is in huge pages now, for cells that differ.
    std::fprintf(stderr, "  %-12s worker time:%s; shmem in huge pages %s\n",
                 mode.name.c_str(), phases.c_str(), ShmemHugePages().c_str());
    std::fprintf(stderr,
                 "  %-12s disk reads while promoting: mean %.2f ms each "
                 "(submission to completion), %.1f in flight on average\n",
                 mode.name.c_str(), row.read_ms, row.in_flight);
    std::fprintf(stderr,
                 "  %-12s master calls while promoting: %llu Heartbeat, %llu "
                 "PullPromotionTasks\n",
                 mode.name.c_str(), static_cast<unsigned long long>(beats),
                 static_cast<unsigned long long>(pulls));
    // Process CPU over the promotion, by thread name, largest first: near
    // 2 cores means the holder is bound by CPU here, not by the disk.
    const double total = cpu1.process_s - cpu0.process_s;
    std::map<std::string, double> by_name;
    for (const auto& [thread, s] : cpu1.threads) {
      auto it = cpu0.threads.find(thread);
      by_name[thread.second] += s - (it == cpu0.threads.end() ? 0 : it->second);
    }
    std::vector<std::pair<double, std::string>> top;
    for (const auto& [name, s] : by_name) top.emplace_back(s, name);
    std::sort(top.rbegin(), top.rend());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(top.size(), 6); ++i)
      names += fmt::format("{}{} {:.2f}", i ? ", " : "", top[i].second,
                           top[i].first);
    std::fprintf(stderr,
                 "  %-12s CPU while promoting: %.2f s in %.2f s (%.2f cores; "
                 "%.0f us per promoted block): %s\n",
                 mode.name.c_str(), total, row.seconds,
                 row.seconds > 0 ? total / row.seconds : 0.0,
                 row.promoted > 0 ? 1e6 * total / row.promoted : 0.0,
                 names.c_str());
  }
  // fio on the same holder's SSD files, at the block size and the number
  // of reads the holder keeps in flight.
  row.depth = mode.Depth(value);
  // Stopped first: a running holder's SSD garbage collection and eviction
  // delete segment files while fio would read them.
  c.reset();
  cluster.Stop();
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.file_size() >= value) {
      files.push_back(e.path().string());
    }
  }
  auto fio = RunFioRandRead("fio", files, value, row.depth, 2.0, root);
  if (fio.ok()) {
    row.fio_blocks_per_s = fio->mbps * 1e6 / double(value);
    row.fio_read_ms = fio->mean_read_ms;
  } else {
    row.fio_error = fio.status().ToString();
    std::fprintf(stderr, "  %-12s fio (%zu files): %s\n", mode.name.c_str(),
                 files.size(), row.fio_error.c_str());
  }
  return row;
}

// The median over rounds of each mode's cell: keys/s, fio and put
// latencies each by its own median; queued/promoted/keys from the round
// whose rate is the median.
std::vector<RateRow> MedianRows(
    const std::vector<std::vector<RateRow>>& by_round) {
  std::vector<RateRow> out;
  if (by_round.empty()) return out;
  for (size_t m = 0; m < by_round[0].size(); ++m) {
    std::vector<const RateRow*> cells;
    for (const auto& round : by_round) cells.push_back(&round[m]);
    std::sort(cells.begin(), cells.end(),
              [](const RateRow* a, const RateRow* b) {
                return a->KeysPerSec() < b->KeysPerSec();
              });
    RateRow r = *cells[cells.size() / 2];
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const auto* c : cells) v.push_back(field(*c));
      return Percentile(v, 50);
    };
    r.fio_blocks_per_s =
        median([](const RateRow& c) { return c.fio_blocks_per_s; });
    r.put_p50_ms = median([](const RateRow& c) { return c.put_p50_ms; });
    r.put_p99_ms = median([](const RateRow& c) { return c.put_p99_ms; });
    r.quiet_put_p50_ms =
        median([](const RateRow& c) { return c.quiet_put_p50_ms; });
    r.quiet_put_p99_ms =
        median([](const RateRow& c) { return c.quiet_put_p99_ms; });
    out.push_back(r);
  }
  return out;
}

void PrintRates(const BenchOptions& opts, const std::vector<RateRow>& rates,
                const std::vector<std::vector<RateRow>>& by_round) {
  std::printf(
      "\n(b) promotions per second of one holder, %d x 1 MiB blocks "
      "triggered at once (RFC single-worker ceiling: 100-200 keys/s)\n",
      opts.router_rate_keys);
  std::printf("%-17s %9s %9s %10s %12s %6s %12s %8s %22s %18s\n", "holder",
              "keys", "promoted", "seconds", "keys/s", "depth", "fio_blk/s",
              "vs_fio", "put p50/p99 promoting", "put p50/p99 quiet");
  for (const auto& r : rates) {
    std::string rate =
        r.Throttled() ? fmt::format("throttled ({}/{} queued{})", r.queued,
                                    r.keys, r.settled ? "" : ", not settled")
                      : fmt::format("{:.0f}", r.KeysPerSec());
    std::string ratio =
        !r.Throttled() && r.fio_blocks_per_s > 0
            ? fmt::format("{:.0f}%", 100 * r.KeysPerSec() / r.fio_blocks_per_s)
            : "-";
    std::printf(
        "%-17s %9d %9d %10.2f %12s %6d %12.0f %8s %22s %18s\n", r.mode.c_str(),
        r.keys, r.promoted, r.seconds, rate.c_str(), r.depth,
        r.fio_blocks_per_s, ratio.c_str(),
        fmt::format("{:.1f}/{:.1f} ms (n={})", r.put_p50_ms, r.put_p99_ms,
                    r.puts)
            .c_str(),
        fmt::format("{:.1f}/{:.1f} ms", r.quiet_put_p50_ms, r.quiet_put_p99_ms)
            .c_str());
    if (!r.fio_error.empty()) {
      std::printf("  fio: %s\n", r.fio_error.c_str());
    }
  }
  if (rates.size() == std::size(kRateModes) && rates[1].KeysPerSec() > 0) {
    std::printf(
        "ratio to the sequential pull worker: batch8 %.2fx, batch32 %.2fx, "
        "batch32 taking 128 per pull %.2fx, heartbeat delivery %.2fx\n",
        rates[2].KeysPerSec() / rates[1].KeysPerSec(),
        rates[3].KeysPerSec() / rates[1].KeysPerSec(),
        rates[4].KeysPerSec() / rates[1].KeysPerSec(),
        rates[0].KeysPerSec() / rates[1].KeysPerSec());
    std::printf(
        "pull-* take at most 32 tasks per 100 ms pull (a 320 keys/s cap) "
        "unless named otherwise; batchN = N SSD reads per submission and "
        "one AllocStart/Notify round trip per N keys.\n");
  }

  if (by_round.size() > 1) {
    std::printf(
        "\n%zu rounds (modes take turns in each, fio right after each cell); "
        "the rows above are medians. Per round, keys/s / fio blocks/s "
        "(mean disk read ms, holder / fio; reads in flight, holder / fio's "
        "depth):\n",
        by_round.size());
    for (size_t m = 0; m < rates.size(); ++m) {
      std::vector<double> ratios;
      std::string line;
      for (const auto& round : by_round) {
        const RateRow& c = round[m];
        if (c.Throttled() || c.fio_blocks_per_s <= 0) {
          line += " -";
          continue;
        }
        ratios.push_back(c.KeysPerSec() / c.fio_blocks_per_s);
        line +=
            fmt::format(" {:.0f}/{:.0f}={:.0f}% ({:.1f}/{:.1f} ms, {:.1f}/{})",
                        c.KeysPerSec(), c.fio_blocks_per_s, 100 * ratios.back(),
                        c.read_ms, c.fio_read_ms, c.in_flight, c.depth);
      }
      std::printf(
          "%-17s median ratio %s:%s\n", rates[m].mode.c_str(),
          ratios.empty()
              ? "-"
              : fmt::format("{:.0f}%", 100 * Percentile(ratios, 50)).c_str(),
          line.c_str());
    }
  }
}

}  // namespace

int RunRouterPrefetchBench(const BenchOptions& opts) {
  std::string root =
      fmt::format("{}/kvpool-router-prefetch-{}",
                  opts.dir.empty() ? "/tmp" : opts.dir, getpid());
  std::filesystem::create_directories(root);
  double t0 = NowSec();
  std::vector<ShareCell> share;
  std::vector<double> main_ratios;
  std::vector<HolderMode> rate_modes;
  for (const auto& m : kRateModes) {
    if (opts.router_rate_modes.empty() ||
        std::find(opts.router_rate_modes.begin(), opts.router_rate_modes.end(),
                  m.name) != opts.router_rate_modes.end()) {
      rate_modes.push_back(m);
    }
  }
  if (rate_modes.size() < std::max<size_t>(1, opts.router_rate_modes.size())) {
    std::fprintf(stderr, "unknown holder mode in --rate_modes; known:");
    for (const auto& m : kRateModes)
      std::fprintf(stderr, " %s", m.name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const int rounds = std::max(1, opts.router_rate_rounds);
  int step = 0;
  const int steps = (opts.router_rate_only ? 0 : int(std::size(kShareModes))) +
                    rounds * int(rate_modes.size());
  for (const auto& mode : kShareModes) {
    if (opts.router_rate_only) break;
    std::fprintf(stderr, "[%d/%d] DRAM share vs window, holder %s\n", ++step,
                 steps, mode.name.c_str());
    double ratio = 0;
    auto cells = RunShare(opts, root + "/share-" + mode.name, mode, &ratio);
    main_ratios.push_back(ratio);
    share.insert(share.end(), cells.begin(), cells.end());
  }
  // rounds[r][m]: round r of mode m. Modes take turns within a round, so a
  // drifting disk moves every mode's cells alike.
  std::vector<std::vector<RateRow>> by_round;
  for (int r = 0; r < rounds; ++r) {
    by_round.emplace_back();
    for (const auto& mode : rate_modes) {
      std::fprintf(stderr, "[%d/%d] promotion rate, holder %s (round %d)\n",
                   ++step, steps, mode.name.c_str(), r + 1);
      by_round.back().push_back(RunRate(
          opts, fmt::format("{}/rate-{}-{}", root, mode.name, r), mode));
      std::filesystem::remove_all(
          fmt::format("{}/rate-{}-{}", root, mode.name, r));
    }
  }
  std::filesystem::remove_all(root);
  std::fprintf(stderr, "done in %.1f s\n", NowSec() - t0);
  const std::vector<RateRow> rates = MedianRows(by_round);
  if ((!opts.router_rate_only && share.empty()) || rates.empty()) return 1;
  if (opts.router_rate_only) {
    PrintRates(opts, rates, by_round);
    return 0;
  }

  std::printf(
      "\nkvpool bench router-prefetch: 2 nodes x %s main DRAM held at "
      "%.0f-%.0f%% by resident keys, PREFETCH_BUFFER per holder, %s blocks\n",
      FormatSize(opts.node_dram_bytes).c_str(),
      100 * *std::min_element(main_ratios.begin(), main_ratios.end()),
      100 * *std::max_element(main_ratios.begin(), main_ratios.end()),
      FormatSize(opts.router_block_bytes).c_str());
  std::printf(
      "\n(a) gets served from DRAM vs trigger->get window (%d requests x %d "
      "fresh SSD-only blocks per cell)\n",
      opts.router_requests, opts.router_blocks);
  std::printf("%-10s", "window_ms");
  for (const auto& m : kShareModes) std::printf(" %16s", m.name.c_str());
  std::printf(" | get p50 ms:");
  for (const auto& m : kShareModes) std::printf(" %11s", m.name.c_str());
  std::printf("\n");
  int errors = 0, throttled = 0;
  for (int w : kWindowsMs) {
    std::printf("%-10d", w);
    std::vector<const ShareCell*> row;
    for (const auto& m : kShareModes) {
      for (const auto& c : share) {
        if (c.window_ms == w && c.mode == m.name) row.push_back(&c);
      }
    }
    for (const auto* c : row) {
      std::printf(" %16s", fmt::format("{}/{} {:.0f}%", c->dram_hits, c->keys,
                                       100 * c->Share())
                               .c_str());
      errors += c->errors;
      throttled += c->throttled;
    }
    std::printf(" |            ");
    for (const auto* c : row) std::printf(" %11.3f", c->get_p50_ms);
    std::printf("\n");
  }
  std::printf(
      "baseline: window 0 (the get right after the trigger, i.e. no time to "
      "promote). DRAM hit = the get did not grow ssd_bytes_read.\n"
      "Block i of a request is read after the window plus i earlier gets; "
      "errors %d, throttled triggers %d.\n",
      errors, throttled);

  PrintRates(opts, rates, by_round);

  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "{\"share\":[";
    for (size_t i = 0; i < share.size(); ++i) {
      const auto& c = share[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"window_ms":{},"mode":"{}","keys":{},"dram_hits":{},)"
                 R"("share":{:.3f},"queued":{},"throttled":{},)"
                 R"("mean_effective_window_ms":{:.1f},"get_p50_ms":{:.3f},)"
                 R"("errors":{}}})",
                 c.window_ms, c.mode, c.keys, c.dram_hits, c.Share(), c.queued,
                 c.throttled, c.mean_effective_window_ms, c.get_p50_ms,
                 c.errors);
    }
    out << "],\"rate\":[";
    for (size_t i = 0; i < rates.size(); ++i) {
      const auto& r = rates[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"mode":"{}","keys":{},"queued":{},"promoted":{},)"
                 R"("seconds":{:.3f},"keys_per_sec":{:.1f},"throttled":{},)"
                 R"("depth":{},"fio_blocks_per_sec":{:.1f},)"
                 R"("read_ms":{:.3f},"in_flight":{:.2f},"fio_read_ms":{:.3f},)"
                 R"("puts":{},)"
                 R"("put_p50_ms":{:.3f},"put_p99_ms":{:.3f},)"
                 R"("quiet_put_p50_ms":{:.3f},"quiet_put_p99_ms":{:.3f}}})",
                 r.mode, r.keys, r.queued, r.promoted, r.seconds,
                 r.Throttled() ? 0.0 : r.KeysPerSec(),
                 r.Throttled() ? "true" : "false", r.depth, r.fio_blocks_per_s,
                 r.read_ms, r.in_flight, r.fio_read_ms, r.puts, r.put_p50_ms,
                 r.put_p99_ms, r.quiet_put_p50_ms, r.quiet_put_p99_ms);
    }
    out << "]}\n";
  }
  if (!opts.svg_path.empty()) {
    std::vector<bench::LineSeries> series;
    for (const auto& m : kShareModes) {
      bench::LineSeries s{m.name, {}};
      for (const auto& c : share) {
        if (c.mode == m.name)
          s.points.emplace_back(std::log10(1.0 + c.window_ms), 100 * c.Share());
      }
      series.push_back(std::move(s));
    }
    bench::WriteFile(
        opts.svg_path,
        bench::LineChartSvg(
            "gets served from DRAM vs trigger->get window",
            "log10(1 + window ms): 1.32 = 20, 1.71 = 50, 2 = 100, 2.3 = 200, "
            "2.7 = 500 ms",
            "% of gets from DRAM", series));
  }
  return errors > 0 ? 1 : 0;
}

}  // namespace kvpool
