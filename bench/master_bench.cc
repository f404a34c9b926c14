// kvpool bench master: read-only tier lookups per second at batch 128 (in
// process and over gRPC) and master bytes per object at N objects, beside a
// plain std::unordered_map<std::string, uint64_t> measured in the same run.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>

#include "bench/bench_main.h"
#include "bench/call_latency_bench.h"
#include "benchutil/bench_util.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "master/master_service.h"

namespace kvpool {

namespace {
std::string KeyOf(uint64_t i) { return fmt::format("key-{:08d}", i); }

void Fill(MasterService& svc, uint64_t n) {
  uint64_t step = std::max<uint64_t>(1, n / 10);
  for (uint64_t i = 0; i < n; ++i) {
    std::string k = KeyOf(i);
    bench::MustOk(svc.PutStart("", k, 4096, {}).status(), "PutStart");
    bench::MustOk(svc.PutEnd("", k), "PutEnd");
    if ((i + 1) % step == 0)
      std::fprintf(stderr, "  filled %lu/%lu\n", i + 1, n);
  }
}
}  // namespace

int PrintCallLatency(const BenchOptions& opts);

int RunMasterBench(const BenchOptions& opts) {
  if (opts.master_calls_only) return PrintCallLatency(opts);
  const uint64_t n = opts.objects;
  const int kBatch = 128;

  // --- memory per object ------------------------------------------------
  std::fprintf(stderr, "[1/4] baseline map of %lu keys\n", n);
  uint64_t rss0 = bench::RssBytes();
  double map_bytes_per = 0;
  {
    auto m = std::make_unique<std::unordered_map<std::string, uint64_t>>();
    for (uint64_t i = 0; i < n; ++i) (*m)[KeyOf(i)] = i;
    map_bytes_per = double(bench::RssBytes() - rss0) / double(n);
  }
  std::fprintf(stderr, "[2/4] master with %lu objects\n", n);
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  mc.client_ttl = 1 << 20;  // the fake segment never heartbeats
  MasterServer server(mc);
  if (Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "master: %s\n", s.ToString().c_str());
    return 1;
  }
  MasterService& svc = server.service();
  SegmentInfo seg;
  seg.node_id = "bench-node";
  seg.capacity = 64ull << 40;  // virtual: the master never touches bytes
  seg.data_endpoint = "127.0.0.1:1";
  bench::MustOk(svc.MountSegment(seg).status(), "MountSegment");
  uint64_t rss1 = bench::RssBytes();
  Fill(svc, n);
  double master_bytes_per = double(bench::RssBytes() - rss1) / double(n);

  // --- lookups per second -----------------------------------------------
  std::fprintf(stderr, "[3/4] in-process lookups\n");
  std::vector<std::vector<std::string>> batches;
  std::mt19937_64 rng(7);
  for (int b = 0; b < 256; ++b) {
    std::vector<std::string> keys;
    for (int j = 0; j < kBatch; ++j) keys.push_back(KeyOf(rng() % n));
    batches.push_back(std::move(keys));
  }
  auto in_proc = [&](double seconds) {
    uint64_t keys = 0, found = 0;
    double t0 = bench::NowSec();
    size_t b = 0;
    BatchQueryResult out;
    while (bench::NowSec() - t0 < seconds) {
      out.items.clear();
      out.replicas.clear();
      const auto& batch = batches[b++ % batches.size()];
      svc.QueryReadOnlyBatch("", batch, &out);
      for (const auto& item : out.items) found += item.code == ErrorCode::OK;
      keys += batch.size();
    }
    return std::pair{double(keys) / (bench::NowSec() - t0), found == keys};
  };
  auto [inproc_rate, inproc_ok] = in_proc(opts.seconds_per_case);
  // Baseline: the same key batches against the plain map.
  std::unordered_map<std::string, uint64_t> small;
  for (uint64_t i = 0; i < n; ++i) small[KeyOf(i)] = i;
  uint64_t mk = 0, mf = 0;
  double t0 = bench::NowSec();
  for (size_t b = 0; bench::NowSec() - t0 < opts.seconds_per_case; ++b) {
    for (const auto& k : batches[b % batches.size()]) {
      mf += small.count(k);
      ++mk;
    }
  }
  double map_rate = double(mk) / (bench::NowSec() - t0);
  small.clear();

