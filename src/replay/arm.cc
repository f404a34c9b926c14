#include "replay/arm.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "benchutil/bench_keys.h"
#include "node/node.h"
#include "replay/clock_util.h"
#include "replay/engine.h"

namespace kvpool::replay {

namespace {

// Snapshots of the cluster every 100 ms, labelled with the phase.
class Sampler {
 public:
  explicit Sampler(ReplayCluster& cluster) : cluster_(cluster) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Sampler() { Stop(); }
  void SetPhase(const std::string& phase) {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = phase;
  }
  std::vector<ClusterSnapshot> Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    return samples_;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      std::string phase = phase_;
      lock.unlock();
      ClusterSnapshot s = cluster_.Snapshot();
      s.phase = phase;
      lock.lock();
      samples_.push_back(std::move(s));
      cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_; });
    }
  }

  ReplayCluster& cluster_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string phase_ = "start";
  bool stop_ = false;
  std::vector<ClusterSnapshot> samples_;
  std::thread thread_;
};

// MemAvailable of /proc/meminfo; 0 if unknown.
uint64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb << 10;
  }
  return 0;
}

char TierChar(const std::string& tier) {
  return tier == "memory" ? 'M' : tier == "local_disk" ? 'S' : 'P';
}

}  // namespace

ReplayPlan MakePlan(const std::vector<TraceRequest>& trace,
                    size_t measure_requests) {
  ReplayPlan p;
  p.trace = &trace;
  p.measure_end = trace.size();
  p.measure_begin = trace.size() - std::min(measure_requests, trace.size());
  std::unordered_set<uint64_t> wanted;
  for (size_t i = p.measure_begin; i < p.measure_end; ++i) {
    wanted.insert(trace[i].hash_ids.begin(), trace[i].hash_ids.end());
    p.max_blocks = std::max(p.max_blocks, trace[i].hash_ids.size());
  }
  p.measured_distinct_blocks = wanted.size();
  std::unordered_set<uint64_t> added;
  for (size_t i = 0; i < p.measure_begin; ++i) {
    for (uint64_t h : trace[i].hash_ids) {
      if (wanted.count(h) && added.insert(h).second) p.fill_blocks.push_back(h);
    }
  }
  return p;
}

LocalClusterOptions MakeClusterOptions(const ReplayOptions& o,
                                       const std::string& ssd_root,
                                       const ArmSpec& arm,
                                       bool* applied_buffer) {
  LocalClusterOptions c;
  c.num_nodes = o.nodes;
  c.segment_size = o.dram_per_node;
  c.default_kv_lease_ttl = o.lease_ms;
  c.heartbeat_interval_ms = o.heartbeat_ms;
  c.eviction_high_watermark_ratio = o.high_watermark;
  c.eviction_ratio = o.eviction_ratio;
  c.enable_ssd = true;
  c.ssd_root = ssd_root;
  c.ssd_capacity_bytes = o.ssd_per_node;
  // The replay's own choice (LocalClusterOptions' default is NodeConfig's
  // 256 MiB): small log files, so GC has several to pick from.
  c.ssd_segment_file_size = 64ull << 20;
  c.promotion_on_hit = arm.promotion_on_hit;
  c.enable_prefetch_trigger = arm.router_prefetch;
  c.prefetch_buffer_size = o.prefetch_buffer_per_node;
  c.prefetch_trigger_lease_ttl_ms = o.prefetch_lease_ms;
  c.prefetch_consumed_lease_ms = o.prefetch_consumed_lease_ms;
  c.promotion_pull = o.promotion_pull;
  c.promotion_read_batch = o.promotion_read_batch;
  c.promotion_inflight_bytes = o.promotion_inflight_bytes;
  c.promotion_workers = o.promotion_workers;
  c.promotion_drop_unreachable = o.promotion_drop_unreachable;
  c.ssd_read_share_bytes = o.ssd_read_share_bytes;
  c.promotion_yield_to_gets_ms = o.promotion_yield_to_gets_ms;
  c.promotion_skip_after_get_ms = o.promotion_skip_after_get_ms;
  c.prefetch_profile = o.prefetch_profile;
  if (applied_buffer) *applied_buffer = o.prefetch_buffer_per_node > 0;
  return c;
}

