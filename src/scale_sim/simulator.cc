#include "scale_sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "scale_sim/shard_queue.h"

namespace kvpool::scale_sim {

namespace {

// The op index of a heartbeat in a shard's call list.
constexpr uint8_t kHeartbeat = kOpCount;

struct Call {
  double t_us;
  uint32_t request;
  uint32_t keys;
  uint8_t op;
  uint8_t part;  // which of the op's calls
};

double Unit(uint64_t h) { return double(Mix64(h) >> 11) * 0x1.0p-53; }

// Nodes that heartbeat to shard `s`.
int NodesOf(const ScenarioConfig& c, int s) {
  if (c.layout == NodeLayout::kAll) return c.nodes;
  return c.nodes / c.shards + (s < c.nodes % c.shards ? 1 : 0);
}

// Fills `calls` (one list per shard) with the sampled requests' calls and
// `touches` with how many requests call each shard; `keys` gets each
// block's (shard, key) for the shares of objects.
void SplitRequests(const Workload& w, const std::vector<SimRequest>& sample,
                   const SlotMap& map, const ScenarioConfig& c,
                   const CostModel& costs,
                   std::vector<std::vector<Call>>* calls,
                   std::vector<uint64_t>* touches,
                   std::vector<std::pair<uint64_t, int>>* keys) {
  const int n = map.shards();
  std::vector<uint32_t> count(n, 0);
  std::vector<uint8_t> touched_any(n, 0);
  std::vector<int> touched, shard_of;
  for (uint32_t ri = 0; ri < sample.size(); ++ri) {
    const SimRequest& r = sample[ri];
    const size_t blocks = w.entry(r).blocks.size();
    shard_of.resize(blocks);
    const size_t depth = std::min<size_t>(c.tag_depth, blocks - 1);
    const uint64_t tag = w.KeyHash(r, depth);
    for (size_t b = 0; b < blocks; ++b) {
      const uint64_t key = w.KeyHash(r, b);
      const bool by_key = c.routing == Routing::kKey || b < depth;
      shard_of[b] = map.ShardOf(by_key ? key : tag);
      keys->emplace_back(key, shard_of[b]);
    }
    for (int op = 0; op < kOpCount; ++op) {
      if (!c.enabled[op]) continue;
      for (size_t b = 0; b < blocks; ++b) {
        const bool seen = w.Seen(r.entry, b);
        if ((op == int(Op::kGet) && !seen) || (op == int(Op::kPut) && seen)) {
          continue;
        }
        if (count[shard_of[b]]++ == 0) touched.push_back(shard_of[b]);
      }
      const OpCost& cost = costs.ops[op];
      for (int s : touched) {
        for (int part = 0; part < cost.calls; ++part) {
          (*calls)[s].push_back(
              Call{r.t_us + c.offset_us[op] + part * c.call_gap_us, ri,
                   count[s], uint8_t(op), uint8_t(part)});
        }
        count[s] = 0;
        touched_any[s] = 1;
      }
      touched.clear();
    }
    for (int s = 0; s < n; ++s) {
      (*touches)[s] += touched_any[s];
      touched_any[s] = 0;
    }
  }
}

}  // namespace

const char* NodeLayoutName(NodeLayout l) {
  return l == NodeLayout::kAll ? "all" : "group";
}

Percentiles ComputePercentiles(std::vector<double>& v) {
  Percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    size_t i = size_t(std::ceil(q * double(v.size())));
    return v[std::clamp<size_t>(i, 1, v.size()) - 1];
  };
  p.p50 = rank(0.50);
  p.p99 = rank(0.99);
  p.p999 = rank(0.999);
  p.max = v.back();
  return p;
}

double ScenarioResult::RateAtUtil(double util_limit) const {
  // A shard's load is demand_us per request over its threads' capacity:
  // util = rate * demand_us / (threads * 1e6), plus its heartbeats.
  double best = std::numeric_limits<double>::infinity();
  for (const auto& s : shards) {
    if (s.demand_us <= 0) continue;
    const double room = std::max(0.0, util_limit - s.heartbeat_util);
    best = std::min(best, room * service_threads * 1e6 / s.demand_us);
  }
  return std::isinf(best) ? 0 : best;
}

