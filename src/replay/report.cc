#include "replay/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "replay/json_util.h"
#include "replay/report_bound.h"
#include "replay/report_model.h"
#include "replay/report_parts.h"
#include "replay/report_reads.h"
#include "replay/report_router_tiers.h"
#include "replay/report_windows.h"

namespace kvpool::replay {

using nlohmann::json;

namespace {

// What the nodes' counters grew by over the measurement (0 where a node's
// counter was not read).
uint64_t SumDelta(const std::vector<uint64_t>& from,
                  const std::vector<uint64_t>& to) {
  uint64_t sum = 0;
  for (size_t i = 0; i < std::min(from.size(), to.size()); ++i)
    sum += to[i] >= from[i] ? to[i] - from[i] : 0;
  return sum;
}

// Events per second in 1 s buckets over [t0, t1).
std::vector<double> PerSecond(const std::vector<double>& times, double t0,
                              double t1) {
  const size_t n = size_t(std::max(1.0, std::ceil(t1 - t0)));
  std::vector<double> b(n, 0);
  for (double t : times) {
    if (t < t0 || t >= t1) continue;
    b[std::min(n - 1, size_t(t - t0))] += 1;
  }
  return b;
}

json ArmJson(const ReportInput& in, const ArmResult& a) {
  const ReplayOptions& o = *in.options;
  json j;
  j["name"] = a.spec.name;
  j["spec"] = {{"promotion_on_hit", a.spec.promotion_on_hit},
               {"exist_prefetch", a.spec.exist_prefetch},
               {"router_prefetch", a.spec.router_prefetch},
               {"dispatch", a.router_used ? "router" : "least-loaded"}};
  j["ok"] = a.status.ok();
  if (!a.status.ok()) j["error"] = a.status.ToString();
  j["phases_sec"] = {{"fill", Round(a.phases.fill)},
                     {"settle_after_fill", Round(a.phases.settle_fill)},
                     {"overflow", Round(a.phases.overflow)},
                     {"settle", Round(a.phases.settle)},
                     {"measure", Round(a.phases.measure)},
                     {"drain", Round(a.phases.drain)}};
  j["fill"] = {{"blocks", a.fill.blocks}, {"failed", a.fill.failed}};
  j["overflow"] = {{"filler_blocks", a.overflow.filler_blocks},
                   {"failed", a.overflow.failed},
                   {"evicted", a.overflow.evicted}};
  j["settled"] = a.settled;
  j["fill_blocks_at_measure_start"] = {{"memory", a.census.memory},
                                       {"ssd_only", a.census.ssd_only},
                                       {"processing", a.census.processing},
                                       {"absent", a.census.absent}};

  // --- per request
  std::vector<double> ttft, queue, lookup, load, prefill, route_ms;
  uint64_t blocks = 0, matched = 0, read = 0, dram = 0, ssd = 0, corrupt = 0,
           put_blocks = 0, put_failed = 0, probe_mismatch = 0, req_with_ssd = 0;
  uint64_t r_ssd = 0, r_dram = 0, r_read_ssd = 0, r_not_read = 0, affinity = 0,
           routed = 0, own_host = 0, held = 0;
  std::vector<double> windows;  // one per SSD-only-at-route block
  json win_pairs = json::array();
  std::map<std::string, std::vector<double>> target_times;  // per holder
  std::map<std::string, uint64_t> not_read_by_cause;        // blocks
  json requests = json::array();
  for (const auto& r : a.records) {
    ttft.push_back(r.ttft_ms);
    queue.push_back(r.queue_ms);
    lookup.push_back(r.lookup_ms);
    load.push_back(r.load_ms);
    prefill.push_back(r.prefill_ms);
    blocks += r.blocks;
    matched += r.matched;
    read += r.read_ok;
    dram += r.dram_reads;
    ssd += r.ssd_reads;
    corrupt += r.corrupt;
    if (r.read_ok < r.matched) {
      not_read_by_cause[r.read_stop.empty() ? "unknown" : r.read_stop] +=
          r.matched - r.read_ok;
    }
    put_blocks += r.put_blocks;
    put_failed += r.put_failed;
    probe_mismatch += r.probe_ssd != r.ssd_reads;
    req_with_ssd += r.ssd_reads > 0;
    if (r.route.routed) {
      ++routed;
      affinity += r.route.affinity_hit;
      own_host += uint64_t(r.route.own_host_blocks);
      for (const auto& h : r.route.holders) held += !h.empty();
      route_ms.push_back(r.route.route_ms);
      for (size_t k = 0; k < r.route.tiers.size(); ++k) {
        if (r.route.tiers[k] == 'S') {
          target_times[r.route.holders[k]].push_back(r.route.routed_s);
        }
      }
    }
    r_ssd += r.route_ssd_only;
    r_dram += r.route_ssd_read_dram;
    r_read_ssd += r.route_ssd_read_ssd;
    r_not_read += r.route_ssd_not_read;
    if (r.route_ssd_only > 0) {
      for (uint32_t k = 0; k < r.route_ssd_only; ++k) {
        windows.push_back(r.window_ms);
      }
      win_pairs.push_back(
          {Round(r.window_ms, 2), r.route_ssd_only, r.route_ssd_read_dram});
    }
    requests.push_back({r.index,
                        r.engine,
                        Round((r.arrival_s - a.measure_start_s) * 1e3, 2),
                        Round(r.queue_ms, 2),
                        Round(r.lookup_ms, 2),
                        Round(r.load_ms, 2),
                        Round(r.prefill_ms, 2),
                        Round(r.ttft_ms, 2),
                        r.matched,
                        r.read_ok,
                        r.dram_reads,
                        r.ssd_reads,
                        r.route_ssd_only,
                        r.route_ssd_read_dram,
                        Round(r.window_ms, 2),
                        Round(r.probe_ms, 2),
                        Round(r.put_ms, 2),
                        Round(r.decode_ms, 2),
                        Round((r.done_s - r.start_s) * 1e3, 2),
                        Round(r.part_wait_ms, 2),
                        Round(r.part_load_ms, 2),
                        Round(r.part_prefill_ms, 2),
                        Round(r.load_total_ms, 2),
                        r.route.deadline_ms,
                        r.route.waiting_at_route,
                        r.route.loading_at_route});
  }
  j["requests"] = a.records.size();
  j["ttft_ms"] = Distribution(ttft);
  j["queue_ms"] = Distribution(queue);
  j["lookup_ms"] = Distribution(lookup);
  j["kv_load_ms"] = Distribution(load);
  j["prefill_ms"] = Distribution(prefill);
  j["route_ms"] = Distribution(route_ms);
  j["reads"] = {
      {"blocks_requested", blocks},
      {"blocks_found", matched},
      {"blocks_read", read},
      {"from_dram", dram},
      {"from_ssd", ssd},
      {"found_not_read", matched - read},
      {"not_read_by_cause", not_read_by_cause},
      {"corrupt", corrupt},
      {"dram_share", read ? Round(double(dram) / double(read)) : 0},
      {"blocks_put", put_blocks},
      {"puts_failed", put_failed},
      {"requests_probe_mismatch", probe_mismatch},
      {"holder_disk_reads",
       SumDelta(a.at_measure_start.node_disk_reads, a.at_end.node_disk_reads)},
      {"promotions_from_get_reads",
       SumDelta(a.at_measure_start.node_shared_reads,
                a.at_end.node_shared_reads)},
      {"gets_joined_promotion_reads",
       SumDelta(a.at_measure_start.node_joined_reads,
                a.at_end.node_joined_reads)},
      {"promotions_joined_get_reads",
       SumDelta(a.at_measure_start.node_promotion_joins,
                a.at_end.node_promotion_joins)},
      {"promotions_yielded_to_gets",
       SumDelta(a.at_measure_start.node_yields, a.at_end.node_yields)},
      {"promotion_yields_timed_out",
       SumDelta(a.at_measure_start.node_yields_timed_out,
                a.at_end.node_yields_timed_out)},
      {"promotion_yield_wait_ms",
       Round(double(SumDelta(a.at_measure_start.node_yield_wait_us,
                             a.at_end.node_yield_wait_us)) /
             1000.0)}};
  j["reads"]["promotion_phase_s"] = PromotionPhaseSeconds(a);
  j["reads"]["disk"] = DiskReadTiming(a);
  j["routing"] = {
      {"routed", routed},
      {"affinity_hits", affinity},
      {"prefix_blocks_held", held},
      // Blocks held on the chosen engine's own node, of those.
      {"own_host_share", held ? Round(double(own_host) / double(held)) : 0},
      {"route_errors", a.route_errors},
      {"max_dispatch_lag_ms", Round(a.max_dispatch_lag_ms, 2)}};
  j["ssd_only_at_route"] = {
      {"blocks", r_ssd},
      {"read_from_dram", r_dram},
      {"read_from_ssd", r_read_ssd},
      {"not_read", r_not_read},
      {"dram_share", r_ssd ? Round(double(r_dram) / double(r_ssd)) : 0}};
  // The same blocks against what any prefetch could have landed.
  if (in.plan->trace != nullptr) {
    json bound =
        ReachBoundJson(a.records, *in.plan->trace, in.model->measured.ssd_ms,
                       in.options->bound_block_read_ms);
    if (!bound.empty())
      j["ssd_only_at_route"]["reachable_bound"] = std::move(bound);
  }

  // --- M0 figures
  json m0;
  std::vector<double> wm, bufr;
  size_t above = 0;
  for (const auto& s : a.samples) {
    if (s.phase != "measure") continue;
    wm.push_back(s.MainRatio());
    above += s.MainRatio() >= o.high_watermark;
    if (s.buffer_capacity) {
      bufr.push_back(double(s.buffer_used) / double(s.buffer_capacity));
    }
  }
  m0["watermark"] = Distribution(wm);
  m0["watermark"]["share_at_or_above_high"] =
      wm.empty() ? 0 : Round(double(above) / double(wm.size()));
  m0["prefetch_buffer_watermark"] = Distribution(bufr);
  m0["ssd_share_of_gets"] = read ? Round(double(ssd) / double(read)) : 0;
  m0["requests_with_an_ssd_read"] =
      a.records.empty()
          ? 0
          : Round(double(req_with_ssd) / double(a.records.size()));
  m0["window_ms"] = Distribution(windows);
  const double t0 = a.measure_start_s, t1 = a.measure_end_s;
  json holders = json::array();
  for (size_t h = 0; h < a.node_ids.size(); ++h) {
    const std::string& node = a.node_ids[h];
    std::vector<double> target = PerSecond(target_times[node], t0, t1);
    // Actual: promotions reported by the holder, per second of the measure.
    std::vector<double> actual;
    const ClusterSnapshot* prev = nullptr;
    double acc = 0, acc_t = 0;
    for (const auto& s : a.samples) {
      if (s.t < t0 || s.t > t1) continue;
      if (prev && h < s.node_promotions_ok.size() &&
          h < prev->node_promotions_ok.size()) {
        acc += double(s.node_promotions_ok[h] - prev->node_promotions_ok[h]);
        acc_t += s.t - prev->t;
        if (acc_t >= 1.0) {
          actual.push_back(acc / acc_t);
          acc = acc_t = 0;
        }
      }
      prev = &s;
    }
    const double span = std::max(1e-9, t1 - t0);
    uint64_t total_promoted = 0;
    if (h < a.at_end.node_promotions_ok.size() &&
        h < a.at_measure_start.node_promotions_ok.size()) {
      total_promoted = a.at_end.node_promotions_ok[h] -
                       a.at_measure_start.node_promotions_ok[h];
    }
    json hj = {{"node", node},
               {"target_per_s", Distribution(target)},
               {"promoted_per_s", Distribution(actual)},
               {"promoted", total_promoted},
               {"promoted_mean_per_s", Round(double(total_promoted) / span)}};
    hj["target_per_s"]["mean"] =
        Round(double(target_times[node].size()) / span);
    holders.push_back(hj);
  }
  m0["holders"] = holders;
  m0["single_worker_ceiling_per_s"] =
      Round(in.calibration->promotion_ceiling_per_s, 1);
  j["m0"] = m0;

  // --- prefetch: what each trigger became
  const MasterCounters& c = a.counters;
  auto ts = [&](const char* k) {
    auto it = c.trigger_status.find(k);
    return it == c.trigger_status.end() ? uint64_t(0) : it->second;
  };
  uint64_t router_triggers = 0;
  for (const auto& [k, v] : c.trigger_status) router_triggers += v;
  json trig;
  trig["router"] = {{"keys", router_triggers},
                    {"router_stats_triggered", a.router.triggered},
                    {"in_memory", ts("IN_MEMORY")},
                    {"queued", ts("QUEUED")},
                    {"throttled_watermark", ts("THROTTLED_WATERMARK")},
                    {"throttled_cap", ts("THROTTLED_CAP")},
                    {"no_local_disk", ts("NO_LOCAL_DISK")},
                    {"not_found", ts("NOT_FOUND")}};
  const PrefetchStats& p = a.prefetch;
  trig["exist"] = {{"keys", p.keys_triggered + p.dedup_hits + p.cooldown_skips},
                   {"calls", p.triggers},
                   {"dedup", p.dedup_hits},
                   {"throttled_cooldown", p.cooldown_skips},
                   {"cooldown_entries", p.cooldown_entries},
                   {"passed_throttle", p.keys_triggered},
                   {"promoted", p.completed},
                   {"failed", p.failed},
                   {"already_resident", p.already_resident},
                   {"not_ssd_only", p.not_ssd_only},
                   {"delegated", p.delegations},
                   {"dropped", p.dropped}};
  j["triggers"] = trig;

  // Promotions the master started (all sources; the prefetch arms run with
  // promote-on-hit off, so these are the prefetches) and their fates.
  const ClusterSnapshot& e = a.at_end;
  json pr = {
      {"started", e.promo_admitted}, {"landed", e.promo_completed},
      {"failed", e.promo_failed},    {"cancelled", e.promo_cancelled},
      {"expired", e.promo_expired},  {"in_flight_at_end", e.promo_in_flight}};
  uint64_t fated = 0;
  json fates;
  for (const auto& f : FateLabels()) {
    fates[f] = c.fate.count(f) ? c.fate.at(f) : 0;
    fated += fates[f].get<uint64_t>();
  }
  // Fates are counted for prefetched replicas only (exist and router, not
  // promote-on-hit); the master's per-source outcome tells them apart where
  // it exists, else every landed promotion is taken as a prefetch.
  auto outcome = [&](const char* k) {
    auto it = c.outcome.find(k);
    return it == c.outcome.end() ? uint64_t(0) : it->second;
  };
  const uint64_t by_source_total = outcome("on_hit/landed") +
                                   outcome("exist/landed") +
                                   outcome("router/landed");
  const uint64_t prefetch_landed =
      by_source_total > 0 ? outcome("exist/landed") + outcome("router/landed")
                          : e.promo_completed;
  pr["prefetch_landed"] = prefetch_landed;
  // A prefetched replica no get touched before the arm ended.
  fates["never_read"] = prefetch_landed >= fated ? prefetch_landed - fated : 0;
  // Never landed, so outside the landed fates: dropped past their deadline.
  uint64_t expired_unread = 0;
  json by_where;
  for (const auto& [w, v] : c.deadline_expired) {
    by_where[w] = v;
    expired_unread += v;
  }
  fates["expired"] = expired_unread;
  pr["expired_by"] = by_where;
  pr["buffer_recycled"] = c.buffer_recycled;
  pr["fates"] = fates;
  pr["fates_over_landed"] = fated;  // > landed means a double count
  json by_source;
  for (const auto& [k, v] : c.outcome) by_source[k] = v;
  pr["by_source"] = by_source;
  j["promotions"] = pr;
  json rej;
  for (const auto& [k, v] : c.promotion_rejected) rej[k] = v;
  j["throttles"] = {{"router_watermark", ts("THROTTLED_WATERMARK")},
                    {"router_buffer_full", c.buffer_full},
                    {"router_buffer_full_bytes", c.buffer_full_bytes},
                    {"router_cap", ts("THROTTLED_CAP")},
                    {"exist_cooldown_skips", p.cooldown_skips},
                    {"exist_cooldown_entries", p.cooldown_entries},
                    {"exist_dedup", p.dedup_hits},
                    {"on_hit_rejected", rej}};

  // --- consistency checks the tests assert
  const uint64_t router_sum = ts("IN_MEMORY") + ts("QUEUED") +
                              ts("THROTTLED_WATERMARK") + ts("THROTTLED_CAP") +
                              ts("NO_LOCAL_DISK") + ts("NOT_FOUND");
  const uint64_t promo_sum = e.promo_completed + e.promo_failed +
                             e.promo_cancelled + e.promo_expired +
                             e.promo_in_flight;
  j["checks"] = {
      {"reads_add_up", dram + ssd == read},
      {"route_ssd_only_adds_up", r_dram + r_read_ssd + r_not_read == r_ssd},
      {"router_statuses_add_up_to_triggers", router_sum == router_triggers},
      {"promotions_add_up", promo_sum == e.promo_admitted},
      {"fates_within_landed", fated <= prefetch_landed},
      {"no_corrupt_reads", corrupt == 0}};

  // --- raw series for the plots
  json series = {{"t", json::array()},
                 {"phase", json::array()},
                 {"main_ratio", json::array()},
                 {"buffer_ratio", json::array()},
                 {"promotions_in_flight", json::array()}};
  for (const auto& s : a.samples) {
    series["t"].push_back(Round(s.t - a.measure_start_s, 2));
    series["phase"].push_back(s.phase);
    series["main_ratio"].push_back(Round(s.MainRatio(), 4));
    series["buffer_ratio"].push_back(
        s.buffer_capacity
            ? Round(double(s.buffer_used) / double(s.buffer_capacity), 4)
            : 0.0);
    series["promotions_in_flight"].push_back(s.promo_in_flight);
  }
  j["series"] = series;
  j["windows"] = win_pairs;  // [window_ms, ssd-only blocks, read from DRAM]
  j["request_columns"] = {"index",
                          "engine",
                          "arrival_ms",
                          "queue_ms",
                          "lookup_ms",
                          "kv_load_ms",
                          "prefill_ms",
                          "ttft_ms",
                          "found",
                          "read",
                          "from_dram",
                          "from_ssd",
                          "ssd_only_at_route",
                          "ssd_only_read_from_dram",
                          "window_ms",
                          "probe_ms",
                          "put_ms",
                          "decode_ms",
                          "busy_ms",
                          "part_wait_ms",
                          "part_load_ms",
                          "part_prefill_ms",
                          "load_total_ms",
                          "deadline_ms",
                          "waiting_at_route",
                          "loading_at_route"};
  j["request_rows"] = requests;
  j.update(ArmPartsJson(a));
  j.update(RouterTiersJson(a, route_ms));
  j["dram_per_node"] = a.dram_per_node;
  return j;
}

}  // namespace

json Distribution(std::vector<double> v) {
  json j = {{"n", v.size()}, {"p50", 0},  {"p90", 0},
            {"p99", 0},      {"mean", 0}, {"max", 0}};
  if (v.empty()) return j;
  std::sort(v.begin(), v.end());
  j["p50"] = Round(bench::Percentile(v, 50));
  j["p90"] = Round(bench::Percentile(v, 90));
  j["p99"] = Round(bench::Percentile(v, 99));
  j["mean"] =
      Round(std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()));
  j["max"] = Round(v.back());
  return j;
}

