// The presets of `kvpool trace-gen`. Their statistics (docs/replay.md,
// "Trace generator") come from `--stats`; change both together.
#include <fmt/format.h>

#include "replay/trace_gen.h"

namespace kvpool::replay {

namespace {

// Multi-turn conversation shaped like the held-out public conversation
// trace: one system prompt that opens every session, long user turns (pasted
// text and code) and a few turns per session. That trace had ~15 new blocks
// per request; ~8 here keep the replay README's measured 400 requests under
// ~5000 distinct blocks (the all-dram arm holds them all), so this preset
// reuses more than it did.
SessionClass ChatClass() {
  SessionClass k;
  k.name = "chat";
  k.system_prompts = 1;
  k.system_tokens = {1200, 0, 512, 8192};
  k.mean_turns = 2.8;
  k.first_user_tokens = {4000, 0.9, 16, 32768};
  k.user_tokens = {3500, 1.0, 8, 32768};
  k.output_tokens = {350, 0.8, 1, 4096};
  k.think_ms = {25000, 1.0, 2000, 600000};
  return k;
}

// Tool loop: a long prefix of tool definitions shared by many sessions, then
// many short turns (tool call out, tool result in) a second or two apart.
SessionClass AgentClass() {
  SessionClass k;
  k.name = "agent";
  k.system_prompts = 8;
  k.system_zipf = 1.2;
  k.system_tokens = {6000, 0.3, 2048, 16384};
  k.mean_turns = 15;
  k.first_user_tokens = {400, 0.8, 16, 4096};
  k.user_tokens = {300, 1.0, 8, 8192};
  k.output_tokens = {80, 0.6, 4, 1024};
  k.think_ms = {1500, 0.8, 100, 30000};
  return k;
}

// A fresh long document (retrieved passages, an uploaded file) and a
// question, seldom a follow-up: most prompt tokens are new.
SessionClass DocClass() {
  SessionClass k;
  k.name = "long-doc";
  k.system_prompts = 4;
  k.system_zipf = 1.0;
  k.system_tokens = {700, 0.2, 512, 2048};
  k.mean_turns = 1.3;
  k.first_user_tokens = {5000, 0.6, 1024, 32768};
  k.user_tokens = {80, 0.7, 8, 2048};
  k.output_tokens = {300, 0.7, 8, 2048};
  k.think_ms = {20000, 0.8, 2000, 300000};
  return k;
}

TracePreset Make(std::string name, std::string description, double rate,
                 std::vector<SessionClass> classes) {
  TracePreset p{std::move(name), std::move(description), {}};
  p.config.request_rate = rate;
  p.config.classes = std::move(classes);
  return p;
}

}  // namespace

const std::vector<TracePreset>& TracePresets() {
  static const auto* presets = [] {
    auto* v = new std::vector<TracePreset>;
    v->push_back(Make("chat",
                      "multi-turn chat like the held-out conversation trace: "
                      "one shared system prompt, long user turns",
                      4, {ChatClass()}));
    v->push_back(Make("agent",
                      "tool loops: long shared tool prefixes, many short "
                      "turns and outputs (disk-bound)",
                      12, {AgentClass()}));
    v->push_back(Make("long-doc",
                      "a fresh long document per session, rare follow-ups "
                      "(GPU-bound)",
                      3, {DocClass()}));
    TracePreset mix = Make("bursty-mix",
                           "chat, agent and long-doc sessions arriving in "
                           "bursts (gamma inter-arrivals, CV 3)",
                           8, {ChatClass(), AgentClass(), DocClass()});
    mix.config.classes[0].weight = 0.4;
    mix.config.classes[1].weight = 0.1;
    mix.config.classes[2].weight = 0.5;
    mix.config.arrival = ArrivalProcess::kGamma;
    mix.config.arrival_cv = 3;
    v->push_back(std::move(mix));
    return v;
  }();
  return *presets;
}

Result<TraceGenConfig> PresetConfig(const std::string& name) {
  std::string names;
  for (const auto& p : TracePresets()) {
    if (p.name == name) return p.config;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return Status(ErrorCode::INVALID_PARAMS,
                fmt::format("unknown preset '{}' (presets: {})", name, names));
}

}  // namespace kvpool::replay