ScenarioResult RunScenario(const Workload& workload, const CostModel& costs,
                           const ScenarioConfig& config) {
  ScenarioResult res;
  res.config = config;
  res.service_threads = costs.service_threads;
  const SlotMap map(config.shards);
  const int n = map.shards();
  res.config.shards = n;
  const auto sample = workload.Sample(config.rate, config.requests, config.seed,
                                      config.window_start);
  res.requests = sample.size();
  const double window_us = double(config.requests) / config.rate * 1e6;
  res.window_s = window_us / 1e6;

  std::vector<std::vector<Call>> calls(n);
  std::vector<uint64_t> touches(n, 0);
  std::vector<std::pair<uint64_t, int>> keys;
  SplitRequests(workload, sample, map, config, costs, &calls, &touches, &keys);

  // Heartbeats: each node of a shard once per interval, at its own phase,
  // over the window and the tail the requests' later calls reach into.
  const double interval_us = costs.heartbeat_interval_ms * 1000;
  const double tail_us =
      *std::max_element(config.offset_us.begin(), config.offset_us.end()) +
      16 * config.call_gap_us;
  res.shards.resize(n);
  for (int s = 0; s < n; ++s) {
    const int nodes = NodesOf(config, s);
    for (int i = 0; i < nodes; ++i) {
      const uint64_t id = (uint64_t(s) << 32) | uint64_t(i);
      for (double t = Unit(config.seed ^ Mix64(id)) * interval_us;
           t < window_us + tail_us; t += interval_us) {
        calls[s].push_back(Call{t, 0, 0, kHeartbeat, 0});
      }
    }
    res.shards[s].heartbeat_util =
        nodes / interval_us * costs.heartbeat_us / costs.service_threads;
  }

  std::array<std::vector<double>, kOpCount> latency;
  for (auto& l : latency) l.assign(sample.size(), 0);
  uint64_t request_calls = 0;
  for (int s = 0; s < n; ++s) {
    auto& list = calls[s];
    std::sort(list.begin(), list.end(), [](const Call& a, const Call& b) {
      if (a.t_us != b.t_us) return a.t_us < b.t_us;
      if (a.request != b.request) return a.request < b.request;
      if (a.op != b.op) return a.op < b.op;
      return a.part < b.part;
    });
    ShardQueue queue(costs.service_threads);
    double request_busy_us = 0;
    for (const Call& c : list) {
      const bool heartbeat = c.op == kHeartbeat;
      const double service = heartbeat ? costs.heartbeat_us
                                       : costs.ops[c.op].CallServiceUs(c.keys);
      const auto served = queue.Submit(c.t_us, service);
      if (heartbeat) continue;
      // Only the window's own requests' service counts as its load.
      request_busy_us += service;
      ++request_calls;
      double& l = latency[c.op][c.request];
      l = std::max(l, served.done_us - c.t_us);
    }
    ShardStats& st = res.shards[s];
    st.calls = list.size();
    st.demand_us = sample.empty() ? 0 : request_busy_us / double(sample.size());
    st.util = request_busy_us / (costs.service_threads * window_us);
    st.touch_fraction =
        sample.empty() ? 0 : double(touches[s]) / double(sample.size());
    list.clear();
    list.shrink_to_fit();
  }

  // Latency of the requests after the warm-up.
  const double warm_us = config.warmup_fraction * window_us;
  for (int op = 0; op < kOpCount; ++op) {
    if (!config.enabled[op]) continue;
    std::vector<double> ms;
    ms.reserve(sample.size());
    for (size_t i = 0; i < sample.size(); ++i) {
      if (sample[i].t_us < warm_us || latency[op][i] <= 0) continue;
      ms.push_back(latency[op][i] / 1000);
    }
    res.latency_ms[op] = ComputePercentiles(ms);
  }

  // Shares of the objects: the distinct keys of the sample by shard.
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const auto& a, const auto& b) {
                           return a.first == b.first;
                         }),
             keys.end());
  std::vector<double> distinct(n, 0);
  for (const auto& k : keys) distinct[k.second] += 1;
  double util_sum = 0, request_util_sum = 0, max_request_util = 0;
  int biggest = 0;
  for (int s = 0; s < n; ++s) {
    ShardStats& st = res.shards[s];
    st.object_share = keys.empty() ? 0 : distinct[s] / double(keys.size());
    if (st.object_share > res.shards[biggest].object_share) biggest = s;
    res.max_util = std::max(res.max_util, st.util + st.heartbeat_util);
    util_sum += st.util + st.heartbeat_util;
    request_util_sum += st.util;
    max_request_util = std::max(max_request_util, st.util);
  }
  res.mean_util = util_sum / n;
  res.skew =
      request_util_sum > 0 ? max_request_util / (request_util_sum / n) : 1;
  res.calls_per_request =
      sample.empty() ? 0 : double(request_calls) / double(sample.size());
  const ShardStats& big = res.shards[biggest];
  res.max_shard_objects = config.objects * big.object_share;
  res.max_shard_bytes = res.max_shard_objects * costs.bytes_per_object;
  res.failover_s = costs.FailoverSeconds(res.max_shard_objects);
  res.failover_fraction = big.touch_fraction;
  res.failover_requests = config.rate * big.touch_fraction * res.failover_s;
  return res;
}

}  // namespace kvpool::scale_sim
