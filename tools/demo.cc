#include "tools/demo.h"

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/size_parse.h"
#include "kvpool/local_cluster.h"

namespace kvpool {

namespace {
std::string ValueFor(int i, uint64_t size) {
  std::string v(size, '\0');
  std::mt19937_64 rng(static_cast<uint64_t>(i));
  for (size_t j = 0; j + 8 <= v.size(); j += 8) {
    uint64_t x = rng();
    std::memcpy(&v[j], &x, 8);
  }
  return v;
}
double Ms(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - a)
      .count();
}
}  // namespace

int RunDemo(const DemoOptions& opts) {
  LocalClusterOptions lco;
  lco.num_nodes = 2;
  lco.segment_size = 64ull << 20;
  // Each node spills to its own SSD directory, removed however the demo
  // ends (after the cluster has stopped: the guard is destroyed last).
  const std::string ssd_root = (std::filesystem::temp_directory_path() /
                                ("kvpool-demo-" + std::to_string(getpid())))
                                   .string();
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_ssd_root{ssd_root};
  lco.enable_ssd = true;
  lco.ssd_root = ssd_root;
  lco.ssd_capacity_bytes = 1ull << 30;
  lco.ssd_segment_file_size = 64ull << 20;
  // Short read leases so blocks read early can leave DRAM within the demo.
  lco.default_kv_lease_ttl = 300;
  LocalCluster cluster(lco);
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "== LocalCluster: master %s, 2 nodes x %s DRAM, SSD tier under %s\n",
      cluster.master_address().c_str(), FormatSize(lco.segment_size).c_str(),
      ssd_root.c_str());
  ClientConfig shm_cfg, tcp_cfg;
  shm_cfg.enable_ssd_prefetch = true;
  tcp_cfg.transport = TransportMode::kTcp;
  auto a = cluster.NewClient(shm_cfg);
  auto b = cluster.NewClient(tcp_cfg);
  if (!a.ok() || !b.ok()) return 1;
  Client& ca = *a.value();
  Client& cb = *b.value();

  // 1. Put a working set that fits (about 60% of the pool).
  int fit = static_cast<int>(0.6 * double(2 * lco.segment_size) /
                             double(opts.value_size));
  fit = std::min(fit, opts.keys);
  auto t0 = std::chrono::steady_clock::now();
  int put_ok = 0;
  for (int i = 0; i < fit; ++i) {
    std::string v = ValueFor(i, opts.value_size);
    put_ok += ca.Put("block-" + std::to_string(i), v).ok();
  }
  std::printf("put   %d/%d blocks of %s in %.1f ms\n", put_ok, fit,
              FormatSize(opts.value_size).c_str(), Ms(t0));

  // 2. Read every block back through both data paths and compare bytes.
  int shm_ok = 0, tcp_ok = 0;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < fit; ++i) {
    std::string want = ValueFor(i, opts.value_size);
    auto ra = ca.Get("block-" + std::to_string(i));
    shm_ok += ra.ok() && ra.value() == want;
    auto rb = cb.Get("block-" + std::to_string(i));
    tcp_ok += rb.ok() && rb.value() == want;
  }
  std::printf(
      "get   %d/%d correct via shared memory, %d/%d correct via TCP (%.1f "
      "ms)\n",
      shm_ok, fit, tcp_ok, fit, Ms(t0));

  // 3. Exist probes and the read-only tier lookup.
  std::vector<std::string> probe = {"block-0", "block-1", "no-such-block"};
  auto ex = ca.BatchIsExist(probe, ExistOptions{.grant_lease = false});
  std::printf("exist block-0=%d block-1=%d no-such-block=%d\n",
              ex[0].ok() && ex[0].value(), ex[1].ok() && ex[1].value(),
              ex[2].ok() && ex[2].value());
  auto tiers = ca.BatchGetReplicaDesc({"block-0", "block-1"});
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].ok() && !tiers[i]->replicas.empty()) {
      std::printf("tier  %s: %s on %s\n", probe[i].c_str(),
                  tiers[i]->BestTier().c_str(),
                  tiers[i]->replicas[0].node_id.c_str());
    }
  }

  // 4. Overflow the pool: eviction keeps DRAM under the watermark and puts
  // keep succeeding.
  int extra = std::max(opts.keys - fit,
                       static_cast<int>(1.0 * double(2 * lco.segment_size) /
                                        double(opts.value_size)));
  int extra_ok = 0;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < extra; ++i) {
    std::string v = ValueFor(100000 + i, opts.value_size);
    extra_ok += ca.Put("overflow-" + std::to_string(i), v).ok();
  }
  std::printf("put   %d/%d more blocks past capacity in %.1f ms\n", extra_ok,
              extra, Ms(t0));

  // 5. The first blocks now live only on SSD: still served (from the
  // holder's SSD), and an exist probe with prefetch brings them back.
  std::vector<std::string> early;
  for (int i = 0; i < 4 && i < fit; ++i)
    early.push_back("block-" + std::to_string(i));
  int on_ssd = 0;
  for (const auto& k : early) {
    auto t = ca.BatchGetReplicaDesc({k});
    on_ssd += t[0].ok() && t[0]->BestTier() == "local_disk";
  }
  uint64_t ssd_before = ca.counters().ssd_bytes_read;
  int early_ok = 0;
  for (size_t i = 0; i < early.size(); ++i) {
    auto r = ca.Get(early[i]);
    early_ok +=
        r.ok() && r.value() == ValueFor(static_cast<int>(i), opts.value_size);
  }
  std::printf(
      "ssd   %d/%zu early blocks were SSD-only; %d/%zu read back correct (%s "
      "from SSD)\n",
      on_ssd, early.size(), early_ok, early.size(),
      FormatSize(ca.counters().ssd_bytes_read - ssd_before).c_str());
  ExistOptions prefetch;
  prefetch.prefetch_to_memory = true;
  ca.BatchIsExist(early, prefetch);
  ca.WaitPrefetchIdle(10000);
  auto pst = ca.prefetch_stats();
  std::printf(
      "prefetch  triggers %lu, keys %lu, promoted %lu, already in DRAM %lu, "
      "failed %lu\n",
      pst.triggers, pst.keys_triggered, pst.completed, pst.already_resident,
      pst.failed);

  auto st = ca.Stat();
  if (st.ok()) {
    std::printf("stat  %lu objects, %lu evicted so far\n", st->objects,
                st->evictions);
    for (const auto& s : st->segments) {
      std::printf("      segment %lu on %s: %.1f%% used\n", s.segment_id,
                  s.node_id.c_str(),
                  100.0 * double(s.used) / double(s.capacity));
    }
  }
  auto c = ca.counters();
  auto cbc = cb.counters();
  std::printf(
      "bytes client A: shm read %s written %s | client B: tcp read %s written "
      "%s\n",
      FormatSize(c.shm_bytes_read).c_str(),
      FormatSize(c.shm_bytes_written).c_str(),
      FormatSize(cbc.tcp_bytes_read).c_str(),
      FormatSize(cbc.tcp_bytes_written).c_str());
  bool ok =
      put_ok == fit && shm_ok == fit && tcp_ok == fit && extra_ok == extra;
  std::printf("== demo %s\n", ok ? "OK" : "FAILED");
  cluster.Stop();
  return ok ? 0 : 1;
}

}  // namespace kvpool
