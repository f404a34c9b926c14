#include "replay/batch_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>

#include "router/dispatch.h"

namespace kvpool::replay {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One engine: its scheduler, loaders and the loads in flight. The engines
// are advanced together in time order, since their loads share the disk.
struct EngineSim {
  BatchScheduler sched;
  std::vector<size_t> mine;  // indices into the requests, arrival order
  size_t next = 0;
  std::vector<double> loader_free;
  std::multimap<double, size_t> loads;  // done time -> request
  bool stepping = false;
  StepPlan plan;
  double step_end = 0;

  EngineSim(const SimConfig& cfg)
      : sched(cfg.scheduler), loader_free(std::max(1, cfg.loaders), 0.0) {}

  // When this engine next has something to do: the end of its step, or
  // its next arrival or load completion.
  double NextTime(const std::vector<SimRequest>& all) const {
    if (stepping) return step_end;
    double t = kInf;
    if (next < mine.size()) t = all[mine[next]].arrival_ms;
    if (!loads.empty()) t = std::min(t, loads.begin()->first);
    return t;
  }
};

}  // namespace

double SimResult::BusyFraction(double w0, double w1) const {
  if (w1 <= w0 || steps.empty()) return 0;
  double busy = 0;
  for (const auto& e : steps) {
    for (const auto& [a, b] : e) {
      const double lo = std::max(a, w0), hi = std::min(b, w1);
      if (hi > lo) busy += hi - lo;
    }
  }
  return busy / ((w1 - w0) * double(steps.size()));
}

double SimResult::DiskBusyFraction(double w0, double w1) const {
  if (w1 <= w0) return 0;
  double busy = 0;
  for (const auto& [a, b] : disk) {
    const double lo = std::max(a, w0), hi = std::min(b, w1);
    if (hi > lo) busy += hi - lo;
  }
  return busy / (w1 - w0);
}

SimResult Simulate(const std::vector<SimRequest>& requests, int engines,
                   const SimConfig& cfg) {
  SimResult r;
  r.requests.resize(requests.size());
  const size_t n = size_t(std::max(1, engines));
  r.steps.resize(n);
  std::vector<EngineSim> es(n, EngineSim(cfg));
  const bool fixed = cfg.dispatch == SimDispatch::kRoundRobin;
  // Arrivals in time order, dispatched as they come unless fixed.
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].arrival_ms < requests[b].arrival_ms;
  });
  size_t next_arrival = 0;
  std::vector<uint64_t> in_flight(n, 0);
  std::vector<EngineInfo> infos(n);
  for (size_t k = 0; k < n; ++k) {
    infos[k].id = std::to_string(k);
    infos[k].local_node_ids = {std::to_string(int(k) % std::max(1, cfg.nodes))};
  }
  std::mt19937_64 rng(cfg.seed);
  auto dispatch = [&](size_t i) -> size_t {
    if (cfg.dispatch == SimDispatch::kRouter) {
      std::vector<std::string> holders;
      for (int h : requests[i].holders) holders.push_back(std::to_string(h));
      const DispatchChoice c =
          PickEngine(infos, in_flight, holders, cfg.affinity_weight);
      if (c.engine >= 0) return size_t(c.engine);
    }
    const uint64_t best = *std::min_element(in_flight.begin(), in_flight.end());
    std::vector<size_t> ties;
    for (size_t k = 0; k < n; ++k) {
      if (in_flight[k] == best) ties.push_back(k);
    }
    return ties[rng() % ties.size()];
  };
  if (fixed) {
    for (size_t i : order) {
      const size_t k = size_t(requests[i].engine) % n;
      es[k].mine.push_back(i);
      r.requests[i].engine = int(k);
    }
    next_arrival = order.size();
  }
  const bool at_arrival = cfg.scheduler.load_start == LoadStart::kArrival;
  double disk_free = 0;
  auto start_load = [&](EngineSim& e, size_t i, double t) {
    auto slot = std::min_element(e.loader_free.begin(), e.loader_free.end());
    double done = std::max(t, *slot);
    if (cfg.disk_ms_per_block > 0 && requests[i].disk_blocks > 0) {
      const double ds = std::max(disk_free, done);
      disk_free = ds + double(requests[i].disk_blocks) * cfg.disk_ms_per_block;
      r.disk.emplace_back(ds, disk_free);
      done = disk_free;
    }
    done += requests[i].load_ms;
    *slot = done;
    r.requests[i].load_start_ms = t;
    e.loads.emplace(done, i);
  };
  while (true) {
    size_t k = 0;
    double t = kInf;
    for (size_t j = 0; j < n; ++j) {
      const double nt = es[j].NextTime(requests);
      if (nt < t) {
        t = nt;
        k = j;
      }
    }
    if (next_arrival < order.size() &&
        requests[order[next_arrival]].arrival_ms <= t) {
      // The router sees the engines as they are when the request arrives.
      const size_t i = order[next_arrival++];
      const size_t to = dispatch(i);
      es[to].mine.push_back(i);
      r.requests[i].engine = int(to);
      ++in_flight[to];
      continue;
    }
    if (t == kInf) break;
    EngineSim& e = es[k];
    if (e.stepping) {  // its step ends now
      e.stepping = false;
      StepOutcome out = e.sched.FinishStep(e.plan);
      for (uint64_t i : out.first_token) r.requests[i].first_token_ms = t;
      for (uint64_t i : out.finished) {
        r.requests[i].done_ms = t;
        e.sched.Release(i);
        if (!fixed) --in_flight[k];
      }
    }
    bool changed = true;
    while (changed) {
      changed = false;
      while (e.next < e.mine.size() &&
             requests[e.mine[e.next]].arrival_ms <= t) {
        const size_t i = e.mine[e.next++];
        e.sched.Arrive(i, requests[i].prompt_tokens, requests[i].output_tokens);
        if (at_arrival) start_load(e, i, t);
        changed = true;
      }
      while (!e.loads.empty() && e.loads.begin()->first <= t) {
        const size_t i = e.loads.begin()->second;
        e.loads.erase(e.loads.begin());
        r.requests[i].load_done_ms = t;
        e.sched.LoadDone(i, requests[i].cached_tokens);
        changed = true;
      }
      for (uint64_t i : e.sched.Admit()) {
        r.requests[i].admit_ms = t;
        if (!at_arrival) start_load(e, i, t);
        changed = true;
      }
    }
    e.plan = e.sched.PlanStep();
    if (!e.plan.empty()) {
      e.stepping = true;
      e.step_end =
          t + cfg.step_fixed_ms + cfg.step_ms_per_token * double(e.plan.tokens);
      r.steps[k].emplace_back(t, e.step_end);
    }
  }
  return r;
}

