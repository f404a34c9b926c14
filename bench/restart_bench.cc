// kvpool bench restart: how long a pool of N objects takes to be fully
// served again after a master restart (the nodes re-register the DRAM
// replicas they still hold), and after one node was declared dead and woke
// up. In one process: a MasterServer on a fixed port, two Nodes, a Client.
// The baseline, measured in the same run, is the same restart with the
// nodes' DRAM directories off (the behaviour before re-registration): the
// fraction of keys a restarted master still serves.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "bench/bench_main.h"
#include "bench/svg_chart.h"
#include "benchutil/bench_util.h"
#include "benchutil/checked_value.h"
#include "common/size_parse.h"
#include "kvpool/client.h"
#include "master/master_server.h"
#include "master/master_service.h"
#include "node/node.h"

namespace kvpool {

namespace {

constexpr size_t kPutBatch = 1024;
constexpr size_t kExistBatch = 8192;
constexpr double kTimeoutSec = 120;
constexpr double kSweepSec = 60;  // exist sweeps after a fooled counter

struct RestartRow {
  uint64_t n = 0;
  bool directory = true;
  uint64_t put_failed = 0;
  double put_sec = 0;
  double dir_sync_ms = -1;    // until the nodes' directories hold all N
  double restart_gap_ms = 0;  // old master stopped -> new one serving
  double first_mount_ms = -1;
  double remount_ms = -1;    // both nodes mounted at the new master
  double served_ms = -1;     // every key exists again (-1: never)
  double sweep_ms = 0;       // one exist sweep over all N keys
  uint64_t served = 0;       // keys present after the restart
  double first_put_ms = -1;  // a new key's put succeeds
  double rereg_per_sec = 0;
  uint64_t reregistered = 0, refused = 0;
  uint64_t restart_objects_lost = 0;  // a node declared dead mid-recovery
  int restart_remounts = 0;           // ... and mounted again
  uint64_t checksum_mismatches = 0;
  // Values read back after the restart: read, wrong bytes, missing.
  uint64_t sampled = 0, sample_bad = 0, sample_missing = 0;
  // Pause of node 1 (directory runs only).
  double dead_after_ms = -1;  // heartbeats paused -> declared dead
  uint64_t lost_at_death = 0;
  uint64_t pause_held = 0;     // entries in node 1's directory when it resumed
  double pause_rereg_ms = -1;  // resumed -> each of them taken or refused
  double pause_recovery_ms = -1;  // resumed -> every key exists again
  uint64_t pause_served = 0;
  uint64_t pause_reregistered = 0, pause_refused = 0;
  uint64_t pause_sampled = 0, pause_sample_wrong = 0, pause_sample_missing = 0;
  std::string error;
};

std::string KeyOf(uint64_t i) { return fmt::format("r-{:09d}", i); }

using bench::FillValue;

uint64_t CounterValue(MasterServer& m, const char* name) {
  return m.service().metrics().GetCounter(name, "tier=\"memory\"").Value();
}
uint64_t Reregistered(MasterServer& m) {
  return CounterValue(m, "kvpool_master_reregistered_total");
}
uint64_t Refused(MasterServer& m) {
  return CounterValue(m, "kvpool_master_reregistration_refused_total");
}
uint64_t ObjectsLost(MasterServer& m) {
  return m.service()
      .metrics()
      .GetCounter("kvpool_master_objects_lost_total")
      .Value();
}

bool Mounted(MasterServer& m, const Node& node) {
  auto& svc = m.service();
  if (!svc.nodes().IndexOf(node.node_id())) return false;
  auto info = svc.segments().Info(static_cast<uint32_t>(node.segment_id()));
  return info && info->node_id == node.node_id();
}

// Keys of [0, n) that exist (no lease granted).
uint64_t CountPresent(Client& c, const std::vector<std::string>& keys) {
  ExistOptions eo;
  eo.grant_lease = false;
  uint64_t present = 0;
  for (size_t s = 0; s < keys.size(); s += kExistBatch) {
    std::vector<std::string> batch(
        keys.begin() + s,
        keys.begin() + std::min(keys.size(), s + kExistBatch));
    for (const auto& r : c.BatchIsExist(batch, eo))
      present += r.ok() && r.value();
  }
  return present;
}

template <typename Pred>
bool WaitFor(Pred&& pred, double timeout_sec, double sleep_sec = 0.001) {
  double deadline = bench::NowSec() + timeout_sec;
  while (!pred()) {
    if (bench::NowSec() > deadline) return false;
    usleep(static_cast<useconds_t>(sleep_sec * 1e6));
  }
  return true;
}

class Harness {
 public:
  Harness(const BenchOptions& opts, int* port) : opts_(opts), port_(port) {}
  ~Harness() { Stop(); }

