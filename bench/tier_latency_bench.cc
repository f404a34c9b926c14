// kvpool bench tier-latency: latency of one get by the tier it is served
// from, for 256 KiB and 1 MiB values on a LocalCluster with the SSD tier on:
//   dram (shm)     a key in memory, client TransportMode::kAuto
//   dram (tcp)     the same, kTcp: the DRAM counterpart of the remote SSD hit
//   ssd local      an SSD-only key, kAuto: the in-process holder reads its SSD
//   ssd remote     an SSD-only key, kTcp: SSD_READ over the TCP data plane
// The baseline, measured in the same run, is a plain O_DIRECT pread of the
// same number of bytes into an aligned buffer from a file in the same
// directory as the SSD tier's files: what the device alone costs.
//
// Gets use GetInto with a 4096-aligned buffer (no allocation in the timed
// call). Every sample is checked against the client's counters: an SSD hit
// must grow ssd_bytes_read by the value size (and local_ssd_bytes_read only
// when local), a DRAM hit must not touch it. Only verified samples enter the
// percentiles. Prefetch and promote-on-hit stay off (the defaults), so the
// SSD-only keys stay on SSD for the whole run; that is checked at the end.
// Cases alternate in rounds so drift of a shared disk hits them all alike.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "bench/bench_main.h"
#include "benchutil/bench_keys.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"
#include "storage/aligned_buffer.h"

namespace kvpool {

namespace {

using bench::CountTier;
using bench::Descs;
using bench::Tiers;
using bench::Value;
using bench::WaitFor;

using bench::NowSec;
using bench::Percentile;

constexpr int kRounds = 3;
constexpr int kDramKeys = 8;

enum class Kind { kPread, kDramShm, kDramTcp, kSsdLocal, kSsdRemote };

struct Case {
  uint64_t size = 0;
  Kind kind = Kind::kPread;
  std::string name;
  std::vector<double> lat_us;  // verified samples only
  int total = 0;
};

std::vector<std::string> PutKeys(Client& c, const std::string& prefix, int n,
                                 uint64_t size) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    keys.push_back(fmt::format("{}-{}", prefix, i));
    if (Status s = c.Put(keys.back(), Value(i, size)); !s.ok()) {
      std::fprintf(stderr, "  put %s: %s\n", keys.back().c_str(),
                   s.ToString().c_str());
    }
  }
  return keys;
}

// Makes `keys` SSD-only as the tests do: wait for every SSD copy, push the
// keys out of DRAM with 1 MiB filler (in rounds, until none is left in
// DRAM), then remove the filler. Returns how many ended SSD-only.
int PushOutOfDram(Client& c, const std::vector<std::string>& keys,
                  uint64_t dram_total) {
  bench::PushOutOfDram(c, keys, dram_total, "filler");
  return CountTier(c, keys, "local_disk");
}

// A file of `bytes` random bytes, on disk (fsync'ed) before it is read.
bool WriteBaselineFile(const std::string& path, uint64_t bytes) {
  std::mt19937_64 rng(42);
  std::string block(1 << 20, '\0');
  std::ofstream out(path, std::ios::binary);
  for (uint64_t done = 0; done < bytes; done += block.size()) {
    for (size_t i = 0; i + 8 <= block.size(); i += 8) {
      uint64_t x = rng();
      std::memcpy(block.data() + i, &x, 8);
    }
    out.write(block.data(),
              long(std::min<uint64_t>(block.size(), bytes - done)));
  }
  out.close();
  if (!out) return false;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ::fsync(fd);
  ::close(fd);
  return true;
}

}  // namespace

