#include "replay/batch_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>

namespace kvpool::replay {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One engine's requests (indices into `all`), arrival order.
void SimulateEngine(const std::vector<SimRequest>& all,
                    const std::vector<size_t>& mine, const SimConfig& cfg,
                    std::vector<SimRequestResult>* results,
                    std::vector<std::pair<double, double>>* steps) {
  BatchScheduler sched(cfg.scheduler);
  const bool at_arrival = cfg.scheduler.load_start == LoadStart::kArrival;
  std::vector<double> loader_free(std::max(1, cfg.loaders), 0.0);
  std::multimap<double, size_t> loads;  // done time -> request
  auto start_load = [&](size_t i, double t) {
    auto slot = std::min_element(loader_free.begin(), loader_free.end());
    const double s = std::max(t, *slot);
    *slot = s + all[i].load_ms;
    (*results)[i].load_start_ms = t;
    loads.emplace(*slot, i);
  };
  size_t next = 0;
  double t = mine.empty() ? 0 : all[mine[0]].arrival_ms;
  while (true) {
    bool changed = true;
    while (changed) {
      changed = false;
      while (next < mine.size() && all[mine[next]].arrival_ms <= t) {
        const size_t i = mine[next++];
        sched.Arrive(i, all[i].prompt_tokens, all[i].output_tokens);
        if (at_arrival) start_load(i, t);
        changed = true;
      }
      while (!loads.empty() && loads.begin()->first <= t) {
        const size_t i = loads.begin()->second;
        loads.erase(loads.begin());
        (*results)[i].load_done_ms = t;
        sched.LoadDone(i, all[i].cached_tokens);
        changed = true;
      }
      for (uint64_t i : sched.Admit()) {
        (*results)[i].admit_ms = t;
        if (!at_arrival) start_load(i, t);
        changed = true;
      }
    }
    StepPlan plan = sched.PlanStep();
    if (plan.empty()) {
      double nt = kInf;
      if (next < mine.size()) nt = all[mine[next]].arrival_ms;
      if (!loads.empty()) nt = std::min(nt, loads.begin()->first);
      if (nt == kInf) break;
      t = nt;
      continue;
    }
    const double end =
        t + cfg.step_fixed_ms + cfg.step_ms_per_token * double(plan.tokens);
    steps->emplace_back(t, end);
    StepOutcome out = sched.FinishStep(plan);
    for (uint64_t i : out.first_token) (*results)[i].first_token_ms = end;
    for (uint64_t i : out.finished) {
      (*results)[i].done_ms = end;
      sched.Release(i);
    }
    t = end;
  }
}

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

SimResult Simulate(const std::vector<SimRequest>& requests, int engines,
                   const SimConfig& config) {
  SimResult r;
  r.requests.resize(requests.size());
  r.steps.resize(size_t(std::max(1, engines)));
  std::vector<std::vector<size_t>> by_engine(r.steps.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    by_engine[size_t(requests[i].engine) % by_engine.size()].push_back(i);
  }
  for (auto& v : by_engine) {
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return requests[a].arrival_ms < requests[b].arrival_ms;
    });
  }
  for (size_t e = 0; e < by_engine.size(); ++e) {
    SimulateEngine(requests, by_engine[e], config, &r.requests, &r.steps[e]);
  }
  return r;
}

std::vector<SimRequest> SimRequestsOf(const std::vector<TraceRequest>& trace,
                                      size_t begin, size_t end,
                                      double time_scale, int engines,
                                      double read_ms_per_block) {
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
    s.load_ms = double(hit) * read_ms_per_block;
    s.engine = int((i - begin) % size_t(std::max(1, engines)));
    out.push_back(s);
    seen.insert(r.hash_ids.begin(), r.hash_ids.end());
  }
  return out;
}

double TimeScaleForBusy(const std::vector<TraceRequest>& trace, size_t begin,
                        size_t end, int engines, double read_ms_per_block,
                        const SimConfig& config, double target,
                        double* reached) {
  end = std::min(end, trace.size());
  const double span_ms =
      end > begin ? trace[end - 1].timestamp_ms - trace[begin].timestamp_ms : 0;
  auto busy_at = [&](double scale) {
    auto reqs =
        SimRequestsOf(trace, begin, end, scale, engines, read_ms_per_block);
    SimResult r = Simulate(reqs, engines, config);
    return r.BusyFraction(0, span_ms * scale);
  };
  // Busy falls as arrivals spread out, except at scales so small that the
  // span is shorter than one load: walk down from sparse arrivals by
  // halving until the target is reached, then bisect that octave.
  double hi = 1e3, b_hi = busy_at(hi);
  if (b_hi >= target) {
    if (reached) *reached = b_hi;
    return hi;
  }
  double lo = hi, b_lo = b_hi;
  while (lo > 1e-6) {
    lo /= 2;
    b_lo = busy_at(lo);
    if (b_lo >= target) break;
    hi = lo;
    b_hi = b_lo;
  }
  if (b_lo < target) {
    if (reached) *reached = b_lo;
    return lo;
  }
  double mid = lo, b = b_lo;
  for (int i = 0; i < 30; ++i) {
    mid = std::sqrt(lo * hi);
    b = busy_at(mid);
    if (std::fabs(b - target) < 0.002) break;
    if (b > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (reached) *reached = b;
  return mid;
}

}  // namespace kvpool::replay
