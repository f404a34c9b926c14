#include "replay/engine_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace kvpool::replay {

namespace {

// Every modelled time x m->scale, then the overrides.
void ApplyScale(const HardwareModel& hw, const EngineModelOverrides& overrides,
                EngineModel* mp) {
  EngineModel& m = *mp;
  m.prefill_fixed_ms = hw.prefill_fixed_ms * m.scale;
  m.prefill_ms_per_token = hw.prefill_ms_per_token * m.scale;
  m.decode_ms_per_token = hw.decode_ms_per_token * m.scale;
  m.step_fixed_ms = hw.step_fixed_ms * m.scale;
  m.step_ms_per_token = hw.step_ms_per_token * m.scale;
  if (overrides.step_fixed_ms >= 0 || overrides.step_ms_per_token >= 0) {
    m.step_source = "override";
    if (overrides.step_fixed_ms >= 0) m.step_fixed_ms = overrides.step_fixed_ms;
    if (overrides.step_ms_per_token >= 0) {
      m.step_ms_per_token = overrides.step_ms_per_token;
    }
  }
  if (overrides.prefill_fixed_ms >= 0 || overrides.prefill_ms_per_token >= 0) {
    m.prefill_source = "override";
    if (overrides.prefill_fixed_ms >= 0) {
      m.prefill_fixed_ms = overrides.prefill_fixed_ms;
    }
    if (overrides.prefill_ms_per_token >= 0) {
      m.prefill_ms_per_token = overrides.prefill_ms_per_token;
    }
  }
  if (overrides.decode_ms_per_token >= 0) {
    m.decode_ms_per_token = overrides.decode_ms_per_token;
    m.decode_source = "override";
  }
}

}  // namespace

EngineModel DeriveEngineModel(const HardwareModel& hw,
                              const MeasuredReads& measured,
                              const EngineModelOverrides& overrides) {
  EngineModel m;
  m.hw = hw;
  m.measured = measured;
  m.scale = std::sqrt((measured.ssd_ms / hw.ssd_read_ms) *
                      (measured.dram_ms / hw.dram_read_ms));
  ApplyScale(hw, overrides, &m);
  return m;
}

CappedTiming ChooseCappedTiming(const HardwareModel& hw, uint64_t block_bytes,
                                uint64_t max_bytes_per_s, double min_step_ms) {
  CappedTiming t;
  const double at_cap_ms = double(block_bytes) /
                           double(std::max<uint64_t>(1, max_bytes_per_s)) * 1e3;
  const double by_cap = at_cap_ms / hw.ssd_read_ms;
  const double by_floor = min_step_ms / hw.step_fixed_ms;
  t.scale = std::max(by_cap, by_floor);
  t.step_floor_binds = by_floor > by_cap;
  t.ssd_ms_per_block = hw.ssd_read_ms * t.scale;
  t.h2d_ms_per_block = hw.dram_read_ms * t.scale;
  // Rounded down: the disk may not read a block faster than modelled.
  t.disk_bytes_per_s =
      uint64_t(std::floor(double(block_bytes) / (t.ssd_ms_per_block / 1e3)));
  return t;
}

EngineModel DeriveCappedEngineModel(const HardwareModel& hw,
                                    const MeasuredReads& measured,
                                    const CappedTiming& timing,
                                    const EngineModelOverrides& overrides) {
  EngineModel m;
  m.hw = hw;
  m.measured = measured;
  m.scale = timing.scale;
  m.ssd_ms_per_block = timing.ssd_ms_per_block;
  m.h2d_ms_per_block = timing.h2d_ms_per_block;
  m.scale_source = timing.step_floor_binds ? "step floor" : "disk cap";
  ApplyScale(hw, overrides, &m);
  return m;
}

LoadEstimate EstimateLoad(const std::vector<TraceRequest>& trace, size_t begin,
                          size_t end, double time_scale,
                          const EngineModel& model) {
  LoadEstimate e;
  end = std::min(end, trace.size());
  if (begin >= end) return e;
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < begin; ++i) {
    seen.insert(trace[i].hash_ids.begin(), trace[i].hash_ids.end());
  }
  const double read_ms = (model.SsdMs() + model.DramMs()) / 2;
  double service = 0, out = 0;
  for (size_t i = begin; i < end; ++i) {
    const auto& r = trace[i];
    size_t hit = 0;
    while (hit < r.hash_ids.size() && seen.count(r.hash_ids[hit])) ++hit;
    uint64_t cached = std::min<uint64_t>(r.input_length, hit * 512);
    service += double(hit) * read_ms + model.PrefillMs(r.input_length - cached);
    out += double(r.output_length);
    seen.insert(r.hash_ids.begin(), r.hash_ids.end());
  }
  const double n = double(end - begin);
  const double span_s =
      (trace[end - 1].timestamp_ms - trace[begin].timestamp_ms) / 1000 *
      time_scale;
  e.arrival_rate_per_s = span_s > 0 ? n / span_s : 0;
  e.mean_service_ms = service / n;
  e.mean_output_tokens = out / n;
  return e;
}

double DecodeMsPerTokenFor(double utilisation, int engines,
                           const LoadEstimate& load) {
  if (load.arrival_rate_per_s <= 0 || load.mean_output_tokens <= 0) return 0;
  const double budget_ms =
      utilisation * double(engines) / load.arrival_rate_per_s * 1000;
  return std::max(0.0,
                  (budget_ms - load.mean_service_ms) / load.mean_output_tokens);
}

int64_t ScaledMs(int64_t modelled_ms, double scale) {
  return std::max<int64_t>(1, std::llround(double(modelled_ms) * scale));
}

}  // namespace kvpool::replay
