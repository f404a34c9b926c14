#include "replay/trace_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <queue>
#include <random>
#include <unordered_map>

namespace kvpool::replay {

namespace {

// Only the engine comes from <random>: std::mt19937_64's output is fixed by
// the standard, while std's distributions are implementation-defined. With
// the arithmetic below the same seed gives the same trace on any standard
// library (up to the last bit of libm's log/exp, which we build only with
// GCC/glibc anyway).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in (0, 1): never 0, so log() below is finite.
  double Uniform() {
    return (double(engine_() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  double Exponential(double mean) { return -mean * std::log(Uniform()); }
  // Box-Muller. The second value is dropped rather than cached, so a draw
  // depends only on the engine's state, not on earlier calls' parity.
  double Normal() {
    return std::sqrt(-2.0 * std::log(Uniform())) *
           std::cos(2.0 * std::numbers::pi * Uniform());
  }
  double LogNormal(const LogNormalSpec& s) {
    double v = s.mean;
    if (s.sigma > 0) {
      const double mu = std::log(s.mean) - s.sigma * s.sigma / 2;
      v = std::exp(mu + s.sigma * Normal());
    }
    return std::clamp(v, s.min, s.max);
  }
  uint64_t Tokens(const LogNormalSpec& s) {
    return uint64_t(std::llround(LogNormal(s)));
  }
  // Marsaglia-Tsang (2000); shape < 1 through Gamma(shape + 1) *
  // U^(1/shape). Mean shape * scale.
  double Gamma(double shape, double scale) {
    if (shape < 1) {
      return Gamma(shape + 1, scale) * std::pow(Uniform(), 1.0 / shape);
    }
    const double d = shape - 1.0 / 3, c = 1.0 / std::sqrt(9 * d);
    for (;;) {
      double x, v;
      do {
        x = Normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = Uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) {
        return d * v * scale;
      }
    }
  }
  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  std::mt19937_64 engine_;
};

// A run of tokens with one content: a system prompt, one user turn or one
// output. Content ids are unique, so two prompts have the same first n
// tokens iff their segment lists agree on those tokens.
struct Segment {
  uint64_t content = 0;
  uint64_t tokens = 0;
};

struct PendingRequest {
  double time_ms = 0;
  uint64_t order = 0;  // creation order: ties of time_ms sort by it
  uint64_t input = 0;
  uint64_t output = 0;
  std::vector<Segment> prompt;
};

// Index by cumulative weight; `cdf` ends with the total.
size_t PickWeighted(const std::vector<double>& cdf, Rng& rng) {
  const double x = rng.Uniform() * cdf.back();
  const auto it = std::upper_bound(cdf.begin(), cdf.end(), x);
  return std::min(size_t(it - cdf.begin()), cdf.size() - 1);
}

struct ClassState {
  std::vector<Segment> system;   // the pool
  std::vector<double> zipf_cdf;  // over the pool
};

Status CheckSpec(const LogNormalSpec& s, const std::string& what,
                 double floor) {
  if (!(s.mean > 0) || !std::isfinite(s.mean)) {
    return Status(ErrorCode::INVALID_PARAMS, what + ".mean must be > 0");
  }
  if (!(s.sigma >= 0) || s.sigma > 5) {
    return Status(ErrorCode::INVALID_PARAMS, what + ".sigma must be in [0, 5]");
  }
  if (!(s.min >= floor) || !(s.max >= s.min)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("{}: need {} <= min <= max", what, floor));
  }
  return Status::OK();
}

// Assigns block ids: a block is identified by its parent block and the
// pieces of segments it holds, which together fix its whole token prefix.
class BlockNamer {
 public:
  std::vector<uint64_t> Name(const std::vector<Segment>& prompt) {
    std::vector<uint64_t> ids;
    uint64_t parent = kRoot;
    size_t seg = 0;
    uint64_t offset = 0;  // into prompt[seg]
    std::string key;
    while (seg < prompt.size()) {
      key.assign(reinterpret_cast<const char*>(&parent), sizeof(parent));
      uint64_t room = kTraceBlockTokens;
      while (room > 0 && seg < prompt.size()) {
        const uint64_t take = std::min(room, prompt[seg].tokens - offset);
        const uint64_t piece[3] = {prompt[seg].content, offset, take};
        key.append(reinterpret_cast<const char*>(piece), sizeof(piece));
        room -= take;
        offset += take;
        if (offset == prompt[seg].tokens) {
          ++seg;
          offset = 0;
        }
      }
      auto [it, fresh] = ids_.try_emplace(key, ids_.size());
      parent = it->second;
      ids.push_back(parent);
    }
    return ids;
  }

 private:
  static constexpr uint64_t kRoot = ~uint64_t{0};
  std::unordered_map<std::string, uint64_t> ids_;
};

}  // namespace

Status ValidateTraceGenConfig(const TraceGenConfig& c) {
  auto bad = [](const std::string& m) {
    return Status(ErrorCode::INVALID_PARAMS, m);
  };
  if (c.classes.empty()) return bad("no session classes");
  if (!(c.request_rate > 0) || !std::isfinite(c.request_rate)) {
    return bad("request_rate must be > 0");
  }
  if (c.arrival == ArrivalProcess::kGamma &&
      (!(c.arrival_cv > 0) || c.arrival_cv > 100)) {
    return bad("arrival_cv must be in (0, 100]");
  }
  if (!(c.decode_ms_per_token >= 0)) {
    return bad("decode_ms_per_token must be >= 0");
  }
  if (c.max_prompt_tokens < 2 || c.max_prompt_tokens > 466944) {
    return bad("max_prompt_tokens must be in [2, 466944]");
  }
  double weights = 0;
  for (const auto& k : c.classes) {
    const std::string n = "class " + k.name;
    if (!(k.weight >= 0)) return bad(n + ": weight must be >= 0");
    weights += k.weight;
    if (k.system_prompts < 0) return bad(n + ": system_prompts must be >= 0");
    if (!(k.system_zipf >= 0)) return bad(n + ": system_zipf must be >= 0");
    if (!(k.mean_turns >= 1) || k.mean_turns > 1e6) {
      return bad(n + ": mean_turns must be in [1, 1e6]");
    }
    for (auto [spec, what, floor] :
         {std::tuple{&k.first_user_tokens, "first_user_tokens", 1.0},
          std::tuple{&k.user_tokens, "user_tokens", 1.0},
          std::tuple{&k.output_tokens, "output_tokens", 1.0},
          std::tuple{&k.think_ms, "think_ms", 0.0}}) {
      if (auto s = CheckSpec(*spec, n + ": " + what, floor); !s.ok()) return s;
    }
    if (k.system_prompts > 0) {
      if (auto s = CheckSpec(k.system_tokens, n + ": system_tokens", 1);
          !s.ok()) {
        return s;
      }
      if (k.system_tokens.max >= double(c.max_prompt_tokens)) {
        return bad(n + ": system_tokens.max must be below max_prompt_tokens");
      }
    }
  }
  if (!(weights > 0)) return bad("the class weights sum to 0");
  return Status::OK();
}

std::vector<TraceRequest> GenerateTrace(const TraceGenConfig& c) {
  if (!ValidateTraceGenConfig(c).ok() || c.requests == 0) return {};
  Rng rng(c.seed);

  std::vector<ClassState> states(c.classes.size());
  std::vector<double> class_cdf;
  double weights = 0, turns = 0;
  uint64_t next_content = 0;
  for (size_t i = 0; i < c.classes.size(); ++i) {
    const SessionClass& k = c.classes[i];
    weights += k.weight;
    turns += k.weight * k.mean_turns;
    class_cdf.push_back(weights);
    double zipf = 0;
    for (int p = 0; p < k.system_prompts; ++p) {
      states[i].system.push_back({next_content++, rng.Tokens(k.system_tokens)});
      zipf += 1.0 / std::pow(double(p + 1), k.system_zipf);
      states[i].zipf_cdf.push_back(zipf);
    }
  }
  const double session_gap_ms = 1000.0 * (turns / weights) / c.request_rate;
  auto next_gap = [&]() {
    if (c.arrival == ArrivalProcess::kPoisson) {
      return rng.Exponential(session_gap_ms);
    }
    const double shape = 1 / (c.arrival_cv * c.arrival_cv);
    return rng.Gamma(shape, session_gap_ms / shape);
  };

  // Sessions are made in order of their start; a request before the next
  // session's start can no longer be preceded by a request yet to be made,
  // so once `requests` of them are settled the trace is complete.
  std::vector<PendingRequest> pending;
  std::priority_queue<double, std::vector<double>, std::greater<>> unsettled;
  size_t settled = 0;
  double start = 0;
  uint64_t order = 0;
  for (bool first = true;; first = false) {
    if (!first) start += next_gap();
    while (!unsettled.empty() && unsettled.top() < start) {
      unsettled.pop();
      ++settled;
    }
    if (settled >= c.requests) break;

    const size_t ci = PickWeighted(class_cdf, rng);
    const SessionClass& k = c.classes[ci];
    std::vector<Segment> prompt;
    uint64_t length = 0;
    if (k.system_prompts > 0) {
      prompt.push_back(
          states[ci].system[PickWeighted(states[ci].zipf_cdf, rng)]);
      length = prompt.back().tokens;
    }
    uint64_t user =
        std::min(rng.Tokens(k.first_user_tokens), c.max_prompt_tokens - length);
    double t = start;
    const double go_on = 1 - 1 / k.mean_turns;
    for (;;) {
      prompt.push_back({next_content++, user});
      length += user;
      const uint64_t output = rng.Tokens(k.output_tokens);
      pending.push_back({t, order++, length, output, prompt});
      unsettled.push(t);
      if (!rng.Bernoulli(go_on)) break;
      user = rng.Tokens(k.user_tokens);
      if (length + output + user > c.max_prompt_tokens) break;
      prompt.push_back({next_content++, output});
      length += output;
      t += double(output) * c.decode_ms_per_token + rng.LogNormal(k.think_ms);
    }
  }

  // Integer ms, as in the published traces; rounding keeps the order.
  for (auto& p : pending) p.time_ms = std::floor(p.time_ms);
  std::sort(pending.begin(), pending.end(),
            [](const PendingRequest& a, const PendingRequest& b) {
              return a.time_ms != b.time_ms ? a.time_ms < b.time_ms
                                            : a.order < b.order;
            });
  pending.resize(std::min(pending.size(), c.requests));

  BlockNamer namer;
  std::vector<TraceRequest> trace;
  trace.reserve(pending.size());
  for (const auto& p : pending) {
    trace.push_back({p.time_ms, p.input, p.output, namer.Name(p.prompt)});
  }
  return trace;
}

Status WriteTrace(const std::vector<TraceRequest>& trace,
                  const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  fmt::format("cannot create {}: {}", path, strerror(errno)));
  }
  std::string line;
  bool ok = true;
  for (const auto& r : trace) {
    line = fmt::format(
        R"({{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": [{}]}})",
        int64_t(std::llround(r.timestamp_ms)), r.input_length, r.output_length,
        fmt::join(r.hash_ids, ", "));
    line += '\n';
    ok = ok && std::fwrite(line.data(), 1, line.size(), f) == line.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  fmt::format("writing {} failed", path));
  }
  return Status::OK();
}

TraceGenStats ComputeTraceGenStats(const std::vector<TraceRequest>& trace,
                                   size_t window_begin, size_t window_end) {
  TraceGenStats st;
  const TraceSummary s = Summarize(trace, 0, trace.size());
  st.requests = s.requests;
  if (st.requests == 0) return st;
  const double n = double(s.requests);
  st.span_s = s.span_ms / 1000;
  st.request_rate = st.span_s > 0 ? n / st.span_s : 0;
  st.mean_blocks = double(s.block_refs) / n;
  st.mean_reused_blocks = double(s.reused_refs) / n;
  st.mean_new_blocks = double(s.block_refs - s.reused_refs) / n;
  st.mean_input_tokens = s.mean_input_tokens;
  st.mean_output_tokens = s.mean_output_tokens;
  st.distinct_blocks = s.distinct_blocks;
  if (window_begin < window_end && trace.size() >= window_end) {
    st.window_distinct_blocks =
        Summarize(trace, window_begin, window_end).distinct_blocks;
  }
  return st;
}

}  // namespace kvpool::replay
