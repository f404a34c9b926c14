// kvpool-engine-sim: the replay's engine model against a running
// kvpool-master, for multi-process deployments. N simulated engines (by
// default the batching model: continuous batching with asynchronous KV
// loads; --engine=serial for the first model), with real BatchIsExist /
// BatchGetInto / BatchPutFrom and modelled forward steps, replay a trace
// slice at its arrival times;
// optionally every request goes through an in-process kvpool::Router first
// (--router), which triggers BatchPrefetchToMemory for SSD-only prefixes.
// Prints TTFT and block-read figures, and writes them as JSON (--json).
//
// The engine model scales prefill and decode by the per-block read times of
// this deployment (see docs/replay.md). Give them (--ssd_read_ms,
// --dram_read_ms, e.g. from `kvpool replay` or `kvpool bench tier-latency`),
// or the DRAM time is measured here on calibration blocks and the SSD time
// taken as the modelled SSD:DRAM ratio times it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "common/absl_runtime.h"
#include "kvpool/client.h"
#include "kvpool/router.h"
#include "replay/clock_util.h"
#include "replay/engine.h"
#include "replay/phases.h"
#include "replay/report.h"
#include "storage/aligned_buffer.h"
#include "tools/flags.h"

namespace {

using namespace kvpool;
using namespace kvpool::replay;

// Median per-block time (ms) of batched DRAM reads of fresh blocks.
Result<double> MeasureDram(Client& c, uint64_t bb) {
  const int kBatch = 16, kRounds = 16;
  std::vector<std::string> keys;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kBatch; ++i) {
    keys.push_back(fmt::format("engine-sim-cal-{}-{}", getpid(), i));
    ids.push_back((1ull << 62) | uint64_t(i));
  }
  {
    BlockWriter w(c, bb);
    if (w.Put(keys, ids) > 0) {
      return Status(ErrorCode::INTERNAL_ERROR, "calibration puts failed");
    }
  }
  storage::AlignedBuffer buf(kBatch * bb);
  if (Status s = c.RegisterBuffer(buf.data(), buf.size()); !s.ok()) return s;
  std::vector<void*> ptrs;
  for (int i = 0; i < kBatch; ++i) ptrs.push_back(buf.data() + i * bb);
  std::vector<uint64_t> sizes(kBatch, bb);
  std::vector<double> ms;
  for (int r = 0; r < kRounds; ++r) {
    const double t = NowSec();
    auto got = c.BatchGetInto(keys, ptrs, sizes);
    const double dt = (NowSec() - t) * 1e3;
    bool ok = true;
    for (const auto& g : got) ok &= g.ok();
    if (ok) ms.push_back(dt / kBatch);
  }
  // Cleanup on the way out: what could not be removed expires with its
  // lease.
  c.UnregisterBuffer(buf.data()).IgnoreError();
  for (const auto& k : keys) c.Remove(k, /*force=*/true).IgnoreError();
  if (ms.empty()) return Status(ErrorCode::INTERNAL_ERROR, "no read succeeded");
  return bench::Percentile(ms, 50);
}

}  // namespace

