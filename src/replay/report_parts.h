// The parts of the replay report that judge an engine model's result: the
// TTFT breakdown (waiting, KV load, prefill), the GPU busy fraction, the CPU
// the arm used, how much of the off -> all-dram gap each arm closes, and the
// spread of repeated off arms. Used by report.cc.
#ifndef KVPOOL_REPLAY_REPORT_PARTS_H_
#define KVPOOL_REPLAY_REPORT_PARTS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "replay/arm.h"

namespace kvpool::replay {

// An arm is flagged contended when the process, or the machine as a whole
// (/proc/stat: other work on it counts), used more than this share of wall
// time x cores during its measurement.
inline constexpr double kCpuContended = 0.85;

// An arm's verdict against off: its TTFT p50 must leave the off runs'
// range widened on each side by that range, and by at least this share of
// the off runs' median (report_parts.cc, AddComparisons).
inline constexpr double kVerdictMinMargin = 0.02;

// Per arm: ttft_parts_ms, kv_load_share, gpu_busy, engine_steps, cpu.
nlohmann::json ArmPartsJson(const ArmResult& a);

// Adds, per arm, gap_closed (against the first off and all-dram arms) and,
// at the top, off_spread (the off arms' TTFT p50 over their repeats).
void AddComparisons(nlohmann::json* report);

// Markdown sections for the above.
std::string RenderPartsMarkdown(const nlohmann::json& report);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_PARTS_H_
