// kvpool bench failover: HA failover time against the object count N
// (issue #46). Real processes on 127.0.0.1: a one-member etcd, two
// kvpool-master processes campaigning (docs/ha.md); two in-process Nodes
// (dram_directory on) and a Client that find the leader in etcd. For each
// N: put N values, wait until the nodes' directories hold them all, kill -9
// the leader, and time from the kill until the standby leads, a pre-put key
// reads back right, every key exists again, and a new put succeeds.
//
// The nodes run in this process (as in `kvpool bench restart`) so that
// "the directories hold all N" is read off the nodes themselves, and no
// node segment is left in /dev/shm if the bench fails; the masters are
// processes because the thing measured is one of them dying.
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "bench/bench_main.h"
#include "bench/svg_chart.h"
#include "benchutil/bench_util.h"
#include "benchutil/checked_value.h"
#include "common/size_parse.h"
#include "ha/etcd_test_process.h"
#include "ha/leader_election.h"
#include "kvpool/client.h"
#include "node/node.h"
#include "tests/process_util.h"

namespace kvpool {

namespace {

namespace fs = std::filesystem;

constexpr size_t kPutBatch = 1024;
constexpr size_t kExistBatch = 8192;
constexpr double kStartSec = 30;  // each server up, the leader named
constexpr int kSkip = 77;
constexpr double kLostAfterSec = 3;  // missing this long after re-registration
                                     // // no etcd here (ctest SKIP_RETURN_CODE)

struct FailoverRow {
  uint64_t n = 0;
  int run = 0;
  double put_sec = 0;
  double dir_sync_ms = -1;  // last put acknowledged -> directories hold N
  // From the kill -9 of the leader:
  double elected_ms = -1;          // etcd names the standby
  double first_right_get_ms = -1;  // the probe key read back byte-exact
  double all_served_ms = -1;       // every key exists again
  double first_put_ms = -1;        // a new key's put succeeds
  // Each node has handed its whole directory to the new leader (its
  // kvpool_node_dram_reregistered_total moved), from the kill.
  double node_rereg_ms[2] = {-1, -1};
  // CPU the successor master used from the kill until both nodes were
  // done (user + system): near the wall time, it is what bounds the
  // re-registration.
  double successor_cpu_ms = -1;
  uint64_t served = 0;       // keys present in the final sweep
  double sweep_ms = 0;       // that sweep alone, all N keys
  int sweep_passes = 0;      // exist passes until none was missing
  uint64_t probe_wrong = 0;  // probe gets with wrong bytes
  uint64_t sampled = 0, sample_bad = 0, sample_missing = 0;
  std::string error;
};

std::string KeyOf(uint64_t i) { return fmt::format("f-{:09d}", i); }

using bench::FillValue;

uint64_t Reregistered(Node& node) {
  return node.metrics()
      .GetCounter("kvpool_node_dram_reregistered_total")
      .Value();
}

// User + system CPU time of process `pid`, in ms (-1 if unreadable).
double CpuMs(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  // "pid (comm) S ...": utime and stime are the 12th and 13th fields after
  // the state, which follows the last ')'.
  const size_t p = line.rfind(')');
  if (p == std::string::npos) return -1;
  std::istringstream in(line.substr(p + 2));
  std::string field;
  double ticks = 0;
  for (int i = 0; i < 13 && in >> field; ++i) {
    if (i >= 11) ticks += std::stod(field);
  }
  return ticks * 1e3 / double(sysconf(_SC_CLK_TCK));
}

double MsSince(double t0) { return (bench::NowSec() - t0) * 1e3; }

std::string BinDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// etcd, two masters, two nodes and a client for one N; every process is
// stopped by its PID when this goes out of scope.
class HaCluster {
 public:
  HaCluster(const BenchOptions& opts, const fs::path& dir)
      : opts_(opts),
        dir_(dir),
        etcd_(dir / "etcd"),
        cluster_(fmt::format("fo{}", getpid())),
        etcd_client_({etcd_.endpoint()}, 1000) {}
  ~HaCluster() {
    client_.reset();
    for (auto& n : nodes_) n->Stop();
    nodes_.clear();
    for (auto& m : masters_) testing::StopProcess(m.pid);
  }
  bool has_etcd() const { return !etcd_.endpoint().empty(); }