json BuildReport(const ReportInput& in) {
  const ReplayOptions& o = *in.options;
  const ReplayPlan& plan = *in.plan;
  const auto& trace = *plan.trace;
  json r;
  r["kvpool_replay"] = 1;
  TraceSummary whole = Summarize(trace, 0, trace.size());
  TraceSummary meas = Summarize(trace, plan.measure_begin, plan.measure_end);
  const double span_trace_s = meas.span_ms / 1000;
  r["setup"] = {
      {"trace", o.trace_path},
      {"requests_read", trace.size()},
      {"fill_requests", plan.measure_begin},
      {"measured_requests", plan.measure_end - plan.measure_begin},
      {"measured_from_index", plan.measure_begin},
      {"measure_span_trace_s", Round(span_trace_s, 1)},
      {"time_scale", o.time_scale},
      {"measure_span_s", Round(span_trace_s * o.time_scale, 1)},
      {"arrival_rate_per_s",
       span_trace_s > 0
           ? Round(double(meas.requests) / (span_trace_s * o.time_scale), 2)
           : 0},
      {"measured_block_refs", meas.block_refs},
      {"measured_distinct_blocks", meas.distinct_blocks},
      {"fill_blocks", plan.fill_blocks.size()},
      {"trace_distinct_blocks", whole.distinct_blocks},
      {"mean_input_tokens", Round(meas.mean_input_tokens, 1)},
      {"mean_output_tokens", Round(meas.mean_output_tokens, 1)},
      {"block_bytes", o.block_bytes},
      {"nodes", o.nodes},
      {"dram_per_node", o.dram_per_node},
      {"ssd_per_node", o.ssd_per_node},
      {"prefetch_buffer_per_node", o.prefetch_buffer_per_node},
      {"high_watermark", o.high_watermark},
      {"eviction_ratio", o.eviction_ratio},
      {"lease_ms", o.lease_ms},
      {"prefetch_lease_ms", o.prefetch_lease_ms},
      {"prefetch_consumed_lease_ms", o.prefetch_consumed_lease_ms},
      {"bound_block_read_ms", o.bound_block_read_ms},
      {"prefetch_deadline", o.prefetch_deadline},
      {"prefetch_deadline_floor_ms", o.prefetch_deadline_floor_ms},
      {"prefetch_deadline_by_admissions", o.prefetch_deadline_by_admissions},
      {"prefetch_deadline_by_loads", o.prefetch_deadline_by_loads},
      {"prefetch_deadline_slack", o.prefetch_deadline_slack},
      {"affinity_weight", o.affinity_weight},
      {"router_kv_events", o.router_kv_events},
      {"promotion_pull", o.promotion_pull},
      {"promotion_read_batch", o.promotion_read_batch},
      {"promotion_inflight_bytes", o.promotion_inflight_bytes},
      {"promotion_workers", o.promotion_workers},
      {"promotion_drop_unreachable", o.promotion_drop_unreachable},
      {"promotion_skip_after_get_ms", o.promotion_skip_after_get_ms},
      {"ssd_read_share_bytes", o.ssd_read_share_bytes},
      {"prefetch_profile", o.prefetch_profile},
      {"promotion_yield_to_gets_ms", o.promotion_yield_to_gets_ms},
      {"overflow_ratio", o.overflow_ratio},
      {"engines", o.engines},
      {"engine", EngineKindName(o.engine)},
      {"load_start", LoadStartName(o.scheduler.load_start)},
      {"max_num_batched_tokens", o.scheduler.max_num_batched_tokens},
      {"max_num_seqs", o.scheduler.max_num_seqs},
      {"gpu_kv_tokens", o.scheduler.gpu_kv_tokens},
      {"loaders", o.loaders},
      {"time_scale_source", in.time_scale_source},
      {"cluster", ClusterKindName(o.cluster)},
      {"dispatch", o.dispatch},
      {"seed", o.seed},
      {"ssd_only_share", o.ssd_only_share}};
  bool buffer_applied = false;
  for (const auto& a : *in.arms) buffer_applied |= a.prefetch_buffer;
  r["setup"]["prefetch_buffer_applied"] = buffer_applied;
  r["engine_model"] = EngineModelJson(in);
  const Calibration& cal = *in.calibration;
  r["calibration"] = {
      {"dram_batch_p50_ms", Round(cal.dram_batch_p50_ms)},
      {"ssd_batch_p50_ms", Round(cal.ssd_batch_p50_ms)},
      {"promotion_ceiling_per_s", Round(cal.promotion_ceiling_per_s, 1)},
      {"ceiling_keys", cal.ceiling_keys},
      {"ceiling_sec", Round(cal.ceiling_sec)},
      {"promoted_dram_ms_per_block", Round(cal.promoted_dram_ms, 4)},
      {"promoted_batches", cal.promoted_batches},
      {"promoted_shm_bytes", cal.promoted_shm_bytes},
      {"promoted_tcp_bytes", cal.promoted_tcp_bytes},
      {"sec", Round(cal.sec, 1)}};
  json arms = json::array();
  for (const auto& a : *in.arms) arms.push_back(ArmJson(in, a));
  r["arms"] = arms;
  AddComparisons(&r);
  AddWindowBands(&r);
  // Targets of issue #6, judged on the router arm.
  for (const auto& a : arms) {
    if (a["name"] != "router") continue;
    double off_p50 = 0;
    for (const auto& b : arms) {
      if (b["name"] == "off") off_p50 = Num(b["ttft_ms"], "p50");
    }
    const double share = Num(a["ssd_only_at_route"], "dram_share");
    const double p50 = Num(a["ttft_ms"], "p50");
    const double cut = off_p50 > 0 ? 1 - p50 / off_p50 : 0;
    r["targets"] = {{"ssd_only_read_from_dram", Round(share)},
                    {"ssd_only_read_from_dram_met", share >= 0.9},
                    {"ttft_p50_cut_vs_off", Round(cut)},
                    {"ttft_p50_cut_met", off_p50 > 0 && cut >= 0.5}};
  }
  return r;
}