  Status StartMaster() {
    MasterConfig mc;
    mc.rpc_address = "127.0.0.1";
    mc.rpc_port = *port_;
    mc.metrics_port = -1;
    mc.default_kv_lease_ttl = opts_.restart_lease_ttl_ms;
    mc.client_ttl = opts_.restart_client_ttl_sec;
    mc.put_waits_for_holders = put_waits_;
    // The port may take a moment to be free again after the last master.
    Status s;
    for (int attempt = 0; attempt < 50; ++attempt) {
      master_ = std::make_unique<MasterServer>(mc);
      s = master_->Start();
      if (s.ok()) break;
      master_.reset();
      usleep(20000);
    }
    if (!s.ok()) return s;
    *port_ = master_->rpc_port();
    return Status::OK();
  }
  void StopMaster() {
    if (master_) master_->Stop();
    master_.reset();
  }
  Status Start(uint64_t n, bool directory) {
    if (Status s = StartMaster(); !s.ok()) return s;
    const uint64_t aligned = (opts_.restart_value_bytes + 63) / 64 * 64;
    for (int i = 0; i < 2; ++i) {
      NodeConfig nc;
      nc.master_server_address = master_->address();
      // Either node could take every object, far below the eviction
      // watermark with the even split free_ratio_first gives.
      nc.global_segment_size = n * aligned + (16ull << 20);
      nc.heartbeat_interval_ms = 100;
      nc.node_id = fmt::format("restart-node{}", i);
      nc.dram_directory = directory;
      nodes_.push_back(std::make_unique<Node>(nc));
      if (Status s = nodes_.back()->Start(); !s.ok()) return s;
    }
    ClientConfig cc;
    cc.master_server_address = master_->address();
    auto c = Client::Create(cc);
    if (!c.ok()) return c.status();
    client_ = std::move(c.value());
    return Status::OK();
  }
  void Stop() {
    client_.reset();
    for (auto& n : nodes_) n->Stop();
    nodes_.clear();
    StopMaster();
  }
  void set_put_waits_for_holders(bool on) { put_waits_ = on; }
  MasterServer& master() { return *master_; }
  Node& node(int i) { return *nodes_[i]; }
  Client& client() { return *client_; }