  Status Start(uint64_t n) {
    for (int i = 0; i < 2; ++i) StartMaster(i);
    if (LeaderIndex() < 0)
      return Status(ErrorCode::INTERNAL_ERROR, "no leader");
    const uint64_t aligned = (opts_.failover_value_bytes + 63) / 64 * 64;
    for (int i = 0; i < 2; ++i) {
      NodeConfig nc;
      nc.master_server_address = EtcdAddress();
      // Either node could take every object. Pages are touched as values
      // land, not prefaulted, so memory is what the values take.
      nc.global_segment_size = n * aligned + (16ull << 20);
      nc.segment_prefault = false;
      nc.heartbeat_interval_ms = 100;
      nc.node_id = fmt::format("failover-node{}", i);
      nc.dram_directory = true;
      nodes_.push_back(std::make_unique<Node>(nc));
      if (Status s = nodes_.back()->Start(); !s.ok()) return s;
    }
    ClientConfig cc;
    cc.master_server_address = EtcdAddress();
    cc.rpc_timeout_ms = 3000;
    auto c = Client::Create(cc);
    if (!c.ok()) return c.status();
    client_ = std::move(c.value());
    const bool both = testing::WaitUntil(
        [&] {
          auto s = client_->Stat();
          return s.ok() && s->segments.size() == 2;
        },
        std::chrono::seconds(int(kStartSec)));
    if (!both) return Status(ErrorCode::INTERNAL_ERROR, "nodes never mounted");
    return Status::OK();
  }

  // The master etcd names as leader (index into masters_), or -1 if none
  // within kStartSec.
  int LeaderIndex() {
    int found = -1;
    testing::WaitUntil(
        [&] {
          auto l = Leader();
          if (!l) return false;
          for (int i = 0; i < int(masters_.size()); ++i) {
            if (masters_[i].pid > 0 && AddressOf(i) == l->address) found = i;
          }
          return found >= 0;
        },
        std::chrono::seconds(int(kStartSec)));
    return found;
  }
  std::optional<ha::LeaderInfo> Leader() { return LeaderVia(&etcd_client_); }
  std::optional<ha::LeaderInfo> LeaderVia(ha::EtcdClient* etcd) {
    auto l = ha::FindLeader(etcd, ha::LeaderKey(cluster_));
    return l.ok() ? l.value() : std::nullopt;
  }
  void Kill(int i) {
    kill(masters_[i].pid, SIGKILL);
    waitpid(masters_[i].pid, nullptr, 0);
    masters_[i].pid = -1;
  }
  pid_t pid(int i) const { return masters_[i].pid; }
  const std::string& etcd_endpoint() const { return etcd_.endpoint(); }
  Node& node(int i) { return *nodes_[i]; }
  Client& client() { return *client_; }

 private:
  struct Master {
    pid_t pid = -1;
    fs::path port_file;
  };
  std::string EtcdAddress() const {
    return "etcd://" + etcd_.endpoint() + "/" + cluster_;
  }
  void StartMaster(int i) {
    Master m;
    m.port_file = dir_ / fmt::format("master{}.port", i);
    // put_waits_for_holders (docs/ha.md's setting): a put is acknowledged
    // once its node's directory holds it, so every acknowledged key must
    // survive the kill. Without it (--no_put_waits) the bench's wait for
    // the directories' sizes to add up to N stands in, and one run lost a
    // key that way (docs/results/ha/failover-at-n.md).
    std::vector<std::string> args = {
        BinDir() + "/kvpool-master",
        "--enable_ha",
        "--etcd_endpoints=" + etcd_.endpoint(),
        "--cluster_id=" + cluster_,
        fmt::format("--ha_lease_ttl_sec={}", opts_.failover_ha_lease_ttl_sec),
        "--rpc_port=0",
        "--metrics_port=-1",
        fmt::format("--default_kv_lease_ttl={}", opts_.failover_lease_ttl_ms),
        fmt::format("--client_ttl={}", opts_.failover_client_ttl_sec),
        "--port_file=" + m.port_file.string()};
    if (!opts_.failover_no_put_waits) args.push_back("--put_waits_for_holders");
    m.pid =
        testing::Spawn(args, (dir_ / fmt::format("master{}.log", i)).string());
    masters_.push_back(m);
  }
  // The address master i's current term serves on (its port file is
  // rewritten at each term).
  std::string AddressOf(int i) {
    const int port = testing::WaitForPortFile(masters_[i].port_file,
                                              std::chrono::seconds(5));
    return "127.0.0.1:" + std::to_string(port);
  }