std::string RenderTable(const json& r) {
  std::string out = fmt::format(
      "{:<13} {:>5} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>10}\n", "arm",
      "reqs", "ttft_p50", "ttft_p90", "ttft_p99", "ttft_mean", "vs_off",
      "dram_rd", "ssd_rd", "ssd>dram");
  double off = 0;
  for (const auto& a : r["arms"]) {
    if (a["name"] == "off") off = Num(a["ttft_ms"], "p50");
  }
  for (const auto& a : r["arms"]) {
    const auto& t = a["ttft_ms"];
    const double p50 = Num(t, "p50");
    std::string vs =
        off > 0 ? fmt::format("{:+.0f}%", 100 * (p50 / off - 1)) : "-";
    const auto& ro = a["ssd_only_at_route"];
    std::string promoted =
        Num(ro, "blocks") > 0
            ? fmt::format("{}/{}", ro["read_from_dram"].get<uint64_t>(),
                          ro["blocks"].get<uint64_t>())
            : "-";
    out += fmt::format(
        "{:<13} {:>5} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>8} {:>9} {:>9} "
        "{:>10}\n",
        a["name"].get<std::string>(), a["requests"].get<uint64_t>(), p50,
        Num(t, "p90"), Num(t, "p99"), Num(t, "mean"), vs,
        a["reads"]["from_dram"].get<uint64_t>(),
        a["reads"]["from_ssd"].get<uint64_t>(), promoted);
  }
  for (const auto& a : r["arms"]) {
    if (a.contains("verdict")) {
      out += a["verdict"]["sentence"].get<std::string>() + "\n";
    }
  }
  return out;
}