  std::fprintf(stderr, "[4/4] gRPC lookups (BatchQueryReadOnly, batch %d)\n",
               kBatch);
  std::vector<std::pair<int, double>> grpc_rates;
  for (int threads : {1, 2, 4}) {
    std::atomic<uint64_t> total{0};
    std::atomic<bool> all_found{true};
    std::vector<std::thread> ts;
    double start = bench::NowSec();
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        ClientConfig cc;
        cc.master_server_address = server.address();
        auto c = Client::Create(cc);
        size_t b = size_t(t) * 17;
        while (bench::NowSec() - start < opts.seconds_per_case) {
          auto r =
              c.value()->BatchGetReplicaDesc(batches[b++ % batches.size()]);
          for (const auto& x : r) all_found = all_found && x.ok();
          total += r.size();
        }
      });
    }
    for (auto& th : ts) th.join();
    grpc_rates.emplace_back(threads, double(total) / (bench::NowSec() - start));
    if (!all_found) {
      std::fprintf(stderr, "error: some lookups failed\n");
      return 1;
    }
  }

  std::printf(
      "\nkvpool bench master (%lu objects, 4 KiB each, keys like "
      "key-00000001)\n",
      n);
  std::printf("%-44s %14s %16s\n", "case", "keys/s", "bytes/object");
  std::printf("%-44s %14.0f %16.1f\n",
              "master: QueryReadOnlyBatch in process, b=128", inproc_rate,
              master_bytes_per);
  for (auto [threads, rate] : grpc_rates) {
    std::printf(
        "%-44s %14.0f %16s\n",
        fmt::format("master: BatchQueryReadOnly gRPC, {} thread(s)", threads)
            .c_str(),
        rate, "");
  }
  std::printf("%-44s %14.0f %16.1f\n", "baseline: unordered_map<string,u64>",
              map_rate, map_bytes_per);
  std::printf("targets: >= 500000 keys/s at batch 128; <= 200 bytes/object\n");
  if (!inproc_ok) std::printf("warning: some in-process lookups missed\n");
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << fmt::format(
        R"({{"objects":{},"inproc_keys_per_sec":{:.0f},"master_bytes_per_object":{:.1f},)"
        R"("baseline_map_keys_per_sec":{:.0f},"baseline_map_bytes_per_object":{:.1f},"grpc":[)",
        n, inproc_rate, master_bytes_per, map_rate, map_bytes_per);
    for (size_t i = 0; i < grpc_rates.size(); ++i) {
      out << (i ? "," : "")
          << fmt::format(R"({{"threads":{},"keys_per_sec":{:.0f}}})",
                         grpc_rates[i].first, grpc_rates[i].second);
    }
    out << "]}\n";
  }
  server.Stop();

  return PrintCallLatency(opts);
}

int PrintCallLatency(const BenchOptions& opts) {
  std::fprintf(stderr, "[5/5] per-call latency through kvpool::Client\n");
  auto calls = MeasureCallLatency(opts.seconds_per_case);
  if (!calls.ok()) {
    std::fprintf(stderr, "error: %s\n", calls.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "\nper-call latency (one client thread, 1 node on this host, 4 KiB "
      "values; floor = the same RPC carrying no keys, same run)\n");
  std::printf("%-36s %6s %10s %10s %12s\n", "call", "batch", "p50_us", "p99_us",
              "p50-floor");
  const double floor_us = calls.value()[0].p50_us;
  for (const auto& r : calls.value()) {
    std::printf("%-36s %6d %10.1f %10.1f %12.1f\n", r.op.c_str(), r.batch,
                r.p50_us, r.p99_us, r.p50_us - floor_us);
  }
  return 0;
}

}  // namespace kvpool