int main(int argc, char** argv) {
  kvpool::ConfigureAbslRuntime();
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "kvpool-engine-sim: simulated inference engines replaying a trace "
      "against a running kvpool-master"};
  std::string master = "127.0.0.1:50051", trace_path, json_path;
  size_t start = 0, count = 200;
  int engines = 4;
  uint64_t block_bytes = 1ull << 20;
  double time_scale = 1.0, ssd_ms = -1, dram_ms = -1, utilisation = 0.8;
  bool exist_prefetch = false, use_router = false, router_prefetch = true;
  std::vector<std::string> local_nodes;
  EngineModelOverrides ov;
  HardwareModel hw;
  EngineKind kind = EngineKind::kBatching;
  SchedulerConfig sched;
  int loaders = 2;
  app.add_option_function<std::string>(
         "--engine",
         [&](const std::string& v) {
           if (!ParseEngineKind(v, &kind)) {
             throw CLI::ValidationError("--engine", "batching or serial");
           }
         },
         "batching (default) or serial")
      ->default_str("batching");
  app.add_option_function<std::string>(
         "--load_start",
         [&](const std::string& v) {
           if (!ParseLoadStart(v, &sched.load_start)) {
             throw CLI::ValidationError("--load_start", "admission or arrival");
           }
         },
         "batching: KV load starts at admission or arrival")
      ->default_str("admission");
  app.add_option("--max_num_batched_tokens", sched.max_num_batched_tokens,
                 "batching: tokens per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max_num_seqs", sched.max_num_seqs,
                 "batching: requests holding GPU KV at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--gpu_kv_tokens", sched.gpu_kv_tokens,
                 "batching: GPU KV capacity in tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--loaders", loaders, "batching: KV loads in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--master", master, "HOST:PORT of kvpool-master")
      ->capture_default_str();
  app.add_option("--trace", trace_path, "trace file")->required();
  app.add_option("--start", start, "first trace request replayed")
      ->capture_default_str();
  app.add_option("--requests", count, "requests replayed")
      ->capture_default_str();
  app.add_option("--engines", engines, "simulated engines")
      ->capture_default_str();
  AddSizeFlag(app, "--block_size", &block_bytes, "bytes per 512-token block");
  app.add_option("--time_scale", time_scale, "machine s per trace s")
      ->capture_default_str();
  app.add_flag("--exist_prefetch", exist_prefetch,
               "engines probe with BatchIsExist(prefetch_to_memory)");
  app.add_flag("--router", use_router,
               "route every request through an in-process kvpool::Router");
  app.add_flag("!--no_router_prefetch", router_prefetch,
               "with --router: look up and dispatch only");
  app.add_option("--local_nodes", local_nodes,
                 "node id co-located with engine i (i mod count), for the "
                 "router's affinity")
      ->delimiter(',');
  app.add_option("--ssd_read_ms", ssd_ms, "measured SSD read per block");
  app.add_option("--dram_read_ms", dram_ms,
                 "measured DRAM read per block (default: measured here)");
  app.add_option("--prefill_fixed_ms", ov.prefill_fixed_ms, "override a");
  app.add_option("--prefill_ms_per_token", ov.prefill_ms_per_token,
                 "override b");
  app.add_option("--decode_ms_per_token", ov.decode_ms_per_token,
                 "override decode (default: auto, see --utilisation)");
  app.add_option("--utilisation", utilisation,
                 "utilisation the automatic decode time aims at")
      ->capture_default_str();
  app.add_option("--json", json_path, "write the results here");
  CLI11_PARSE(app, argc, argv);

  auto trace_r = ReadTrace(trace_path, start + count);
  if (!trace_r.ok()) {
    std::fprintf(stderr, "error: %s\n", trace_r.status().ToString().c_str());
    return 2;
  }
  const auto& trace = trace_r.value();
  if (start >= trace.size()) {
    std::fprintf(stderr, "error: --start beyond the trace\n");
    return 2;
  }
  const size_t end = trace.size();
  const BatchScheduler fit(sched);
  for (size_t i = start; i < end; ++i) {
    if (kind == EngineKind::kBatching &&
        fit.TooLarge(trace[i].input_length, trace[i].output_length)) {
      std::fprintf(stderr, "error: request %zu exceeds --gpu_kv_tokens\n", i);
      return 2;
    }
  }
  ClientConfig cc;
  cc.master_server_address = master;
  cc.enable_ssd_prefetch = exist_prefetch;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < engines; ++i) {
    auto c = Client::Create(cc);
    if (!c.ok()) {
      std::fprintf(stderr, "error: %s\n", c.status().ToString().c_str());
      return 2;
    }
    clients.push_back(std::move(c.value()));
  }
  std::string read_source = "given";
  if (dram_ms <= 0) {
    auto d = MeasureDram(*clients[0], block_bytes);
    if (!d.ok()) {
      std::fprintf(stderr, "error: DRAM calibration: %s\n",
                   d.status().ToString().c_str());
      return 2;
    }
    dram_ms = d.value();
    read_source = "DRAM measured here";
  }
  if (ssd_ms <= 0) {
    ssd_ms = dram_ms * hw.ssd_read_ms / hw.dram_read_ms;
    read_source += ", SSD = modelled ratio x DRAM";
  }
  EngineModel model = DeriveEngineModel(hw, {ssd_ms, dram_ms, 16, 16}, ov);
  LoadEstimate load = EstimateLoad(trace, start, end, time_scale, model);
  if (ov.decode_ms_per_token < 0) {
    model.decode_ms_per_token = DecodeMsPerTokenFor(utilisation, engines, load);
    model.decode_source = "auto";
  }
  std::fprintf(stderr,
               "engine model (%s): SSD %.3f / DRAM %.3f ms per block, prefill "
               "%.2f ms per block, decode %.3f ms/token (%s)\n",
               read_source.c_str(), ssd_ms, dram_ms, model.PrefillBlockMs(),
               model.decode_ms_per_token, model.decode_source.c_str());

  std::unique_ptr<Router> router;
  if (use_router) {
    RouterConfig rc;
    rc.master_server_address = master;
    rc.enable_prefetch = router_prefetch;
    for (int i = 0; i < engines; ++i) {
      EngineInfo e;
      e.id = fmt::format("engine-{}", i);
      if (!local_nodes.empty()) {
        e.local_node_ids = {local_nodes[size_t(i) % local_nodes.size()]};
      }
      rc.engines.push_back(e);
    }
    auto r = Router::Create(rc);
    if (!r.ok()) {
      std::fprintf(stderr, "error: router: %s\n",
                   r.status().ToString().c_str());
      return 2;
    }
    router = std::move(r.value());
  }

  size_t max_blocks = 0;
  for (size_t i = start; i < end; ++i) {
    max_blocks = std::max(max_blocks, trace[i].hash_ids.size());
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestRecord> records;
  std::vector<std::unique_ptr<Engine>> pool;
  for (int i = 0; i < engines; ++i) {
    EngineConfig ec;
    ec.index = i;
    ec.id = fmt::format("engine-{}", i);
    ec.block_bytes = block_bytes;
    ec.max_blocks = max_blocks;
    ec.exist_prefetch = exist_prefetch;
    ec.scheduler = sched;
    ec.loaders = loaders;
    pool.push_back(MakeEngine(kind, ec, clients[size_t(i)].get(), &model,
                              [&, id = ec.id](RequestRecord r) {
                                if (router) router->Complete(id);
                                std::lock_guard<std::mutex> lock(mu);
                                records.push_back(std::move(r));
                                cv.notify_all();
                              }));
    if (Status s = pool.back()->Start(); !s.ok()) {
      std::fprintf(stderr, "error: engine: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  const double t0 = NowSec() + 0.05, ts0 = trace[start].timestamp_ms;
  for (size_t i = start; i < end; ++i) {
    EngineRequest er;
    er.index = i;
    er.trace = &trace[i];
    er.arrival_s = t0 + (trace[i].timestamp_ms - ts0) / 1000 * time_scale;
    SleepUntilSec(er.arrival_s);
    int target = int(i % size_t(engines));
    if (router) {
      RouteRequest rq;
      rq.request_id = fmt::format("req-{}", i);
      for (uint64_t h : trace[i].hash_ids) rq.block_keys.push_back(BlockKey(h));
      auto d = router->Route(rq);
      if (d.ok()) {
        er.route.routed = true;
        er.route.routed_s = NowSec();
        for (const auto& b : d->prefix_tiers) {
          er.route.tiers.push_back(b.tier == "memory"       ? 'M'
                                   : b.tier == "local_disk" ? 'S'
                                                            : 'P');
          er.route.holders.push_back(b.node_id);
        }
        for (int k = 0; k < engines; ++k) {
          if (d->engine_id == fmt::format("engine-{}", k)) target = k;
        }
      }
    } else {
      size_t best = SIZE_MAX;
      for (int k = 0; k < engines; ++k) {
        size_t l = pool[size_t(k)]->Load();
        if (l < best) {
          best = l;
          target = k;
        }
      }
    }
    pool[size_t(target)]->Enqueue(std::move(er));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return records.size() >= end - start; });
  }
  for (auto& e : pool) e->Drain();

  std::vector<double> ttft, load_ms, queue;
  uint64_t dram = 0, ssd = 0, rs = 0, rd = 0, corrupt = 0, put_failed = 0;
  for (const auto& r : records) {
    ttft.push_back(r.ttft_ms);
    load_ms.push_back(r.load_ms);
    queue.push_back(r.queue_ms);
    dram += r.dram_reads;
    ssd += r.ssd_reads;
    rs += r.route_ssd_only;
    rd += r.route_ssd_read_dram;
    corrupt += r.corrupt;
    put_failed += r.put_failed;
  }
  nlohmann::json j = {{"requests", records.size()},
                      {"ttft_ms", Distribution(ttft)},
                      {"queue_ms", Distribution(queue)},
                      {"kv_load_ms", Distribution(load_ms)},
                      {"blocks_from_dram", dram},
                      {"blocks_from_ssd", ssd},
                      {"ssd_only_at_route", rs},
                      {"ssd_only_at_route_read_from_dram", rd},
                      {"corrupt", corrupt},
                      {"puts_failed", put_failed},
                      {"engine_model",
                       {{"ssd_ms_per_block", ssd_ms},
                        {"dram_ms_per_block", dram_ms},
                        {"read_times", read_source},
                        {"prefill_block_ms", model.PrefillBlockMs()},
                        {"prefill_fixed_ms", model.prefill_fixed_ms},
                        {"decode_ms_per_token", model.decode_ms_per_token}}}};
  std::printf(
      "%zu requests, %d engines%s%s: TTFT p50 %.1f / p90 %.1f / p99 %.1f / "
      "mean %.1f ms; blocks from DRAM %lu, from SSD %lu",
      records.size(), engines, use_router ? ", router" : "",
      exist_prefetch ? ", exist prefetch" : "",
      j["ttft_ms"]["p50"].get<double>(), j["ttft_ms"]["p90"].get<double>(),
      j["ttft_ms"]["p99"].get<double>(), j["ttft_ms"]["mean"].get<double>(),
      dram, ssd);
  if (use_router) {
    std::printf("; SSD-only when routed %lu, of which read from DRAM %lu", rs,
                rd);
  }
  std::printf("; corrupt %lu, failed puts %lu\n", corrupt, put_failed);
  if (!json_path.empty()) {
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  pool.clear();
  router.reset();
  clients.clear();
  return corrupt > 0 ? 1 : 0;
}
