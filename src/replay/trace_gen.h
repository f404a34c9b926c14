// Synthetic request traces for `kvpool replay` (issue #42): sessions of
// multi-turn conversations or tool loops that start with shared system
// prompts, so that the replay can be run on workloads it was never tuned on.
// The output is the format ReadTrace reads (src/replay/trace.h).
#ifndef KVPOOL_REPLAY_TRACE_GEN_H_
#define KVPOOL_REPLAY_TRACE_GEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/status.h"
#include "replay/trace.h"

namespace kvpool::replay {

// A lognormal value clamped to [min, max]. `mean` is the mean of the
// unclamped value (not of its log) and `sigma` the standard deviation of its
// log; sigma 0 gives `mean` every time. Clamping moves the mean, so the
// presets keep their clamps far in the tails.
struct LogNormalSpec {
  double mean = 1;
  double sigma = 0;
  double min = 0;
  double max = 1e18;
};

// One kind of session. A session picks one system prompt of its class (or
// none), then runs turns: turn 1's prompt is the system prompt plus
// `first_user_tokens`; turn k+1's prompt is turn k's prompt, turn k's
// output and `user_tokens` new tokens, so it starts with every full block of
// turn k. A tool loop is the same shape with a long system prompt (the tool
// definitions), short outputs (tool calls), short user turns (tool results)
// and short think times (tool execution).
struct SessionClass {
  std::string name;
  double weight = 1;  // share of new sessions, relative to the other classes

  // Pool of this class's system prompts; each session starts with one,
  // chosen with Zipf popularity (prompt i, from 0, has weight
  // 1 / (i + 1)^system_zipf). 0 prompts: sessions start with the user.
  int system_prompts = 1;
  double system_zipf = 1.0;
  LogNormalSpec system_tokens;  // drawn once per pool prompt

  // Turns per session: geometric with this mean (1 = single-turn).
  double mean_turns = 1;
  LogNormalSpec first_user_tokens;  // new tokens of turn 1 (e.g. a document)
  LogNormalSpec user_tokens;        // new tokens of the later turns
  LogNormalSpec output_tokens;
  // Between a turn's response and the next turn's arrival. The response
  // itself takes output_tokens * TraceGenConfig::decode_ms_per_token.
  LogNormalSpec think_ms;
};

enum class ArrivalProcess {
  kPoisson,  // exponential inter-arrivals of new sessions
  kGamma,    // gamma inter-arrivals with coefficient of variation arrival_cv
};

struct TraceGenConfig {
  uint64_t seed = 1;
  size_t requests = 4000;  // the trace's first `requests` by arrival
  // Target requests per second of trace time. New sessions arrive at
  // request_rate / (weighted mean turns per session); sessions cut short by
  // max_prompt_tokens make the measured rate a little lower.
  double request_rate = 5;
  ArrivalProcess arrival = ArrivalProcess::kPoisson;
  double arrival_cv = 1;  // kGamma only; > 1 is bursty
  // A session whose next prompt would be longer ends before it. The default
  // keeps every request far inside the replay's modelled GPU (466,944
  // tokens of KV).
  uint64_t max_prompt_tokens = 65536;
  double decode_ms_per_token = 25;
  std::vector<SessionClass> classes;
};

// INVALID_PARAMS naming the field when the config cannot be generated
// (no classes, a non-positive rate or mean, min > max, a system prompt that
// leaves no room under max_prompt_tokens, ...).
Status ValidateTraceGenConfig(const TraceGenConfig& config);

// The first config.requests requests of the config's trace, by arrival
// (integer ms, non-decreasing). The same config (seed included) gives the
// same trace. Two requests share the hash id at block j iff their first
// (j + 1) * 512 tokens (fewer for a partial last block) are the same tokens;
// ids are numbered from 0 in order of first appearance. Empty when
// ValidateTraceGenConfig fails.
std::vector<TraceRequest> GenerateTrace(const TraceGenConfig& config);

// Writes `trace` in ReadTrace's format; FILE_WRITE_FAIL naming the path when
// it cannot be created or written.
Status WriteTrace(const std::vector<TraceRequest>& trace,
                  const std::string& path);

// Named configurations; docs/replay.md tabulates their statistics.
struct TracePreset {
  std::string name;
  std::string description;  // one line
  TraceGenConfig config;
};
const std::vector<TracePreset>& TracePresets();
// The preset called `name`; INVALID_PARAMS listing the names otherwise.
Result<TraceGenConfig> PresetConfig(const std::string& name);

// What `kvpool trace-gen --stats` prints. A reused block is one an earlier
// request of the trace referenced; the other references are new blocks.
struct TraceGenStats {
  size_t requests = 0;
  double span_s = 0;
  double request_rate = 0;  // requests / span
  double mean_blocks = 0;
  double mean_reused_blocks = 0;
  double mean_new_blocks = 0;
  double mean_input_tokens = 0;
  double mean_output_tokens = 0;
  size_t distinct_blocks = 0;
  // Distinct blocks of requests [window_begin, window_end): the measured
  // part of `kvpool replay --requests window_end --measure
  // (window_end - window_begin)`, which the all-dram arm keeps in DRAM.
  // 0 when the trace is shorter than window_end.
  size_t window_distinct_blocks = 0;
};
TraceGenStats ComputeTraceGenStats(const std::vector<TraceRequest>& trace,
                                   size_t window_begin = 3000,
                                   size_t window_end = 3400);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_TRACE_GEN_H_