  const BenchOptions& opts_;
  fs::path dir_;
  testing::EtcdProcess etcd_;
  std::string cluster_;
  ha::EtcdClient etcd_client_;
  std::vector<Master> masters_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unique_ptr<Client> client_;
};

// Puts keys [0, n); the number that failed.
uint64_t PutAll(Client& c, const std::vector<std::string>& keys,
                uint64_t value_bytes, const char* tag) {
  const uint64_t n = keys.size();
  std::vector<std::string> vals(kPutBatch, std::string(value_bytes, '\0'));
  const uint64_t step = std::max<uint64_t>(kPutBatch, n / 10);
  uint64_t next_report = step, failed = 0;
  const double t = bench::NowSec();
  for (uint64_t s = 0; s < n; s += kPutBatch) {
    const uint64_t e = std::min<uint64_t>(n, s + kPutBatch);
    std::vector<std::string> bk(keys.begin() + s, keys.begin() + e);
    std::vector<std::string_view> bv;
    for (uint64_t i = s; i < e; ++i) {
      FillValue(i, &vals[i - s]);
      bv.push_back(vals[i - s]);
    }
    for (const auto& st : c.BatchPut(bk, bv)) failed += !st.ok();
    if (e >= next_report || e == n) {
      std::fprintf(stderr, "    %s %lu/%lu puts (%.1f s)\n", tag, e, n,
                   bench::NowSec() - t);
      next_report += step;
    }
  }
  return failed;
}

// The indices of `idx` whose keys do not exist (or whose call failed).
std::vector<uint64_t> Missing(Client& c, const std::vector<std::string>& keys,
                              const std::vector<uint64_t>& idx) {
  ExistOptions eo;
  eo.grant_lease = false;
  std::vector<uint64_t> out;
  for (size_t s = 0; s < idx.size(); s += kExistBatch) {
    const size_t e = std::min(idx.size(), s + kExistBatch);
    std::vector<std::string> batch;
    batch.reserve(e - s);
    for (size_t j = s; j < e; ++j) batch.push_back(keys[idx[j]]);
    auto got = c.BatchIsExist(batch, eo);
    for (size_t j = s; j < e; ++j) {
      const auto& r = got[j - s];
      if (!r.ok() || !r.value()) out.push_back(idx[j]);
    }
  }
  return out;
}

FailoverRow RunCase(const BenchOptions& opts, uint64_t n, int run) {
  FailoverRow row;
  row.n = n;
  row.run = run;
  const std::string tag = fmt::format("[N={} run {}]", n, run);
  const fs::path dir =
      fs::temp_directory_path() /
      fmt::format("kvpool-failover-{}-{}-{}", getpid(), n, run);
  fs::create_directories(dir);
  const double timeout_sec = opts.failover_timeout_sec;
  {
    HaCluster h(opts, dir);
    if (!h.has_etcd()) {
      row.error = "etcd did not start (/usr/bin/etcd)";
      return row;
    }
    std::fprintf(stderr, "  %s starting etcd, 2 masters, 2 nodes\n",
                 tag.c_str());
    if (Status s = h.Start(n); !s.ok()) {
      row.error = "start: " + s.ToString() + " (logs in " + dir.string() + ")";
      return row;
    }
    std::vector<std::string> keys;
    keys.reserve(n);
    for (uint64_t i = 0; i < n; ++i) keys.push_back(KeyOf(i));
    std::fprintf(stderr, "  %s putting %lu x %s\n", tag.c_str(), n,
                 FormatSize(opts.failover_value_bytes).c_str());
    const double tp = bench::NowSec();
    const uint64_t failed =
        PutAll(h.client(), keys, opts.failover_value_bytes, tag.c_str());
    row.put_sec = bench::NowSec() - tp;
    if (failed) {
      row.error = fmt::format("{} puts failed", failed);
      return row;
    }
    // The directories are fed by heartbeats: a value the node has not
    // heard of yet is not one it can hand to the next leader.
    const double td = bench::NowSec();
    if (!testing::WaitUntil(
            [&] {
              return h.node(0).directory().size() +
                         h.node(1).directory().size() >=
                     n;
            },
            std::chrono::seconds(int(timeout_sec)))) {
      row.error = "directories never caught up";
      return row;
    }
    row.dir_sync_ms = MsSince(td);
    // Every key is served before the kill, so that a key missing after it
    // was lost by the failover, not before.
    {
      std::vector<uint64_t> all(n);
      for (uint64_t i = 0; i < n; ++i) all[i] = i;
      const std::vector<uint64_t> gone = Missing(h.client(), keys, all);
      if (!gone.empty()) {
        row.error = fmt::format("{} keys missing before the kill (first {})",
                                gone.size(), keys[gone[0]]);
        return row;
      }
    }

    std::mt19937_64 rng(n * 31 + run);
    const uint64_t probe = rng() % n;
    std::string probe_want(opts.failover_value_bytes, '\0');
    FillValue(probe, &probe_want);
    const int leader = h.LeaderIndex();
    const auto before = h.Leader();
    if (leader < 0 || !before) {
      row.error = "no leader before the kill";
      return row;
    }
    std::fprintf(stderr, "  %s kill -9 of master%d (epoch %lu)\n", tag.c_str(),
                 leader, before->epoch);
    const pid_t successor = h.pid(1 - leader);
    const double cpu0 = CpuMs(successor);
    const double t0 = bench::NowSec();
    h.Kill(leader);

    std::atomic<bool> stop{false};
    std::atomic<double> elected{-1}, got{-1}, put{-1};
    std::atomic<uint64_t> wrong{0};
    // etcd names the successor: a watcher of its own, polling every 5 ms.
    std::thread elect([&] {
      ha::EtcdClient etcd({h.etcd_endpoint()}, 1000);
      while (!stop) {
        auto l = h.LeaderVia(&etcd);
        if (l && l->epoch > before->epoch) {
          elected = MsSince(t0);
          return;
        }
        usleep(5000);
      }
    });
    // Each node's re-registration done: its counter moves once, at the end
    // of its whole directory (read in-process, 1 ms apart).
    std::atomic<double> rereg_at[2] = {-1, -1};
    std::atomic<double> cpu1{-1};
    std::thread rereg([&] {
      uint64_t base[2];
      for (int i = 0; i < 2; ++i) base[i] = Reregistered(h.node(i));
      while (!stop && (rereg_at[0] < 0 || rereg_at[1] < 0)) {
        for (int i = 0; i < 2; ++i) {
          if (rereg_at[i] < 0 && Reregistered(h.node(i)) > base[i])
            rereg_at[i] = MsSince(t0);
        }
        usleep(1000);
      }
      cpu1 = CpuMs(successor);
    });
    // The pre-put key, read in a tight loop (2 ms after a miss or error).
    std::thread get([&] {
      while (!stop) {
        auto r = h.client().Get(keys[probe]);
        if (r.ok()) {
          if (r.value() == probe_want) {
            got = MsSince(t0);
            return;
          }
          ++wrong;
        }
        usleep(2000);
      }
    });
    // A new key's put, every 10 ms (re-mounted segments are closed for
    // default_kv_lease_ttl, so puts fail for about that long anyway).
    std::thread putter([&] {
      std::string v(opts.failover_value_bytes, 'p');
      for (int i = 0; !stop; ++i) {
        if (h.client().Put(fmt::format("probe-{}-{}", n, i), v).ok()) {
          put = MsSince(t0);
          return;
        }
        usleep(10000);
      }
    });
    // Every key exists again: exist passes over the keys still missing
    // (the first over all N), 10 ms apart, until none is. Without them
    // (--no_recovery_sweep, a control: the passes load the new leader and
    // the CPU while the nodes re-register) all_served is the later node's
    // re-registration, checked by the full sweep below.
    std::vector<uint64_t> missing(opts.failover_no_recovery_sweep ? 0 : n);
    for (uint64_t i = 0; i < missing.size(); ++i) missing[i] = i;
    while (!missing.empty() && bench::NowSec() - t0 < timeout_sec) {
      missing = Missing(h.client(), keys, missing);
      ++row.sweep_passes;
      if (missing.empty()) {
        row.all_served_ms = MsSince(t0);
        break;
      }
      if (row.sweep_passes % 20 == 0) {
        std::fprintf(stderr, "    %s %.1f s: %zu keys still missing\n",
                     tag.c_str(), MsSince(t0) / 1e3, missing.size());
      }
      // Both nodes have handed over their whole directories: what is still
      // missing after kLostAfterSec more is not coming back.
      const double done = std::max(rereg_at[0].load(), rereg_at[1].load());
      if (rereg_at[0] >= 0 && rereg_at[1] >= 0 &&
          MsSince(t0) - done > kLostAfterSec * 1e3) {
        break;
      }
      usleep(10000);
    }
    testing::WaitUntil(
        [&] { return (elected > 0 && got > 0 && put > 0) || wrong > 0; },
        std::chrono::seconds(
            int(std::max(1.0, timeout_sec - (bench::NowSec() - t0)))));
    testing::WaitUntil([&] { return rereg_at[0] >= 0 && rereg_at[1] >= 0; },
                       std::chrono::seconds(5));
    stop = true;
    elect.join();
    rereg.join();
    get.join();
    putter.join();
    row.elected_ms = elected;
    row.first_right_get_ms = got;
    row.first_put_ms = put;
    row.probe_wrong = wrong;
    for (int i = 0; i < 2; ++i) row.node_rereg_ms[i] = rereg_at[i];
    if (cpu0 >= 0 && cpu1 >= 0) row.successor_cpu_ms = cpu1 - cpu0;
    if (opts.failover_no_recovery_sweep && rereg_at[0] >= 0 && rereg_at[1] >= 0)
      row.all_served_ms = std::max(rereg_at[0].load(), rereg_at[1].load());
    std::fprintf(stderr,
                 "  %s elected %.0f ms, first right get %.0f ms, nodes "
                 "re-registered %.0f / %.0f ms (successor CPU %.0f ms), all "
                 "served %.0f ms, first put %.0f ms\n",
                 tag.c_str(), row.elected_ms, row.first_right_get_ms,
                 row.node_rereg_ms[0], row.node_rereg_ms[1],
                 row.successor_cpu_ms, row.all_served_ms, row.first_put_ms);

    // One full sweep on its own: what the all_served figure's passes cost.
    const double ts = bench::NowSec();
    std::vector<uint64_t> all(n);
    for (uint64_t i = 0; i < n; ++i) all[i] = i;
    const std::vector<uint64_t> lost = Missing(h.client(), keys, all);
    row.sweep_ms = MsSince(ts);
    row.served = n - lost.size();
    if (!lost.empty()) row.all_served_ms = -1;
    for (size_t i = 0; i < lost.size() && i < 5; ++i) {
      std::fprintf(stderr, "  %s lost: %s (acknowledged, not served)\n",
                   tag.c_str(), keys[lost[i]].c_str());
    }

    // A sample of random keys read back byte for byte.
    std::string want(opts.failover_value_bytes, '\0');
    std::vector<uint64_t> idx;
    for (int i = 0; i < opts.failover_samples; ++i) idx.push_back(rng() % n);
    for (size_t s = 0; s < idx.size(); s += 128) {
      std::vector<std::string> bk;
      for (size_t j = s; j < std::min(idx.size(), s + 128); ++j)
        bk.push_back(keys[idx[j]]);
      auto vals = h.client().BatchGet(bk);
      for (size_t j = 0; j < vals.size(); ++j) {
        if (!vals[j].ok()) {
          ++row.sample_missing;
          continue;
        }
        ++row.sampled;
        FillValue(idx[s + j], &want);
        row.sample_bad += vals[j].value() != want;
      }
    }
    if (row.all_served_ms < 0 || row.served != n)
      row.error = fmt::format("{} keys never came back", n - row.served);
    if (row.first_right_get_ms < 0) row.error = "the probe key never came back";
  }
  std::error_code ec;
  if (row.error.empty()) fs::remove_all(dir, ec);
  return row;
}

std::string Ms(double v) { return v < 0 ? "-" : fmt::format("{:.0f}", v); }

double MedianOf(const std::vector<FailoverRow>& rows, uint64_t n,
                double FailoverRow::*field) {
  std::vector<double> v;
  for (const auto& r : rows) {
    if (r.n == n && r.*field >= 0) v.push_back(r.*field);
  }
  if (v.empty()) return -1;
  // Of two runs, their mean (a percentile would pick one of them).
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void WriteJson(const BenchOptions& opts, const std::vector<FailoverRow>& rows) {
  std::ofstream out(opts.json_path);
  out << fmt::format(
      R"({{"value_bytes":{},"put_waits_for_holders":{},"recovery_sweep":{},"ha_lease_ttl_sec":{},"default_kv_lease_ttl_ms":{},"client_ttl_sec":{},"heartbeat_interval_ms":100,"nodes":2,"rows":[)",
      opts.failover_value_bytes, !opts.failover_no_put_waits,
      !opts.failover_no_recovery_sweep, opts.failover_ha_lease_ttl_sec,
      opts.failover_lease_ttl_ms, opts.failover_client_ttl_sec);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out << (i ? "," : "")
        << fmt::format(
               R"({{"objects":{},"run":{},"put_sec":{:.3f},"dir_sync_ms":{:.1f},)"
               R"("elected_ms":{:.1f},"first_right_get_ms":{:.1f},"all_served_ms":{:.1f},)"
               R"("first_put_ms":{:.1f},"node_rereg_ms":[{:.1f},{:.1f}],"successor_cpu_ms":{:.0f},"served":{},"exist_sweep_ms":{:.1f},"sweep_passes":{},)"
               R"("probe_wrong":{},"sampled":{},"sample_bad":{},"sample_missing":{},"error":"{}"}})",
               r.n, r.run, r.put_sec, r.dir_sync_ms, r.elected_ms,
               r.first_right_get_ms, r.all_served_ms, r.first_put_ms,
               r.node_rereg_ms[0], r.node_rereg_ms[1], r.successor_cpu_ms,
               r.served, r.sweep_ms, r.sweep_passes, r.probe_wrong, r.sampled,
               r.sample_bad, r.sample_missing, r.error);
  }
  out << "]}\n";
}

void WriteSvg(const BenchOptions& opts, const std::vector<FailoverRow>& rows) {
  std::vector<bench::LineSeries> series = {{"elected", {}},
                                           {"first right get", {}},
                                           {"all keys served", {}},
                                           {"first put", {}}};
  double FailoverRow::*const fields[] = {
      &FailoverRow::elected_ms, &FailoverRow::first_right_get_ms,
      &FailoverRow::all_served_ms, &FailoverRow::first_put_ms};
  for (uint64_t n : opts.failover_objects) {
    for (size_t k = 0; k < series.size(); ++k) {
      const double m = MedianOf(rows, n, fields[k]);
      if (m >= 0) series[k].points.emplace_back(std::log10(double(n)), m);
    }
  }
  bench::WriteFile(opts.svg_path,
                   bench::LineChartSvg("HA failover after kill -9 of the "
                                       "leader: ms from the kill vs objects "
                                       "(median of runs)",
                                       "objects (log10 N)", "ms", series));
}

}  // namespace

int RunFailoverBench(const BenchOptions& opts) {
  // Progress and the nodes' re-registration lines on stderr, the table
  // alone on stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("failover-bench"));
  spdlog::set_level(spdlog::level::info);
  if (!fs::exists("/usr/bin/etcd")) {
    std::fprintf(stderr, "skipped: /usr/bin/etcd is not installed\n");
    return kSkip;
  }
  std::vector<FailoverRow> rows;
  for (uint64_t n : opts.failover_objects) {
    for (int run = 1; run <= opts.failover_runs; ++run) {
      std::fprintf(stderr, "N=%lu, run %d of %d\n", n, run, opts.failover_runs);
      rows.push_back(RunCase(opts, n, run));
    }
  }

  std::printf(
      "\nkvpool bench failover: etcd + 2 kvpool-master (ha_lease_ttl_sec "
      "%d%s), "
      "2 in-process nodes (dram_directory, heartbeat 100 ms), values of %s, "
      "default_kv_lease_ttl %ld ms, client_ttl %ld s%s\n",
      opts.failover_ha_lease_ttl_sec,
      opts.failover_no_put_waits ? "" : ", put_waits_for_holders",
      FormatSize(opts.failover_value_bytes).c_str(), opts.failover_lease_ttl_ms,
      opts.failover_client_ttl_sec,
      !opts.failover_no_recovery_sweep
          ? ""
          : "; no exist passes during the recovery");
  const char* kHead =
      "%-8s %-6s %6s %8s %8s %10s %11s %8s %10s %9s %8s %6s %10s\n";
  std::printf(kHead, "N", "run", "put_s", "dir_sync", "elected", "first_get",
              "nodes_rereg", "succ_cpu", "all_served", "first_put", "sweep",
              "passes", "sample");
  std::printf(kHead, "", "", "", "ms", "ms", "ms", "ms", "ms", "ms", "ms", "ms",
              "", "bad/read");
  bool ok = true;
  for (const auto& r : rows) {
    std::printf(
        kHead, std::to_string(r.n).c_str(), std::to_string(r.run).c_str(),
        fmt::format("{:.1f}", r.put_sec).c_str(), Ms(r.dir_sync_ms).c_str(),
        Ms(r.elected_ms).c_str(), Ms(r.first_right_get_ms).c_str(),
        fmt::format("{}/{}", Ms(r.node_rereg_ms[0]), Ms(r.node_rereg_ms[1]))
            .c_str(),
        Ms(r.successor_cpu_ms).c_str(), Ms(r.all_served_ms).c_str(),
        Ms(r.first_put_ms).c_str(), Ms(r.sweep_ms).c_str(),
        std::to_string(r.sweep_passes).c_str(),
        fmt::format("{}/{}", r.sample_bad, r.sampled).c_str());
    if (!r.error.empty()) {
      std::printf("  error: %s\n", r.error.c_str());
      ok = false;
    }
    if (r.sample_bad || r.sample_missing || r.probe_wrong || r.served != r.n)
      ok = false;
  }
  if (opts.failover_runs > 1) {
    for (uint64_t n : opts.failover_objects) {
      std::printf(
          kHead, std::to_string(n).c_str(), "median", "", "",
          Ms(MedianOf(rows, n, &FailoverRow::elected_ms)).c_str(),
          Ms(MedianOf(rows, n, &FailoverRow::first_right_get_ms)).c_str(), "",
          "", Ms(MedianOf(rows, n, &FailoverRow::all_served_ms)).c_str(),
          Ms(MedianOf(rows, n, &FailoverRow::first_put_ms)).c_str(), "", "",
          "");
    }
  }
  std::printf(
      "elected, first_get, nodes_rereg (node0/node1 handed their whole "
      "directory over), all_served, first_put: ms from the kill -9 of the "
      "leader. all_served: end of the exist pass that found the last missing "
      "key (passes over the keys still missing, 10 ms apart); sweep: one "
      "exist sweep of all N keys afterwards, for scale; succ_cpu: CPU time "
      "(user+system) of the successor master from the kill until both nodes "
      "were done\n");
  if (!opts.json_path.empty()) WriteJson(opts, rows);
  if (!opts.svg_path.empty()) WriteSvg(opts, rows);
  return ok ? 0 : 1;
}

}  // namespace kvpool
