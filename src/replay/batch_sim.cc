#include "replay/batch_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>

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
  for (size_t i = 0; i < requests.size(); ++i) {
    es[size_t(requests[i].engine) % n].mine.push_back(i);
  }
  for (auto& e : es) {
    std::stable_sort(e.mine.begin(), e.mine.end(), [&](size_t a, size_t b) {
      return requests[a].arrival_ms < requests[b].arrival_ms;
    });
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
    if (t == kInf) break;
    EngineSim& e = es[k];
    if (e.stepping) {  // its step ends now
      e.stepping = false;
      StepOutcome out = e.sched.FinishStep(e.plan);
      for (uint64_t i : out.first_token) r.requests[i].first_token_ms = t;
      for (uint64_t i : out.finished) {
        r.requests[i].done_ms = t;
        e.sched.Release(i);
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
                                      double time_scale, int engines) {
  std::vector<SimRequest> out;
  end = std::min(end, trace.size());
  if (begin >= end) return out;
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < begin; ++i) {
    seen.insert(trace[i].hash_ids.begin(), trace[i].hash_ids.end());
  }
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
    out.push_back(s);
    seen.insert(r.hash_ids.begin(), r.hash_ids.end());
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
    auto reqs = SimRequestsOf(trace, begin, end, scale, engines);
    SimResult r = Simulate(reqs, engines, config);
    LoadSizing l;
    l.time_scale = scale;
    l.gpu_busy = r.BusyFraction(0, span_ms * scale);
    l.disk_busy = r.DiskBusyFraction(0, span_ms * scale);
    l.disk_bound = l.disk_busy / disk_cap > l.gpu_busy / gpu_target;
    return l;
  };
  // >= 1 once either bound is reached.
  auto load = [&](const LoadSizing& l) {
    return std::max(l.gpu_busy / gpu_target, l.disk_busy / disk_cap);
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
