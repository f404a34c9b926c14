// kvpool bench pressure: puts three times the pool's DRAM of 1 MiB values
// with offload on, in both modes, and reports put latency, how long until
// every key has an SSD copy, and how many acknowledged keys ended with no
// copy at all (the target is zero). The baseline row is the same workload
// with the SSD tier off, measured in the same run: there, eviction drops
// what does not fit.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/bench_main.h"
#include "bench/svg_chart.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"

namespace kvpool {

namespace {

struct PressureRow {
  std::string mode;
  int keys = 0;
  int acked = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double all_copied_sec = -1;  // -1: not every key got a copy in time
  int with_copy = 0;
  int lost = 0;  // acknowledged, then neither in DRAM nor on SSD
  std::vector<double> latencies_ms;
};

std::string Value(int i, uint64_t size) {
  std::string v(size, static_cast<char>('a' + i % 26));
  std::memcpy(v.data(), &i, sizeof(i));
  return v;
}

PressureRow RunMode(const std::string& mode, const BenchOptions& opts,
                    const std::string& root) {
  PressureRow row;
  row.mode = mode;
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.segment_size = opts.pressure_dram_bytes;
  o.heartbeat_interval_ms =
      1000;  // a heartbeat tick is NOT what a put waits for
  o.default_kv_lease_ttl = 1000;
  if (mode != "no-ssd") {
    o.enable_ssd = true;
    o.ssd_root = root + "/" + mode;
    o.ssd_capacity_bytes = 8 * opts.pressure_dram_bytes;
    o.ssd_segment_file_size = 64ull << 20;
    o.offload_on_evict = mode == "offload_on_evict";
  }
  LocalCluster cluster(o);
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    return row;
  }
  auto client = cluster.NewClient().value();
  const uint64_t size = 1ull << 20;
  row.keys = static_cast<int>(3 * opts.pressure_dram_bytes / size);
  std::vector<bool> acked(row.keys, false);
  double start = bench::NowSec();
  for (int i = 0; i < row.keys; ++i) {
    std::string v = Value(i, size);
    double t = bench::NowSec();
    Status s = client->Put("p-" + std::to_string(i), v);
    row.latencies_ms.push_back((bench::NowSec() - t) * 1e3);
    acked[i] = s.ok();
    row.acked += s.ok();
    if ((i + 1) % std::max(1, row.keys / 5) == 0) {
      std::fprintf(stderr, "  %s: %d/%d puts\n", mode.c_str(), i + 1, row.keys);
    }
  }
  double puts_done = bench::NowSec();
  row.p50_ms = bench::Percentile(row.latencies_ms, 50);
  row.p99_ms = bench::Percentile(row.latencies_ms, 99);
  row.max_ms = bench::Percentile(row.latencies_ms, 100);
  // Every key with a copy, or lost: poll the tier lookup (read-only).
  std::vector<std::string> keys;
  for (int i = 0; i < row.keys; ++i) keys.push_back("p-" + std::to_string(i));
  double deadline = puts_done + 60;
  while (true) {
    auto tiers = client->BatchGetReplicaDesc(keys);
    row.with_copy = 0;
    row.lost = 0;
    for (int i = 0; i < row.keys; ++i) {
      bool disk = false, any = tiers[i].ok();
      if (any) {
        for (const auto& r : tiers[i]->replicas) {
          disk |= r.kind == ReplicaInfo::Kind::kLocalDisk && r.complete;
        }
      }
      row.with_copy += disk;
      row.lost += acked[i] && !any;
    }
    if (mode == "no-ssd" || mode == "offload_on_evict")
      break;  // nothing more will come
    if (row.with_copy == row.acked) {
      row.all_copied_sec = bench::NowSec() - start;
      break;
    }
    if (bench::NowSec() > deadline) break;
    usleep(20000);
  }
  cluster.Stop();
  return row;
}

}  // namespace

int RunPressureBench(const BenchOptions& opts) {
  std::string root = fmt::format(
      "{}/kvpool-pressure-{}", opts.dir.empty() ? "/tmp" : opts.dir, getpid());
  std::filesystem::create_directories(root);
  std::vector<PressureRow> rows;
  for (const char* mode : {"no-ssd", "proactive", "offload_on_evict"}) {
    std::fprintf(stderr, "[%zu/3] %s\n", rows.size() + 1, mode);
    rows.push_back(RunMode(mode, opts, root));
  }
  std::filesystem::remove_all(root);

  std::printf(
      "\nkvpool bench pressure: %d x 1 MiB puts into %s of DRAM (3x), one "
      "node\n",
      rows[0].keys, FormatSize(opts.pressure_dram_bytes).c_str());
  std::printf("%-17s %6s %6s %9s %9s %9s %12s %10s %6s\n", "mode", "keys",
              "acked", "p50_ms", "p99_ms", "max_ms", "all_copied_s",
              "with_copy", "lost");
  for (const auto& r : rows) {
    std::printf("%-17s %6d %6d %9.2f %9.2f %9.2f %12s %10d %6d\n",
                r.mode.c_str(), r.keys, r.acked, r.p50_ms, r.p99_ms, r.max_ms,
                r.all_copied_sec < 0
                    ? "-"
                    : fmt::format("{:.2f}", r.all_copied_sec).c_str(),
                r.with_copy, r.lost);
  }
  std::printf(
      "baseline: no-ssd (eviction drops what does not fit). targets: lost = 0 "
      "with "
      "offload; p99 put within a few SSD writes, not a heartbeat (1000 ms "
      "here)\n");
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"mode":"{}","keys":{},"acked":{},"p50_ms":{:.3f},"p99_ms":{:.3f},)"
                 R"("max_ms":{:.3f},"all_copied_sec":{:.3f},"with_copy":{},"lost":{}}})",
                 r.mode, r.keys, r.acked, r.p50_ms, r.p99_ms, r.max_ms,
                 r.all_copied_sec, r.with_copy, r.lost);
    }
    out << "]\n";
  }
  if (!opts.svg_path.empty()) {
    std::vector<bench::LineSeries> series;
    for (const auto& r : rows) {
      bench::LineSeries s{r.mode, {}};
      for (size_t i = 0; i < r.latencies_ms.size(); ++i) {
        s.points.emplace_back(double(i), r.latencies_ms[i]);
      }
      series.push_back(std::move(s));
    }
    bench::WriteFile(opts.svg_path,
                     bench::LineChartSvg("put latency under DRAM pressure",
                                         "put #", "ms", series));
  }
  return 0;
}

}  // namespace kvpool