namespace {
// The all-dram arm holds every block it will read and never evicts, so it
// needs no eviction headroom: its watermark sits just under full, and its
// DRAM is the blocks plus 5% for placement imbalance between nodes and
// allocator slack. (Sized from the other arms' watermark and eviction
// ratio, it asked for 1.29x the blocks and was refused on machines where
// the other arms ran.)
constexpr double kAllDramWatermark = 0.97;
}  // namespace

uint64_t AllDramPerNode(const ReplayOptions& o, const ReplayPlan& plan) {
  const double bytes = double(plan.measured_distinct_blocks) *
                       double(o.block_bytes) / double(std::max(1, o.nodes));
  // Whole MiB.
  const uint64_t mib =
      uint64_t(std::ceil(bytes * 1.05 / kAllDramWatermark / (1 << 20)));
  return std::max(o.dram_per_node, mib << 20);
}

ArmResult RunArm(const ReplayOptions& o, const ReplayPlan& plan,
                 const ArmSpec& arm, const EngineModel& model, int arm_index,
                 int arms, Progress* progress) {
  ArmResult res;
  res.spec = arm;
  res.arm_start_s = NowSec();
  const std::string root =
      fmt::format("{}/kvpool-replay-{}-{}", o.scratch_dir, getpid(), arm_index);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  auto phase = [&](const std::string& name, uint64_t total,
                   const std::string& unit) {
    if (progress) progress->Phase(arm_index, arms, arm.name, name, total, unit);
  };

  LocalClusterOptions copts =
      MakeClusterOptions(o, root, arm, &res.prefetch_buffer);
  if (arm.all_dram) {
    copts.segment_size = AllDramPerNode(o, plan);
    copts.eviction_high_watermark_ratio =
        std::max(o.high_watermark, kAllDramWatermark);
    const uint64_t need = copts.segment_size * uint64_t(o.nodes);
    const uint64_t avail = MemAvailableBytes();
    // The segments live in /dev/shm next to everything else of the run.
    if (avail > 0 && need > avail * 7 / 10) {
      res.status = Status(
          ErrorCode::NO_AVAILABLE_HANDLE,
          fmt::format("all-dram needs {} MiB of DRAM for {} blocks; this "
                      "machine has {} MiB available",
                      need >> 20, plan.measured_distinct_blocks, avail >> 20));
      return res;
    }
  }
  const bool kv_events =
      o.router_kv_events && (o.dispatch == "router" || arm.router_prefetch);
  if (kv_events) {
    copts.kv_events_endpoint = "tcp://127.0.0.1:*";
    copts.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
  }
  res.dram_per_node = copts.segment_size;
  auto cluster_p = MakeReplayCluster(o.cluster, copts, o.bin_dir, o.external);
  ReplayCluster& cluster = *cluster_p;
  if (Status s = cluster.Start(); !s.ok()) {
    res.status = s;
    return res;
  }
  for (size_t i = 0; i < cluster.num_nodes(); ++i) {
    res.node_ids.push_back(cluster.node_id(i));
  }
  Sampler sampler(cluster);
  {
    auto loader = cluster.NewClient();
    if (!loader.ok()) {
      res.status = loader.status();
      return res;
    }
    Client& c = *loader.value();
    sampler.SetPhase("fill");
    phase("fill", plan.fill_blocks.size(), "blocks");
    res.fill = Fill(c, plan.fill_blocks, o.block_bytes, progress);
    res.phases.fill = res.fill.sec;
    // Every fill block gets its SSD copy before the overflow evicts it.
    sampler.SetPhase("settle");
    phase("settle after fill", 0, "");
    res.phases.settle_fill =
        Settle(cluster, copts.eviction_high_watermark_ratio, 120).sec;
    if (!arm.all_dram) {
      sampler.SetPhase("overflow");
      phase("overflow", 0, "filler blocks");
      res.overflow =
          Overflow(cluster, c, o.block_bytes, o.overflow_ratio, progress);
      res.phases.overflow = res.overflow.sec;
    }
    sampler.SetPhase("settle");
    phase("settle", 0, "");
    SettleResult st = Settle(cluster, copts.eviction_high_watermark_ratio, 120);
    res.settled = st.settled;
    res.phases.settle = st.sec;
    // --ssd_only_share < 1: bring part of the fill back into DRAM. Its time
    // is counted with the overflow's and its settle with the settle's (the
    // report's phase fields stay as they are).
    if (!arm.all_dram && o.ssd_only_share < 1.0) {
      sampler.SetPhase("overflow");
      phase("refill", 0, "blocks");
      RefillResult rf =
          Refill(cluster, c, plan.fill_blocks, o.block_bytes, o.ssd_only_share,
                 o.seed, o.high_watermark, o.eviction_ratio, progress);
      res.phases.overflow += rf.sec;
      if (rf.blocks > rf.room_blocks || rf.failed > 0) {
        fmt::print(stderr,
                   "\nwarning: arm {}: refill put {} blocks ({} failed) into "
                   "DRAM that keeps {}; the SSD-only share at measure start "
                   "will be above the asked {}\n",
                   arm.name, rf.blocks, rf.failed, rf.room_blocks,
                   o.ssd_only_share);
      }
      sampler.SetPhase("settle");
      phase("settle after refill", 0, "");
      st = Settle(cluster, o.high_watermark, 120);
      res.settled = res.settled && st.settled;
      res.phases.settle += st.sec;
    }
    std::vector<std::string> fill_keys;
    for (uint64_t h : plan.fill_blocks) fill_keys.push_back(BlockKey(h));
    res.census = Census(c, fill_keys);
  }

  // Engines, each with its own client (an engine is its own process in a
  // deployment), and the router.
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < o.engines; ++i) {
    ClientConfig cc;
    cc.enable_ssd_prefetch = arm.exist_prefetch;
    auto c = cluster.NewClient(cc);
    if (!c.ok()) {
      res.status = c.status();
      return res;
    }
    clients.push_back(std::move(c.value()));
  }
  std::unique_ptr<Router> router;
  std::unordered_map<std::string, int> engine_index;
  if (o.dispatch == "router" || arm.router_prefetch) {
    RouterConfig rc;
    rc.master_server_address = cluster.master_address();
    rc.enable_prefetch = arm.router_prefetch;
    rc.prefetch_deadline = o.prefetch_deadline;
    rc.prefetch_deadline_by_admissions = o.prefetch_deadline_by_admissions;
    rc.prefetch_deadline_slack = o.prefetch_deadline_slack;
    rc.affinity_weight = o.affinity_weight;
    rc.prefetch_deadline_floor_ms =
        ScaledMs(o.prefetch_deadline_floor_ms, model.scale);
    for (int i = 0; i < o.engines; ++i) {
      EngineInfo e;
      e.id = fmt::format("engine-{}", i);
      e.max_running =
          o.engine == EngineKind::kSerial ? 1 : o.scheduler.max_num_seqs;
      // Its Waiting() counts the loading requests (BatchingEngine).
      if (o.prefetch_deadline_by_loads) e.max_loading = o.loaders;
      e.local_node_ids = {res.node_ids[size_t(i) % res.node_ids.size()]};
      rc.engines.push_back(e);
      engine_index[e.id] = i;
    }
    if (kv_events) {
      rc.kv_events_endpoint = cluster.kv_events_endpoint();
      rc.kv_events_replay_endpoint = cluster.kv_events_replay_endpoint();
    }
    auto r = Router::Create(rc);
    if (!r.ok()) {
      res.status = r.status();
      return res;
    }
    router = std::move(r.value());
    res.router_used = true;
    res.router_kv_events = kv_events;
    if (kv_events) {
      // The router catches up by replay before the first request, as a
      // router started before its traffic would be.
      bench::WaitFor(30, [&] {
        return router->stats().event_next_seq >= cluster.kv_events_batches();
      });
    }
  }
  std::mutex rec_mu;
  std::condition_variable rec_cv;
  std::atomic<size_t> done{0};
  std::vector<std::unique_ptr<Engine>> engines;
  for (int i = 0; i < o.engines; ++i) {
    EngineConfig ec;
    ec.index = i;
    ec.id = fmt::format("engine-{}", i);
    ec.block_bytes = o.block_bytes;
    ec.max_blocks = plan.max_blocks;
    ec.exist_prefetch = arm.exist_prefetch;
    ec.scheduler = o.scheduler;
    ec.loaders = o.loaders;
    engines.push_back(MakeEngine(o.engine, ec, clients[size_t(i)].get(), &model,
                                 [&, id = ec.id](RequestRecord rec) {
                                   if (router) router->Complete(id);
                                   {
                                     std::lock_guard<std::mutex> lock(rec_mu);
                                     res.records.push_back(std::move(rec));
                                     ++done;
                                   }
                                   rec_cv.notify_all();
                                 }));
    if (Status s = engines.back()->Start(); !s.ok()) {
      res.status = s;
      return res;
    }
  }

  // Measure: requests arrive at their trace times (scaled) and are routed
  // at once; the engines serve their queues.
  const auto& trace = *plan.trace;
  const size_t total = plan.measure_end - plan.measure_begin;
  res.at_measure_start = cluster.Snapshot();
  sampler.SetPhase("measure");
  phase("measure", total, "requests");
  const double t0 = NowSec() + 0.05;
  const double ts0 = trace[plan.measure_begin].timestamp_ms;
  const double span =
      (trace[plan.measure_end - 1].timestamp_ms - ts0) / 1000 * o.time_scale;
  res.measure_start_s = t0;
  res.arrival_span_s = span;
  SleepUntilSec(t0);
  const CpuReading cpu0 = ReadCpu(cluster.processes());
  res.dispatcher_realtime = RunAsModelClock();
  std::mt19937_64 rng(o.seed);
  for (size_t i = plan.measure_begin; i < plan.measure_end; ++i) {
    EngineRequest er;
    er.index = i;
    er.trace = &trace[i];
    er.arrival_s = t0 + (trace[i].timestamp_ms - ts0) / 1000 * o.time_scale;
    SleepUntilSec(er.arrival_s);
    res.max_dispatch_lag_ms =
        std::max(res.max_dispatch_lag_ms, (NowSec() - er.arrival_s) * 1e3);
    int target = -1;
    if (router) {
      RouteRequest rq;
      rq.request_id = fmt::format("req-{}", i);
      for (uint64_t h : trace[i].hash_ids) rq.block_keys.push_back(BlockKey(h));
      // The engines' waiting queues, as a router scraping them would see
      // them: what the router's deadline estimate counts (ReportQueue).
      std::vector<size_t> waiting(size_t(o.engines)), loading(waiting.size());
      for (int k = 0; k < o.engines; ++k) {
        // Loading first: a load that ends between the two reads then
        // counts in neither rather than in loading alone.
        loading[size_t(k)] = engines[size_t(k)]->Loading();
        waiting[size_t(k)] = engines[size_t(k)]->Waiting();
        router->ReportQueue(fmt::format("engine-{}", k), waiting[size_t(k)]);
      }
      const double rs = NowSec();
      auto d = router->Route(rq);
      if (d.ok()) {
        RouteInfo& ri = er.route;
        ri.routed = true;
        ri.routed_s = NowSec();
        ri.route_ms = (ri.routed_s - rs) * 1e3;
        ri.affinity_hit = d->affinity_hit;
        ri.prefetch_disabled = d->prefetch_disabled;
        ri.deadline_ms = d->prefetch_deadline_ms;
        std::unordered_map<std::string, PrefetchToMemoryStatus> st;
        for (size_t k = 0;
             k < d->triggered_keys.size() && k < d->prefetch_statuses.size();
             ++k) {
          st[d->triggered_keys[k]] = d->prefetch_statuses[k];
        }
        for (size_t j = 0; j < d->prefix_tiers.size(); ++j) {
          ri.tiers.push_back(TierChar(d->prefix_tiers[j].tier));
          ri.holders.push_back(d->prefix_tiers[j].node_id);
          auto it =
              j < rq.block_keys.size() ? st.find(rq.block_keys[j]) : st.end();
          ri.trigger_status.push_back(it == st.end() ? -1 : int8_t(it->second));
        }
        auto e = engine_index.find(d->engine_id);
        if (e != engine_index.end()) {
          target = e->second;
          ri.waiting_at_route = int64_t(waiting[size_t(target)]);
          ri.loading_at_route = int64_t(
              std::min(loading[size_t(target)], waiting[size_t(target)]));
          const std::string& own =
              res.node_ids[size_t(target) % res.node_ids.size()];
          ri.own_host_blocks =
              int(std::count(ri.holders.begin(), ri.holders.end(), own));
        }
      } else {
        ++res.route_errors;
      }
    }
    if (target < 0) {
      // Least loaded; ties broken by the seeded generator.
      size_t best = SIZE_MAX;
      std::vector<int> ties;
      for (int k = 0; k < o.engines; ++k) {
        size_t l = engines[size_t(k)]->Load();
        if (l < best) {
          best = l;
          ties.clear();
        }
        if (l == best) ties.push_back(k);
      }
      target = ties[rng() % ties.size()];
    }
    engines[size_t(target)]->Enqueue(std::move(er));
    if (progress) {
      progress->Update(done.load(), std::max(0.0, t0 + span - NowSec()));
    }
  }
  if (res.dispatcher_realtime) RunAsModelClock(false);
  {
    std::unique_lock<std::mutex> lock(rec_mu);
    while (!rec_cv.wait_for(lock, std::chrono::milliseconds(500),
                            [&] { return done.load() >= total; })) {
      if (progress) progress->Update(done.load(), 0);
    }
  }
  const CpuReading cpu1 = ReadCpu(cluster.processes());
  res.cpu = CpuBetween(cpu0, cpu1);
  for (auto& e : engines) e->Drain();
  res.measure_end_s = NowSec();
  for (auto& e : engines) {
    res.gpu_busy.push_back(span > 0 ? e->busy().BusySec(t0, t0 + span) / span
                                    : 0);
    res.engine_stats.push_back(e->stats());
  }
  res.phases.measure = res.measure_end_s - t0;

  // Drain: promotions still in flight settle, so every prefetch has a fate.
  sampler.SetPhase("drain");
  phase("drain", 0, "");
  const double d0 = NowSec();
  bench::WaitFor(30, [&] { return cluster.Snapshot().promo_in_flight == 0; });
  res.phases.drain = NowSec() - d0;
  if (progress) progress->Finish();

  for (auto& c : clients) {
    PrefetchStats s = c->prefetch_stats();
    res.prefetch.triggers += s.triggers;
    res.prefetch.keys_triggered += s.keys_triggered;
    res.prefetch.dedup_hits += s.dedup_hits;
    res.prefetch.cooldown_entries += s.cooldown_entries;
    res.prefetch.cooldown_skips += s.cooldown_skips;
    res.prefetch.delegations += s.delegations;
    res.prefetch.completed += s.completed;
    res.prefetch.failed += s.failed;
    res.prefetch.already_resident += s.already_resident;
    res.prefetch.not_ssd_only += s.not_ssd_only;
    res.prefetch.dropped += s.dropped;
  }
  if (router) res.router = router->stats();
  res.at_end = cluster.Snapshot();
  res.counters = cluster.Counters();
  res.samples = sampler.Stop();
  engines.clear();
  router.reset();
  clients.clear();
  cluster.Stop();
  std::filesystem::remove_all(root);
  std::sort(res.records.begin(), res.records.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  return res;
}

const std::vector<ArmSpec>& AllArms() {
  static const std::vector<ArmSpec> k = {
      {"off", false, false, false},
      {"on-hit", true, false, false},
      {"exist", false, true, false},
      {"router", false, false, true},
      {"exist+router", false, true, true},
      {"all-dram", false, false, false, true},
  };
  return k;
}

const ArmSpec* FindArm(const std::string& name) {
  for (const auto& a : AllArms()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace kvpool::replay