int RunTierLatencyBench(const BenchOptions& opts) {
  std::string root =
      fmt::format("{}/kvpool-tier-latency-{}",
                  opts.dir.empty() ? "/tmp" : opts.dir, getpid());
  std::filesystem::create_directories(root);
  const std::vector<uint64_t> sizes = {256ull << 10, 1ull << 20};
  const int ssd_keys = std::max(1, opts.tier_keys);
  const int samples = std::max(kRounds, opts.tier_samples);
  double t0 = NowSec();

  LocalClusterOptions o;
  o.num_nodes = 2;
  o.segment_size = opts.node_dram_bytes;
  o.enable_ssd = true;
  o.ssd_root = root + "/ssd";
  o.ssd_capacity_bytes = 2ull << 30;
  o.ssd_segment_file_size = 64ull << 20;
  o.heartbeat_interval_ms = 200;
  o.default_kv_lease_ttl = 2000;  // get leases must not pin DRAM long
  o.promotion_on_hit = false;     // the default, stated: SSD keys stay on SSD
  LocalCluster cluster(o);
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    std::filesystem::remove_all(root);
    return 1;
  }
  ClientConfig auto_cfg, tcp_cfg;  // enable_ssd_prefetch stays false
  tcp_cfg.transport = TransportMode::kTcp;
  auto local = cluster.NewClient(auto_cfg).value();
  auto remote = cluster.NewClient(tcp_cfg).value();

  std::fprintf(stderr, "[1/3] making %d keys per size SSD-only\n", ssd_keys);
  std::vector<std::vector<std::string>> ssd_pool, dram_pool;
  std::vector<std::string> all_ssd;
  for (uint64_t size : sizes) {
    ssd_pool.push_back(
        PutKeys(*local, "ssd-" + FormatSize(size), ssd_keys, size));
    all_ssd.insert(all_ssd.end(), ssd_pool.back().begin(),
                   ssd_pool.back().end());
  }
  int ssd_only = PushOutOfDram(*local, all_ssd, 2 * opts.node_dram_bytes);
  std::fprintf(stderr, "  %d/%zu SSD-only (%.1f s)\n", ssd_only, all_ssd.size(),
               NowSec() - t0);
  for (uint64_t size : sizes) {
    dram_pool.push_back(
        PutKeys(*local, "dram-" + FormatSize(size), kDramKeys, size));
  }
  std::vector<int> fds;
  for (uint64_t size : sizes) {
    std::string path = fmt::format("{}/pread-{}.dat", root, FormatSize(size));
    int fd = WriteBaselineFile(path, size * uint64_t(ssd_keys))
                 ? ::open(path.c_str(), O_RDONLY | O_DIRECT)
                 : -1;
    if (fd < 0) {
      std::fprintf(stderr, "baseline file %s: %s\n", path.c_str(),
                   std::strerror(errno));
      for (int f : fds) ::close(f);
      cluster.Stop();
      std::filesystem::remove_all(root);
      return 1;
    }
    fds.push_back(fd);
  }

  std::vector<Case> cases;
  for (uint64_t size : sizes) {
    for (auto [kind, name] : std::vector<std::pair<Kind, const char*>>{
             {Kind::kPread, "pread O_DIRECT (baseline)"},
             {Kind::kDramShm, "dram hit (kAuto, shm)"},
             {Kind::kDramTcp, "dram hit (kTcp)"},
             {Kind::kSsdLocal, "ssd hit local (kAuto)"},
             {Kind::kSsdRemote, "ssd hit remote (kTcp)"}}) {
      cases.push_back(Case{size, kind, name, {}, 0});
    }
  }
  storage::AlignedBuffer buf(sizes.back());
  // Warm connections and data-plane paths (untimed).
  for (auto* c : {local.get(), remote.get()}) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      bench::MustOk(
          c->GetInto(dram_pool[s][0], buf.data(), buf.size()).status(),
          "warm-up get");
      bench::MustOk(c->GetInto(ssd_pool[s][0], buf.data(), buf.size()).status(),
                    "warm-up get");
    }
  }
  std::fprintf(stderr, "[2/3] %d samples per case in %d rounds\n", samples,
               kRounds);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Case& cs = cases[ci];
      const size_t si = cs.size == sizes[0] ? 0 : 1;
      const int n = samples / kRounds + (round < samples % kRounds ? 1 : 0);
      for (int i = 0; i < n; ++i, ++cs.total) {
        if (cs.kind == Kind::kPread) {
          off_t off = off_t(uint64_t(cs.total % ssd_keys) * cs.size);
          double t = NowSec();
          ssize_t got = ::pread(fds[si], buf.data(), cs.size, off);
          double us = (NowSec() - t) * 1e6;
          if (got == ssize_t(cs.size)) cs.lat_us.push_back(us);
          continue;
        }
        bool dram = cs.kind == Kind::kDramShm || cs.kind == Kind::kDramTcp;
        bool tcp = cs.kind == Kind::kDramTcp || cs.kind == Kind::kSsdRemote;
        Client& c = tcp ? *remote : *local;
        const auto& pool = dram ? dram_pool[si] : ssd_pool[si];
        const std::string& key = pool[size_t(cs.total) % pool.size()];
        ClientCounters before = c.counters();
        double t = NowSec();
        auto r = c.GetInto(key, buf.data(), buf.size());
        double us = (NowSec() - t) * 1e6;
        ClientCounters after = c.counters();
        uint64_t ssd = after.ssd_bytes_read - before.ssd_bytes_read;
        uint64_t local_ssd =
            after.local_ssd_bytes_read - before.local_ssd_bytes_read;
        bool ok = r.ok() && r.value() == cs.size;
        switch (cs.kind) {
          case Kind::kDramShm:
            ok &= ssd == 0 &&
                  after.shm_bytes_read - before.shm_bytes_read == cs.size;
            break;
          case Kind::kDramTcp:
            ok &= ssd == 0 &&
                  after.tcp_bytes_read - before.tcp_bytes_read == cs.size;
            break;
          case Kind::kSsdLocal:
            ok &= ssd == cs.size && local_ssd == cs.size;
            break;
          case Kind::kSsdRemote:
            ok &= ssd == cs.size && local_ssd == 0;
            break;
          case Kind::kPread:
            break;
        }
        if (ok) cs.lat_us.push_back(us);
      }
    }
    std::fprintf(stderr, "  round %d/%d done (%.1f s)\n", round + 1, kRounds,
                 NowSec() - t0);
  }
  std::fprintf(stderr, "[3/3] checking the SSD keys stayed on SSD\n");
  int still_ssd = CountTier(*local, all_ssd, "local_disk");
  for (int fd : fds) ::close(fd);
  local.reset();
  remote.reset();
  cluster.Stop();
  std::filesystem::remove_all(root);

  std::printf(
      "\nkvpool bench tier-latency: one GetInto per sample into a "
      "4096-aligned buffer; 2 nodes x %s DRAM, SSD tier on,\n%d SSD-only "
      "and %d in-memory keys per size, read in turn; %d rounds\n",
      FormatSize(opts.node_dram_bytes).c_str(), ssd_keys, kDramKeys, kRounds);
  std::printf("%-7s %-27s %9s %9s %9s %9s %12s\n", "size", "case", "verified",
              "p50_us", "p99_us", "mean_us", "p50/pread");
  int bad = 0;
  double pread_p50 = 0;
  for (const auto& cs : cases) {
    double p50 = Percentile(cs.lat_us, 50);
    double mean = 0;
    for (double v : cs.lat_us) mean += v;
    if (!cs.lat_us.empty()) mean /= double(cs.lat_us.size());
    if (cs.kind == Kind::kPread) pread_p50 = p50;
    bad += cs.total - int(cs.lat_us.size());
    std::printf("%-7s %-27s %4zu/%-4d %9.1f %9.1f %9.1f %11.2fx\n",
                FormatSize(cs.size).c_str(), cs.name.c_str(), cs.lat_us.size(),
                cs.total, p50, Percentile(cs.lat_us, 99), mean,
                pread_p50 > 0 ? p50 / pread_p50 : 0.0);
  }
  std::printf(
      "baseline: pread O_DIRECT of the same bytes from a file beside the SSD "
      "tier's files (no kvpool). verified = the get's tier was confirmed by "
      "ClientCounters.\nSSD-only keys still SSD-only after the run: %d/%zu "
      "(promote-on-hit and prefetch off)\n",
      still_ssd, all_ssd.size());

  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto& cs = cases[i];
      double mean = 0;
      for (double v : cs.lat_us) mean += v;
      if (!cs.lat_us.empty()) mean /= double(cs.lat_us.size());
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"size":{},"case":"{}","samples":{},"verified":{},)"
                 R"("p50_us":{:.1f},"p99_us":{:.1f},"mean_us":{:.1f}}})",
                 cs.size, cs.name, cs.total, cs.lat_us.size(),
                 Percentile(cs.lat_us, 50), Percentile(cs.lat_us, 99), mean);
    }
    out << "]\n";
  }
  return bad > 0 || still_ssd != int(all_ssd.size()) ? 1 : 0;
}

}  // namespace kvpool
