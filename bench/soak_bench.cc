// kvpool bench soak: the driver. Starts the server processes, runs the load
// threads, samples every interval until the time is up (or a server dies,
// or a signal arrives), sweeps every key once, stops everything and reports.
#include "bench/soak_bench.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>

#include "bench/soak_cluster.h"
#include "bench/soak_load.h"
#include "bench/soak_report.h"
#include "bench/soak_sampler.h"
#include "bench/soak_signals.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/client.h"

namespace kvpool {

namespace {

namespace fs = std::filesystem;
using soak::OpKind;

// kvpool-master and kvpool-node are built next to `kvpool`.
std::string BinDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

uint64_t SumCalls(const soak::LoadStats& st) {
  uint64_t n = 0;
  for (int i = 0; i < int(OpKind::kCount); ++i) {
    if (i != int(OpKind::kSweep)) n += st.calls[i].load();
  }
  return n;
}

// Removes the scratch directory when the run ends, however it ends; declared
// before the cluster, so the servers are stopped before their files go.
struct ScratchDir {
  std::string path;
  bool keep = false;
  ~ScratchDir() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
};

}  // namespace

int RunSoakBench(const SoakOptions& opts) {
  if (opts.minutes <= 0 || opts.clients < 1 || opts.sample_seconds <= 0 ||
      opts.keys_per_client < 8) {
    std::fprintf(stderr,
                 "error: need --minutes > 0, --clients >= 1, "
                 "--sample-seconds > 0, --keys >= 8\n");
    return 2;
  }
  // Before any thread exists (the clients' gRPC threads inherit the mask).
  soak::SignalWaiter signals;

  const std::string base =
      opts.dir.empty() ? fs::temp_directory_path().string() : opts.dir;
  // A directory of our own inside --dir: removing it at the end can never
  // take anything of the user's with it.
  const std::string dir = base + "/kvpool-soak-" + std::to_string(getpid());
  soak::ClusterOptions co;
  co.bin_dir = BinDir();
  co.dir = dir;
  co.nodes = 2;
  co.node_dram_bytes = opts.node_dram_bytes;
  co.node_ssd_bytes = opts.node_ssd_bytes;

  soak::Report report;
  report.clients = opts.clients;
  int rc = 0;
  const double total_sec = opts.minutes * 60;
  {
    ScratchDir scratch{dir, opts.keep_dir};
    soak::SoakCluster cluster(co);
    std::printf(
        "== kvpool bench soak: %.1f min, %d clients x %d keys, values "
        "%s..%s, 2 nodes x %s DRAM + %s SSD under %s\n",
        opts.minutes, opts.clients, opts.keys_per_client,
        FormatSize(soak::kMinValueBytes).c_str(),
        FormatSize(soak::kMaxValueBytes).c_str(),
        FormatSize(opts.node_dram_bytes).c_str(),
        FormatSize(opts.node_ssd_bytes).c_str(), dir.c_str());
    std::fflush(stdout);
    if (Status s = cluster.Start(signals); !s.ok()) {
      std::fprintf(stderr, "error: servers did not start: %s\n",
                   s.ToString().c_str());
      return 1;
    }
    const auto& servers = cluster.servers();
    for (const auto& s : servers) {
      report.proc_names.push_back(s.name);
      std::printf("   %-6s pid %d\n", s.name.c_str(), int(s.pid));
    }
    report.num_servers = servers.size();
    report.proc_names.push_back("bench");
    std::printf("   master at %s\n", cluster.master_address().c_str());

    // The nodes have printed their start-up line; wait until the master
    // lists both segments, so that the first puts see the whole pool.
    ClientConfig mc;
    mc.master_server_address = cluster.master_address();
    auto monitor = Client::Create(mc);
    bool pool_ready = false;
    if (monitor.ok()) {
      const double deadline = bench::NowSec() + 30;
      while (!pool_ready && bench::NowSec() < deadline && signals.Wait(0.05)) {
        auto st = monitor.value()->Stat();
        pool_ready = st.ok() && st->segments.size() >= 2;
      }
    }
    if (!pool_ready) {
      std::fprintf(stderr, "error: the master never listed both nodes%s\n",
                   signals.interrupted() ? " (interrupted)" : "");
      return 1;
    }

    soak::LoadStats stats;
    std::vector<std::unique_ptr<soak::LoadClient>> loads;
    for (int i = 0; i < opts.clients; ++i) {
      soak::LoadOptions lo;
      lo.client_index = i;
      lo.num_clients = opts.clients;
      lo.keys_per_client = opts.keys_per_client;
      lo.master_address = cluster.master_address();
      lo.tcp = i % 2 == 1;  // both data paths: shared memory and TCP
      lo.seed = 0x50a4 + uint64_t(i);
      loads.push_back(std::make_unique<soak::LoadClient>(lo, &stats));
      if (Status s = loads.back()->Init(); !s.ok()) {
        std::fprintf(stderr, "error: client %d: %s\n", i, s.ToString().c_str());
        return 1;
      }
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    const double t0 = bench::NowSec();
    for (auto& l : loads)
      threads.emplace_back([&stop, l = l.get()] { l->Run(stop); });

    uint64_t last_calls = 0, last_written = 0, last_read = 0;
    double last_t = t0;
    bool crashed = false;
    std::set<std::string> reported;  // servers whose death is reported
    for (int i = 1;; ++i) {
      const double due = t0 + std::min(i * opts.sample_seconds, total_sec);
      while (bench::NowSec() < due && signals.Wait(due - bench::NowSec())) {
      }
      if (signals.interrupted()) break;
      soak::Sample s;
      const double now = bench::NowSec();
      const double dt = std::max(now - last_t, 1e-3);
      s.t_sec = now - t0;
      for (const auto& p : servers)
        s.procs.push_back(soak::SampleProcess(p.pid));
      s.procs.push_back(soak::SampleProcess(getpid()));
      s.ssd_bytes = soak::DiskBytes(dir);
      const auto put_lat = stats.put_latency.Take();
      const auto get_lat = stats.get_latency.Take();
      const uint64_t calls = SumCalls(stats);
      const uint64_t written = stats.bytes_written.load();
      const uint64_t read = stats.bytes_read.load();
      s.ops_per_sec = double(calls - last_calls) / dt;
      s.put_per_sec = double(put_lat.size()) / dt;
      s.get_per_sec = double(get_lat.size()) / dt;
      s.put_p50_ms = bench::Percentile(put_lat, 50) * 1e3;
      s.put_p99_ms = bench::Percentile(put_lat, 99) * 1e3;
      s.get_p50_ms = bench::Percentile(get_lat, 50) * 1e3;
      s.get_p99_ms = bench::Percentile(get_lat, 99) * 1e3;
      s.write_mb_per_sec = double(written - last_written) / dt / 1e6;
      s.read_mb_per_sec = double(read - last_read) / dt / 1e6;
      s.wrong_reads = stats.wrong_reads.load();
      last_calls = calls;
      last_written = written;
      last_read = read;
      last_t = now;
      report.samples.push_back(s);
      std::printf("%s\n", report.ProgressLine(s, total_sec).c_str());
      std::fflush(stdout);
      for (const auto& name : cluster.ReapExited()) {
        crashed = true;
        reported.insert(name);
        for (const auto& p : servers) {
          if (p.name != name) continue;
          report.failures.push_back(fmt::format(
              "{} (pid {}) died during the soak: {}", name, int(p.pid),
              soak::SoakCluster::DescribeStatus(p.wait_status)));
          std::fprintf(stderr, "error: %s\n%s", report.failures.back().c_str(),
                       soak::SoakCluster::LogTail(p, 30).c_str());
        }
      }
      if (crashed || s.t_sec >= total_sec - 1e-6) break;
    }
    stop = true;
    for (auto& t : threads) t.join();
    report.seconds = bench::NowSec() - t0;
    if (signals.interrupted()) {
      report.failures.push_back(
          fmt::format("interrupted by signal {} after {:.0f} s",
                      signals.signal(), report.seconds));
    }
    // Every key once more, now that nothing races the reads: hits must be
    // the latest acknowledged version, absent keys must be absent.
    if (!crashed) {
      std::printf("== final sweep: every key read once\n");
      for (auto& l : loads) l->FinalSweep();
    }
    if (auto st = monitor.value()->Stat(); st.ok()) {
      report.objects = st->objects;
      report.evictions = st->evictions;
    }
    for (int i = 0; i < int(OpKind::kCount); ++i)
      report.calls[soak::OpName(OpKind(i))] = stats.calls[i].load();
    report.errors = stats.Errors();
    report.hits = stats.hits.load();
    report.misses = stats.misses.load();
    report.wrong_reads = stats.wrong_reads.load();
    if (report.hits == 0)
      report.failures.push_back(
          "no read returned a value: the load did not run");

    // The clients go before the servers, so none of them is left retrying.
    loads.clear();
    monitor.value().reset();
    if (!cluster.Stop()) {
      for (const auto& p : cluster.servers()) {
        if (reported.count(p.name)) continue;
        std::string what;
        if (p.unexpected_exit) {
          what = fmt::format("{} (pid {}) died during the soak: {}", p.name,
                             int(p.pid),
                             soak::SoakCluster::DescribeStatus(p.wait_status));
        } else if (!WIFEXITED(p.wait_status) ||
                   WEXITSTATUS(p.wait_status) != 0) {
          what = fmt::format("{} did not shut down cleanly: {}", p.name,
                             soak::SoakCluster::DescribeStatus(p.wait_status));
        } else {
          continue;
        }
        report.failures.push_back(what);
        std::fprintf(stderr, "error: %s\n%s", what.c_str(),
                     soak::SoakCluster::LogTail(p, 30).c_str());
      }
    }
  }

  report.PrintTable();
  report.PrintVerdict();
  if (!opts.json_path.empty() && !report.WriteJson(opts.json_path)) rc = 1;
  if (!opts.svg_prefix.empty() && !report.WriteSvgs(opts.svg_prefix)) rc = 1;
  if (report.wrong_reads > 0 || !report.failures.empty()) rc = 1;
  return rc;
}

}  // namespace kvpool