std::vector<SimRequest> SimRequestsOf(const std::vector<TraceRequest>& trace,
                                      size_t begin, size_t end,
                                      double time_scale, int engines,
                                      int nodes) {
  std::vector<SimRequest> out;
  end = std::min(end, trace.size());
  if (begin >= end) return out;
  // Block -> node, in the order blocks first appear.
  std::unordered_map<uint64_t, int> seen;
  const int nn = std::max(1, nodes);
  auto see = [&](const TraceRequest& r) {
    for (uint64_t h : r.hash_ids) {
      seen.emplace(h, int(seen.size() % size_t(nn)));
    }
  };
  for (size_t i = 0; i < begin; ++i) see(trace[i]);
  const double t0 = trace[begin].timestamp_ms;
  for (size_t i = begin; i < end; ++i) {
    const TraceRequest& r = trace[i];
    size_t hit = 0;
    while (hit < r.hash_ids.size() && seen.count(r.hash_ids[hit])) ++hit;
    SimRequest s;
    s.arrival_ms = (r.timestamp_ms - t0) * time_scale;
    s.prompt_tokens = r.input_length;
    s.output_tokens = std::max<uint64_t>(1, r.output_length);
    s.cached_tokens = std::min<uint64_t>(r.input_length, hit * 512);
    s.disk_blocks = hit;
    s.engine = int((i - begin) % size_t(std::max(1, engines)));
    for (size_t j = 0; j < hit; ++j) s.holders.push_back(seen[r.hash_ids[j]]);
    out.push_back(s);
    see(r);
  }
  return out;
}

LoadSizing SizeLoad(const std::vector<TraceRequest>& trace, size_t begin,
                    size_t end, int engines, const SimConfig& config,
                    double gpu_target, double disk_cap) {
  end = std::min(end, trace.size());
  const double span_ms =
      end > begin ? trace[end - 1].timestamp_ms - trace[begin].timestamp_ms : 0;
  auto at = [&](double scale) {
    auto reqs = SimRequestsOf(trace, begin, end, scale, engines, config.nodes);
    SimResult r = Simulate(reqs, engines, config);
    LoadSizing l;
    l.time_scale = scale;
    l.gpu_busy = r.BusyFraction(0, span_ms * scale);
    l.disk_busy = r.DiskBusyFraction(0, span_ms * scale);
    double busiest = 0;
    for (size_t k = 0; k < r.steps.size(); ++k) {
      SimResult one;
      one.steps = {r.steps[k]};
      l.gpu_busy_per_engine.push_back(one.BusyFraction(0, span_ms * scale));
      busiest = std::max(busiest, l.gpu_busy_per_engine.back());
    }
    const double g = l.gpu_busy / gpu_target, d = l.disk_busy / disk_cap,
                 b = busiest / kBusiestEngineCap;
    l.bound = d >= g && d >= b ? "disk" : (b > g ? "busiest engine" : "gpu");
    l.disk_bound = l.bound == "disk";
    return l;
  };
  // >= 1 once any bound is reached.
  auto load = [&](const LoadSizing& l) {
    double busiest = 0;
    for (double v : l.gpu_busy_per_engine) busiest = std::max(busiest, v);
    return std::max({l.gpu_busy / gpu_target, l.disk_busy / disk_cap,
                     busiest / kBusiestEngineCap});
  };
  LoadSizing hi = at(1e3);
  if (load(hi) >= 1) return hi;
  LoadSizing lo = hi;
  while (lo.time_scale > 1e-6) {
    hi = lo;
    lo = at(lo.time_scale / 2);
    if (load(lo) >= 1) break;
  }
  if (load(lo) < 1) return lo;  // neither bound reachable: densest tried
  LoadSizing mid = lo;
  for (int i = 0; i < 30; ++i) {
    mid = at(std::sqrt(lo.time_scale * hi.time_scale));
    const double f = load(mid);
    if (std::fabs(f - 1) < 0.003) break;
    if (f > 1) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return mid;
}

}  // namespace kvpool::replay