std::string RenderMarkdown(const json& r) {
  const auto& s = r["setup"];
  std::string md = "# kvpool replay: prefetch A/B on a request trace\n\n";
  md += fmt::format(
      "Trace `{}`: requests {}..{} measured ({} requests, {:.0f} s of trace "
      "played in {:.0f} s: time scale {:.4g}, {:.1f} req/s), the {} before "
      "them "
      "are the fill part ({} of their blocks are referenced by the measured "
      "requests and were put).\n\n",
      s["trace"].get<std::string>(), s["measured_from_index"].get<uint64_t>(),
      s["requests_read"].get<uint64_t>() - 1,
      s["measured_requests"].get<uint64_t>(), Num(s, "measure_span_trace_s"),
      Num(s, "measure_span_s"), Num(s, "time_scale"),
      Num(s, "arrival_rate_per_s"), s["fill_requests"].get<uint64_t>(),
      s["fill_blocks"].get<uint64_t>());
  md += fmt::format(
      "Cluster: {} nodes x {} DRAM (high watermark {}), SSD tier {} per node, "
      "block {} (one 512-token block), lease {} ms, prefetch buffer {}. "
      "{} engines, dispatch: {}; store {}.\n\n",
      s["nodes"].get<int>(), FormatSize(s["dram_per_node"].get<uint64_t>()),
      Num(s, "high_watermark"), FormatSize(s["ssd_per_node"].get<uint64_t>()),
      FormatSize(s["block_bytes"].get<uint64_t>()),
      s["lease_ms"].get<int64_t>(),
      s["prefetch_buffer_applied"].get<bool>()
          ? FormatSize(s["prefetch_buffer_per_node"].get<uint64_t>())
          : std::string("not in this build"),
      s["engines"].get<int>(), s["dispatch"].get<std::string>(),
      s.value("cluster", std::string("in-process")));
  md += RenderEngineModelMarkdown(r);
  md += "## TTFT per arm (ms)\n\n";
  md +=
      "| arm | requests | p50 | p90 | p99 | mean | p50 vs off | queue p50 "
      "| KV load p50 | prefill p50 |\n|---|---|---|---|---|---|---|---|---|"
      "---|\n";
  double off = 0;
  for (const auto& a : r["arms"]) {
    if (a["name"] == "off") off = Num(a["ttft_ms"], "p50");
  }
  for (const auto& a : r["arms"]) {
    const auto& t = a["ttft_ms"];
    md += fmt::format(
        "| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {} | {:.1f} | {:.2f} "
        "| {:.1f} |\n",
        a["name"].get<std::string>(), a["requests"].get<uint64_t>(),
        Num(t, "p50"), Num(t, "p90"), Num(t, "p99"), Num(t, "mean"),
        off > 0 ? fmt::format("{:+.1f}%", 100 * (Num(t, "p50") / off - 1))
                : "-",
        Num(a["queue_ms"], "p50"), Num(a["kv_load_ms"], "p50"),
        Num(a["prefill_ms"], "p50"));
  }
  md += "\n" + RenderPartsMarkdown(r);
  md += RenderRouterTiersMarkdown(r);
  md += RenderBlockReadsMarkdown(r);
  md +=
      "\n## Blocks SSD-only when routed: where their get read them\n\n"
      "The bound is the share any prefetch could have had in DRAM by the "
      "get if each request had its holders' disks to itself from the first "
      "route that saw each block SSD-only (report_bound.h), at the "
      "calibrated SSD read time per block and with a disk ten times "
      "faster.\n\n"
      "| arm | blocks | from DRAM | from SSD | not read | DRAM share | "
      "bound: disk / 10x disk (/ given read time) | route->get window p50 / "
      "p90 / p99 (ms) |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : r["arms"]) {
    const auto& ro = a["ssd_only_at_route"];
    const auto& w = a["m0"]["window_ms"];
    const json bound = ro.value("reachable_bound", json());
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {:.1f} / {:.1f} / "
        "{:.1f} |\n",
        a["name"].get<std::string>(), ro["blocks"].get<uint64_t>(),
        ro["read_from_dram"].get<uint64_t>(),
        ro["read_from_ssd"].get<uint64_t>(), ro["not_read"].get<uint64_t>(),
        Pct(Num(ro, "dram_share")), ReachBoundCell(bound), Num(w, "p50"),
        Num(w, "p90"), Num(w, "p99"));
  }
  md += RenderWindowBandsMarkdown(r);
  md +=
      "\n## M0 figures\n\n| arm | DRAM watermark p50 / p90 / max | time at "
      "or above high mark | gets whose best replica was SSD | requests with "
      "an SSD read | per holder: SSD-only blocks routed/s p50 / max (need) "
      "| per holder: promoted/s p50 / max | ceiling/s |\n|---|---|---|---|"
      "---|---|---|---|\n";
  for (const auto& a : r["arms"]) {
    const auto& m0 = a["m0"];
    std::string need, got;
    for (const auto& h : m0["holders"]) {
      if (!need.empty()) {
        need += "; ";
        got += "; ";
      }
      need += fmt::format("{:.0f} / {:.0f}", Num(h["target_per_s"], "p50"),
                          Num(h["target_per_s"], "max"));
      got += fmt::format("{:.0f} / {:.0f}", Num(h["promoted_per_s"], "p50"),
                         Num(h["promoted_per_s"], "max"));
    }
    md += fmt::format(
        "| {} | {:.3f} / {:.3f} / {:.3f} | {} | {} | {} | {} | {} | {:.0f} |\n",
        a["name"].get<std::string>(), Num(m0["watermark"], "p50"),
        Num(m0["watermark"], "p90"), Num(m0["watermark"], "max"),
        Pct(Num(m0["watermark"], "share_at_or_above_high")),
        Pct(Num(m0, "ssd_share_of_gets")),
        Pct(Num(m0, "requests_with_an_ssd_read")), need, got,
        Num(m0, "single_worker_ceiling_per_s"));
  }
  md +=
      "\n## Fate of every prefetch\n\nTrigger outcomes (router: "
      "per key sent in BatchPrefetchToMemory; exist: per key offered to "
      "the client's prefetcher), then the promotions the master started "
      "and what became of the replicas that landed.\n\n"
      "| arm | router keys | queued | in DRAM already | no SSD copy | "
      "throttled watermark | throttled cap | exist keys | dedup | "
      "throttled cooldown | passed |\n|---|---|---|---|---|---|---|---|---|"
      "---|---|\n";
  for (const auto& a : r["arms"]) {
    const auto& rt = a["triggers"]["router"];
    const auto& ex = a["triggers"]["exist"];
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        a["name"].get<std::string>(), rt["keys"].get<uint64_t>(),
        rt["queued"].get<uint64_t>(), rt["in_memory"].get<uint64_t>(),
        rt["no_local_disk"].get<uint64_t>() + rt["not_found"].get<uint64_t>(),
        rt["throttled_watermark"].get<uint64_t>(),
        rt["throttled_cap"].get<uint64_t>(), ex["keys"].get<uint64_t>(),
        ex["dedup"].get<uint64_t>(), ex["throttled_cooldown"].get<uint64_t>(),
        ex["passed_throttle"].get<uint64_t>());
  }
  md +=
      "\n| arm | promotions started | landed | failed | cancelled / "
      "expired (past deadline) | in flight at end | read from DRAM by its get "
      "| read "
      "after lease end | landed after its get | evicted unread | removed "
      "unread | never read |\n|---|---|---|---|---|---|---|---|---|---|---|"
      "---|\n";
  for (const auto& a : r["arms"]) {
    const auto& p = a["promotions"];
    const auto& f = p["fates"];
    md += fmt::format(
        "| {} | {} | {} | {} | {} / {} ({}) | {} | {} | {} | {} | {} | {} | "
        "{} |\n",
        a["name"].get<std::string>(), p["started"].get<uint64_t>(),
        p["landed"].get<uint64_t>(), p["failed"].get<uint64_t>(),
        p["cancelled"].get<uint64_t>(), p["expired"].get<uint64_t>(),
        f.value("expired", uint64_t{0}), p["in_flight_at_end"].get<uint64_t>(),
        f["read_from_dram"].get<uint64_t>(),
        f["read_after_lease_end"].get<uint64_t>(),
        f["landed_after_get"].get<uint64_t>(),
        f["evicted_unread"].get<uint64_t>(),
        f["removed_unread"].get<uint64_t>(), f["never_read"].get<uint64_t>());
  }
  md +=
      "\n## Method per arm\n\n| arm | fill blocks (failed) | settle after "
      "fill s | filler blocks | settle s | settled | fill blocks at start: "
      "DRAM / SSD-only / absent | measure s | max dispatch lag ms | route "
      "errors | checks |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : r["arms"]) {
    const auto& ph = a["phases_sec"];
    const auto& c = a["fill_blocks_at_measure_start"];
    std::string failed;
    for (const auto& [k, v] : a["checks"].items()) {
      if (!v.get<bool>()) failed += (failed.empty() ? "" : ", ") + k;
    }
    md += fmt::format(
        "| {} | {} ({}) | {:.1f} | {} | {:.1f} | {} | {} / {} / {} | {:.1f} | "
        "{:.1f} | {} | {} |\n",
        a["name"].get<std::string>(), a["fill"]["blocks"].get<uint64_t>(),
        a["fill"]["failed"].get<uint64_t>(), Num(ph, "settle_after_fill"),
        a["overflow"]["filler_blocks"].get<uint64_t>(), Num(ph, "settle"),
        a["settled"].get<bool>() ? "yes" : "no", c["memory"].get<uint64_t>(),
        c["ssd_only"].get<uint64_t>(), c["absent"].get<uint64_t>(),
        Num(ph, "measure"), Num(a["routing"], "max_dispatch_lag_ms"),
        a["routing"]["route_errors"].get<uint64_t>(),
        failed.empty() ? "all pass" : "FAILED: " + failed);
  }
  if (r.contains("targets")) {
    const auto& t = r["targets"];
    md += fmt::format(
        "\n## Targets (router arm)\n\n- blocks SSD-only at trigger time read "
        "from DRAM: {} (target >= 90%: {})\n- TTFT p50 cut vs off: {} "
        "(target >= 50%: {})\n",
        Pct(Num(t, "ssd_only_read_from_dram")),
        t["ssd_only_read_from_dram_met"].get<bool>() ? "met" : "not met",
        Pct(Num(t, "ttft_p50_cut_vs_off")),
        t["ttft_p50_cut_met"].get<bool>() ? "met" : "not met");
  }
  return md;
}

}  // namespace kvpool::replay