 private:
  const BenchOptions& opts_;
  int* port_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unique_ptr<Client> client_;
  bool put_waits_ = false;
};

// What the directories cost a put: single-put latency and batched-put
// throughput with directories off (the baseline), on, and on with
// put_waits_for_holders, each on a fresh cluster in this run.
struct PutCostRow {
  const char* mode = "";
  double p50_us = 0, p99_us = 0, batch_puts_per_s = 0;
};

PutCostRow RunPutCost(const BenchOptions& opts, const char* mode,
                      bool directory, bool waits, int* port) {
  PutCostRow row;
  row.mode = mode;
  constexpr int kSingles = 3000, kWarmup = 300;
  constexpr uint64_t kBatched = 100000;
  Harness h(opts, port);
  h.set_put_waits_for_holders(waits);
  if (Status s = h.Start(kBatched + kSingles + kWarmup, directory); !s.ok()) {
    std::fprintf(stderr, "put cost %s: %s\n", mode, s.ToString().c_str());
    return row;
  }
  std::string v(opts.restart_value_bytes, '\0');
  std::vector<double> us;
  for (int i = 0; i < kSingles + kWarmup; ++i) {
    FillValue(i, &v);
    const double t = bench::NowSec();
    Status s = h.client().Put(fmt::format("single-{}", i), v);
    if (!s.ok()) continue;
    if (i >= kWarmup) us.push_back((bench::NowSec() - t) * 1e6);
  }
  row.p50_us = bench::Percentile(us, 50);
  row.p99_us = bench::Percentile(us, 99);
  std::vector<std::string> values(1024, v);
  const double t = bench::NowSec();
  uint64_t done = 0;
  for (uint64_t s = 0; s < kBatched; s += 1024) {
    std::vector<std::string> keys;
    std::vector<std::string_view> views;
    for (uint64_t i = s; i < std::min(kBatched, s + 1024); ++i) {
      keys.push_back(fmt::format("batched-{}", i));
      views.emplace_back(values[i - s]);
    }
    for (const auto& st : h.client().BatchPut(keys, views)) done += st.ok();
  }
  row.batch_puts_per_s = double(done) / (bench::NowSec() - t);
  return row;
}

RestartRow RunCase(const BenchOptions& opts, uint64_t n, bool directory,
                   int* port) {
  RestartRow row;
  row.n = n;
  row.directory = directory;
  const char* tag = directory ? "directory" : "baseline";
  Harness h(opts, port);
  if (Status s = h.Start(n, directory); !s.ok()) {
    row.error = "start: " + s.ToString();
    return row;
  }
  std::vector<std::string> keys;
  keys.reserve(n);
  for (uint64_t i = 0; i < n; ++i) keys.push_back(KeyOf(i));

  // 1. Put N objects.
  std::fprintf(stderr, "  [%s N=%lu] putting %lu x %s\n", tag, n, n,
               FormatSize(opts.restart_value_bytes).c_str());
  {
    std::vector<std::string> vals(kPutBatch,
                                  std::string(opts.restart_value_bytes, '\0'));
    const uint64_t step = std::max<uint64_t>(kPutBatch, n / 10);
    uint64_t next_report = step;
    double t = bench::NowSec();
    for (uint64_t s = 0; s < n; s += kPutBatch) {
      const uint64_t e = std::min<uint64_t>(n, s + kPutBatch);
      std::vector<std::string> bk(keys.begin() + s, keys.begin() + e);
      std::vector<std::string_view> bv;
      for (uint64_t i = s; i < e; ++i) {
        FillValue(i, &vals[i - s]);
        bv.push_back(vals[i - s]);
      }
      for (const auto& st : h.client().BatchPut(bk, bv))
        row.put_failed += !st.ok();
      if (e >= next_report || e == n) {
        std::fprintf(stderr, "    %lu/%lu puts (%.1f s)\n", e, n,
                     bench::NowSec() - t);
        next_report += step;
      }
    }
    row.put_sec = bench::NowSec() - t;
  }
  if (row.put_failed) {
    row.error = fmt::format("{} puts failed", row.put_failed);
    return row;
  }
  if (directory) {
    // The directories are fed by heartbeats: a value whose placement the
    // node has not heard of yet is not one it can hand back.
    double t = bench::NowSec();
    if (!WaitFor(
            [&] {
              return h.node(0).directory().size() +
                         h.node(1).directory().size() >=
                     n;
            },
            kTimeoutSec)) {
      row.error = "directories never caught up";
      return row;
    }
    row.dir_sync_ms = (bench::NowSec() - t) * 1e3;
  }

  // 2. Master restart.
  std::fprintf(stderr, "  [%s N=%lu] restarting the master\n", tag, n);
  double t_stop = bench::NowSec();
  h.StopMaster();
  if (Status s = h.StartMaster(); !s.ok()) {
    row.error = "restart: " + s.ToString();
    return row;
  }
  const double t0 = bench::NowSec();
  row.restart_gap_ms = (t0 - t_stop) * 1e3;
  MasterServer& m = h.master();
  // A new key's put, tried every 10 ms from the moment the master is back.
  std::atomic<double> first_put_at{-1};
  std::atomic<bool> stop_probe{false};
  std::thread probe([&] {
    std::string v(opts.restart_value_bytes, 'p');
    for (int i = 0; !stop_probe; ++i) {
      if (h.client().Put(fmt::format("probe-{}-{}", n, i), v).ok()) {
        first_put_at = bench::NowSec();
        return;
      }
      usleep(10000);
    }
  });
  auto finish_probe = [&] {
    WaitFor([&] { return first_put_at.load() > 0; }, kTimeoutSec);
    stop_probe = true;
    probe.join();
    if (first_put_at.load() > 0) row.first_put_ms = (first_put_at - t0) * 1e3;
  };
  bool both = WaitFor(
      [&] {
        bool a = Mounted(m, h.node(0)), b = Mounted(m, h.node(1));
        if ((a || b) && row.first_mount_ms < 0)
          row.first_mount_ms = (bench::NowSec() - t0) * 1e3;
        return a && b;
      },
      kTimeoutSec, 0.0005);
  if (!both) {
    row.error = "nodes never remounted";
    finish_probe();
    return row;
  }
  row.remount_ms = (bench::NowSec() - t0) * 1e3;

  const uint64_t id0 = h.node(0).segment_id(), id1 = h.node(1).segment_id();
  if (directory) {
    const uint64_t expect =
        h.node(0).directory().size() + h.node(1).directory().size();
    // The master has every copy back when its counters add up to what the
    // directories hold (each copy is taken or refused); an exist sweep then
    // confirms that all N keys exist.
    WaitFor([&] { return Reregistered(m) + Refused(m) >= expect; }, kTimeoutSec,
            0.0005);
    double t_master = bench::NowSec();
    row.reregistered = Reregistered(m);
    row.refused = Refused(m);
    double sweep0 = bench::NowSec();
    row.served = CountPresent(h.client(), keys);
    row.sweep_ms = (bench::NowSec() - sweep0) * 1e3;
    if (row.served == n) {
      row.served_ms = (t_master - t0) * 1e3;
    } else {
      // The counters were fooled (a node declared dead mid-way registers
      // again, and its copies count twice): sweep until every key exists,
      // for at most kSweepSec.
      while (bench::NowSec() - t0 < kSweepSec) {
        usleep(100000);
        row.served = CountPresent(h.client(), keys);
        if (row.served == n) {
          row.served_ms = (bench::NowSec() - t0) * 1e3;
          break;
        }
      }
    }
    double window = (t_master - t0) * 1e3 - std::max(0.0, row.first_mount_ms);
    if (window > 0) row.rereg_per_sec = double(row.reregistered) / window * 1e3;
    finish_probe();
  } else {
    // Nothing is coming back; measure once the segments take puts again,
    // by when a directory would have been in.
    finish_probe();
    double sweep0 = bench::NowSec();
    row.served = CountPresent(h.client(), keys);
    row.sweep_ms = (bench::NowSec() - sweep0) * 1e3;
    if (row.served == n) row.served_ms = row.sweep_ms;
  }
  // A node declared dead during the restart phase mounted again (new
  // segment id) and its objects were dropped as lost.
  row.restart_objects_lost = ObjectsLost(m);
  row.restart_remounts =
      (h.node(0).segment_id() != id0) + (h.node(1).segment_id() != id1);
  row.reregistered = Reregistered(m);
  row.refused = Refused(m);
  row.checksum_mismatches = h.node(0).directory().checksum_mismatches() +
                            h.node(1).directory().checksum_mismatches();

  // Byte-exact read back of a sample of random keys.
  auto check_sample = [&](uint64_t seed, uint64_t* read, uint64_t* wrong,
                          uint64_t* missing) {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> idx;
    for (int i = 0; i < opts.restart_samples && n > 0; ++i)
      idx.push_back(rng() % n);
    std::string want(opts.restart_value_bytes, '\0');
    for (size_t s = 0; s < idx.size(); s += 128) {
      std::vector<std::string> bk;
      for (size_t j = s; j < std::min(idx.size(), s + 128); ++j)
        bk.push_back(keys[idx[j]]);
      auto got = h.client().BatchGet(bk);
      for (size_t j = 0; j < got.size(); ++j) {
        if (!got[j].ok()) {
          ++*missing;
          continue;
        }
        ++*read;
        FillValue(idx[s + j], &want);
        *wrong += got[j].value() != want;
      }
    }
  };
  check_sample(n, &row.sampled, &row.sample_bad, &row.sample_missing);
  if (!directory) return row;

  // 3. Pause node 1 until the master declares it dead, then resume it.
  std::fprintf(stderr, "  [%s N=%lu] pausing node 1 (client_ttl %ld s)\n", tag,
               n, opts.restart_client_ttl_sec);
  Node& paused = h.node(1);
  double tp = bench::NowSec();
  paused.PauseHeartbeats(true);
  if (!WaitFor([&] { return !m.service().nodes().IndexOf(paused.node_id()); },
               kTimeoutSec, 0.005)) {
    row.error = "node 1 was never declared dead";
    paused.PauseHeartbeats(false);
    return row;
  }
  row.dead_after_ms = (bench::NowSec() - tp) * 1e3;
  // The master forgets the node first and its objects shard by shard
  // after: sweep until two sweeps agree.
  for (uint64_t prev = UINT64_MAX;;) {
    uint64_t present = CountPresent(h.client(), keys);
    if (present == prev || bench::NowSec() - tp > kTimeoutSec) {
      row.lost_at_death = n - present;
      break;
    }
    prev = present;
    usleep(50000);
  }
  const uint64_t held = paused.directory().size();
  const uint64_t before = Reregistered(m) + Refused(m);
  double tr = bench::NowSec();
  paused.PauseHeartbeats(false);
  WaitFor([&] { return Reregistered(m) + Refused(m) >= before + held; },
          kTimeoutSec, 0.0005);
  double t_back = bench::NowSec();
  row.pause_rereg_ms = (t_back - tr) * 1e3;
  row.pause_served = CountPresent(h.client(), keys);
  for (int again = 0; row.pause_served < n && again < 3; ++again) {
    usleep(100000);
    row.pause_served = CountPresent(h.client(), keys);
  }
  if (row.pause_served == n) row.pause_recovery_ms = row.pause_rereg_ms;
  row.checksum_mismatches = h.node(0).directory().checksum_mismatches() +
                            h.node(1).directory().checksum_mismatches();
  row.pause_reregistered = Reregistered(m) - row.reregistered;
  row.pause_refused = Refused(m) - row.refused;
  row.pause_held = held;
  check_sample(n + 1, &row.pause_sampled, &row.pause_sample_wrong,
               &row.pause_sample_missing);
  return row;
}

std::string Ms(double v) { return v < 0 ? "-" : fmt::format("{:.0f}", v); }

}  // namespace

int RunRestartBench(const BenchOptions& opts) {
  // Progress and the nodes' re-registration lines on stderr, the table alone
  // on stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("restart-bench"));
  spdlog::set_level(spdlog::level::info);
  std::vector<RestartRow> rows;
  int port = 0;  // the first master picks a free port; the rest reuse it
  const uint64_t largest = *std::max_element(opts.restart_objects.begin(),
                                             opts.restart_objects.end());
  int cases = 0;
  for (uint64_t n : opts.restart_objects) {
    std::fprintf(stderr, "[%d] N=%lu, DRAM directories on\n", ++cases, n);
    rows.push_back(RunCase(opts, n, true, &port));
    if (!opts.restart_baseline_largest_only || n == largest) {
      std::fprintf(stderr, "[%d] N=%lu, baseline: directories off\n", ++cases,
                   n);
      rows.push_back(RunCase(opts, n, false, &port));
    }
  }

  std::printf(
      "\nkvpool bench restart: 2 in-process nodes, values of %s, heartbeat "
      "100 ms, default_kv_lease_ttl %ld ms, client_ttl %ld s\n",
      FormatSize(opts.restart_value_bytes).c_str(), opts.restart_lease_ttl_ms,
      opts.restart_client_ttl_sec);
  const char* kHead = "%-8s %-9s %6s %8s %10s %9s %8s %9s %10s %11s %10s\n";
  std::printf(kHead, "N", "mode", "put_s", "remount", "all_served", "first_put",
              "rereg/s", "pause_rec", "pause_frac", "served_frac", "sample");
  std::printf(kHead, "", "", "", "ms", "ms", "ms", "", "ms", "", "",
              "wrong/read");
  auto frac = [](uint64_t a, uint64_t n) {
    return fmt::format("{:.4f}", n ? double(a) / double(n) : 0.0);
  };
  bool ok = true;
  for (const auto& r : rows) {
    std::printf(
        "%-8lu %-9s %6.2f %8s %10s %9s %8s %9s %10s %11s %10s\n", r.n,
        r.directory ? "directory" : "baseline", r.put_sec,
        Ms(r.remount_ms).c_str(), Ms(r.served_ms).c_str(),
        Ms(r.first_put_ms).c_str(),
        r.directory ? fmt::format("{:.0f}", r.rereg_per_sec).c_str() : "-",
        r.directory ? Ms(r.pause_rereg_ms).c_str() : "-",
        r.directory ? frac(r.pause_served, r.n).c_str() : "-",
        frac(r.served, r.n).c_str(),
        fmt::format("{}/{}", r.sample_bad, r.sampled).c_str());
    if (!r.error.empty()) {
      std::printf("  error: %s\n", r.error.c_str());
      ok = false;
    }
  }
  std::printf(
      "remount, all_served, first_put: ms from the new master serving (-: "
      "not every key came back). pause_rec: ms from node 1's heartbeats "
      "resuming until each copy it held was taken back or refused; "
      "pause_frac: share of the N keys that exist then\n");
  for (const auto& r : rows) {
    if (!r.directory) continue;
    std::printf(
        "N=%-8lu restart: dir sync %s ms, restart gap %.0f ms, first mount %s "
        "ms, exist sweep %.0f ms, re-registered %lu, refused %lu, checksum "
        "mismatches %lu, sample missing %lu; nodes declared dead meanwhile: "
        "%d (%lu objects dropped)\n"
        "           pause: dead after %s ms, %lu keys gone, node 1 held %lu, "
        "re-registered %lu, refused %lu, %lu/%lu keys back; sample: %lu "
        "wrong of %lu read, %lu missing\n",
        r.n, Ms(r.dir_sync_ms).c_str(), r.restart_gap_ms,
        Ms(r.first_mount_ms).c_str(), r.sweep_ms, r.reregistered, r.refused,
        r.checksum_mismatches, r.sample_missing, r.restart_remounts,
        r.restart_objects_lost, Ms(r.dead_after_ms).c_str(), r.lost_at_death,
        r.pause_held, r.pause_reregistered, r.pause_refused, r.pause_served,
        r.n, r.pause_sample_wrong, r.pause_sampled, r.pause_sample_missing);
  }
  std::printf(
      "baseline: the same restart with NodeConfig::dram_directory=false (the "
      "behaviour before re-registration): served_frac is what the new master "
      "serves once its segments take puts again\n");

  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << fmt::format(
        R"({{"value_bytes":{},"heartbeat_interval_ms":100,"default_kv_lease_ttl_ms":{},"client_ttl_sec":{},"rows":[)",
        opts.restart_value_bytes, opts.restart_lease_ttl_ms,
        opts.restart_client_ttl_sec);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"objects":{},"dram_directory":{},"put_sec":{:.3f},"dir_sync_ms":{:.1f},)"
                 R"("restart_gap_ms":{:.1f},"first_mount_ms":{:.1f},"remount_ms":{:.1f},)"
                 R"("all_served_ms":{:.1f},"exist_sweep_ms":{:.1f},"served":{},"served_fraction":{:.6f},)"
                 R"("first_put_ms":{:.1f},"reregistered_per_sec":{:.0f},"reregistered":{},)"
                 R"("refused":{},"checksum_mismatches":{},"sampled":{},"sample_wrong":{},"sample_missing":{},)"
                 R"("restart_nodes_declared_dead":{},"restart_objects_dropped":{},)"
                 R"("dead_after_ms":{:.1f},"lost_at_death":{},"pause_recovery_ms":{:.1f},)"
                 R"("pause_held":{},"pause_rereg_ms":{:.1f},"pause_reregistered":{},)"
                 R"("pause_refused":{},"pause_served":{},"pause_served_fraction":{:.6f},)"
                 R"("pause_sampled":{},"pause_sample_wrong":{},"pause_sample_missing":{},"error":"{}"}})",
                 r.n, r.directory, r.put_sec, r.dir_sync_ms, r.restart_gap_ms,
                 r.first_mount_ms, r.remount_ms, r.served_ms, r.sweep_ms,
                 r.served, r.n ? double(r.served) / double(r.n) : 0.0,
                 r.first_put_ms, r.rereg_per_sec, r.reregistered, r.refused,
                 r.checksum_mismatches, r.sampled, r.sample_bad,
                 r.sample_missing, r.restart_remounts, r.restart_objects_lost,
                 r.dead_after_ms, r.lost_at_death, r.pause_recovery_ms,
                 r.pause_held, r.pause_rereg_ms, r.pause_reregistered,
                 r.pause_refused, r.pause_served,
                 r.n ? double(r.pause_served) / double(r.n) : 0.0,
                 r.pause_sampled, r.pause_sample_wrong, r.pause_sample_missing,
                 r.error);
    }
    out << "]}\n";
  }
  if (!opts.svg_path.empty()) {
    std::vector<bench::LineSeries> series = {
        {"all keys served", {}},
        {"remount", {}},
        {"first put", {}},
        {"pause: node 1 re-registered", {}}};
    for (const auto& r : rows) {
      if (!r.directory || r.n == 0) continue;
      double x = std::log10(double(r.n));
      if (r.served_ms >= 0) series[0].points.emplace_back(x, r.served_ms);
      if (r.remount_ms >= 0) series[1].points.emplace_back(x, r.remount_ms);
      if (r.first_put_ms >= 0) series[2].points.emplace_back(x, r.first_put_ms);
      if (r.pause_rereg_ms >= 0)
        series[3].points.emplace_back(x, r.pause_rereg_ms);
    }
    bench::WriteFile(
        opts.svg_path,
        bench::LineChartSvg("time to a fully served pool after a master "
                            "restart (ms) vs objects",
                            "objects (log10 N)", "ms", series));
  }
  for (const auto& r : rows) {
    if (r.sample_bad != 0 || r.pause_sample_wrong != 0) ok = false;
    if (r.directory && (r.served != r.n || r.sample_missing != 0)) ok = false;
    if (r.directory && r.pause_served != r.n) ok = false;
  }
  // The price of the directories on the put path, measured here too.
  std::fprintf(stderr, "[put cost] 3 modes x (3000 puts + 100k batched)\n");
  std::vector<PutCostRow> cost = {
      RunPutCost(opts, "off (baseline)", false, false, &port),
      RunPutCost(opts, "directory", true, false, &port),
      RunPutCost(opts, "directory+put_waits", true, true, &port)};
  std::printf("\nput cost (values of %s, one client, in process):\n",
              FormatSize(opts.restart_value_bytes).c_str());
  std::printf("%-22s %10s %10s %16s %12s\n", "mode", "put p50 us", "put p99 us",
              "batched puts/s", "vs baseline");
  for (const auto& r : cost) {
    std::printf("%-22s %10.1f %10.1f %16.0f %11.2fx\n", r.mode, r.p50_us,
                r.p99_us, r.batch_puts_per_s,
                cost[0].batch_puts_per_s > 0
                    ? r.batch_puts_per_s / cost[0].batch_puts_per_s
                    : 0.0);
  }
  return ok ? 0 : 1;
}

}  // namespace kvpool
