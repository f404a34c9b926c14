#include "scale_sim/workload.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "scale_sim/slot_map.h"

namespace kvpool::scale_sim {

namespace {

// A uniform double in [0, 1) from a hash.
double Unit(uint64_t h) { return double(Mix64(h) >> 11) * 0x1.0p-53; }

}  // namespace

Result<Workload> Workload::Create(std::vector<TraceEntry> trace,
                                  uint32_t global_min_refs) {
  std::erase_if(trace, [](const TraceEntry& e) { return e.blocks.empty(); });
  if (trace.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "the trace has no request with blocks");
  }
  std::stable_sort(
      trace.begin(), trace.end(),
      [](const TraceEntry& a, const TraceEntry& b) { return a.t_ms < b.t_ms; });
  const double t0 = trace.front().t_ms;
  for (auto& e : trace) e.t_ms -= t0;
  Workload w;
  w.seen_.reserve(trace.size());
  std::unordered_set<uint64_t> seen;
  for (const auto& e : trace) {
    std::vector<bool> s(e.blocks.size());
    for (size_t b = 0; b < e.blocks.size(); ++b) s[b] = seen.count(e.blocks[b]);
    for (uint64_t id : e.blocks) seen.insert(id);
    w.seen_.push_back(std::move(s));
  }
  // Requests holding each block (a block twice in one request counts once).
  std::unordered_map<uint64_t, uint32_t> refs;
  for (const auto& e : trace) {
    std::unordered_set<uint64_t> own(e.blocks.begin(), e.blocks.end());
    for (uint64_t id : own) ++refs[id];
  }
  w.global_.reserve(trace.size());
  for (const auto& e : trace) {
    std::vector<bool> g(e.blocks.size());
    for (size_t b = 0; b < e.blocks.size(); ++b) {
      g[b] = global_min_refs > 0 && refs[e.blocks[b]] >= global_min_refs;
    }
    w.global_.push_back(std::move(g));
  }
  const double n = double(trace.size());
  // A loop lasts the trace's span plus one mean gap, so the last request of
  // a loop and the first of the next are one gap apart, not together (a
  // trace of one request, or of one instant, loops every millisecond).
  const double span_ms = trace.back().t_ms;
  const double loop_ms = span_ms > 0 && n > 1 ? span_ms * n / (n - 1) : n;
  w.span_us_ = loop_ms * 1000;
  w.trace_rate_ = n / (loop_ms / 1000);
  w.trace_ = std::move(trace);
  return w;
}

std::vector<SimRequest> Workload::Sample(double rate, size_t requests,
                                         uint64_t seed, double start) const {
  std::vector<SimRequest> out;
  if (!(rate > 0) || requests == 0) return out;
  const uint64_t copies =
      std::max<uint64_t>(1, uint64_t(std::llround(rate / trace_rate_)));
  const double speed = rate / (double(copies) * trace_rate_);
  const double period_us = span_us_ / speed;
  const double window_us = double(requests) / rate * 1e6;
  const double start_us =
      (start >= 0 ? std::min(start, 1.0) : Unit(seed ^ 0x5CA1E)) * period_us;
  out.reserve(requests + requests / 8);
  for (uint64_t j = 0; j < copies; ++j) {
    // Copies spread evenly over a loop, each jittered within its slot
    // (the first copy not: `start` is measured on its loop).
    const double jitter = j == 0 ? 0 : Unit(seed * 0x100000001B3ull + j);
    const double phase = (double(j) + jitter) / double(copies) * period_us;
    // Copy j's request i of loop l arrives at phase + l * period +
    // t_i / speed (shifted by start_us into the window's time).
    const double first = start_us - phase;
    const int64_t l_lo = int64_t(std::floor(first / period_us));
    const int64_t l_hi = int64_t(std::floor((first + window_us) / period_us));
    for (int64_t l = l_lo; l <= l_hi; ++l) {
      const double base = phase + double(l) * period_us - start_us;
      // Trace times (ms at speed 1) that land in [0, window_us).
      const double lo_ms = (0 - base) * speed / 1000;
      const double hi_ms = (window_us - base) * speed / 1000;
      auto it = std::lower_bound(
          trace_.begin(), trace_.end(), lo_ms,
          [](const TraceEntry& e, double t) { return e.t_ms < t; });
      for (; it != trace_.end() && it->t_ms < hi_ms; ++it) {
        SimRequest r;
        r.t_us = base + it->t_ms * 1000 / speed;
        if (r.t_us < 0 || r.t_us >= window_us) continue;
        r.instance = (j << 24) ^ uint64_t(l + (int64_t{1} << 23));
        r.entry = uint32_t(it - trace_.begin());
        out.push_back(r);
      }
    }
  }
  std::sort(
      out.begin(), out.end(), [](const SimRequest& a, const SimRequest& b) {
        return a.t_us != b.t_us ? a.t_us < b.t_us : a.instance < b.instance;
      });
  return out;
}

uint64_t Workload::KeyHash(const SimRequest& r, size_t b) const {
  const uint64_t instance = global_[r.entry][b] ? 0 : r.instance + 1;
  return Mix64(trace_[r.entry].blocks[b] ^ Mix64(instance));
}

}  // namespace kvpool::scale_sim
