#include "replay/report_model.h"

#include <fmt/format.h>

#include "common/size_parse.h"
#include "replay/calibrate.h"
#include "replay/json_util.h"
#include "replay/options.h"

namespace kvpool::replay {

using nlohmann::json;

json EngineModelJson(const ReportInput& in) {
  const ReplayOptions& o = *in.options;
  const EngineModel& m = *in.model;
  const HardwareModel& hw = m.hw;
  json j = {
      {"hardware",
       {{"name", hw.name},
        {"block_mib", hw.block_mib},
        {"ssd_read_ms", hw.ssd_read_ms},
        {"dram_read_ms", hw.dram_read_ms},
        {"prefill_fixed_ms", hw.prefill_fixed_ms},
        {"prefill_ms_per_token", Round(hw.prefill_ms_per_token, 5)},
        {"prefill_block_ms", Round(hw.prefill_block_ms())},
        {"decode_ms_per_token", hw.decode_ms_per_token},
        {"step_fixed_ms", hw.step_fixed_ms},
        {"step_ms_per_token", Round(hw.step_ms_per_token, 5)},
        {"recompute_over_ssd", Round(hw.prefill_block_ms() / hw.ssd_read_ms)},
        {"recompute_over_dram",
         Round(hw.prefill_block_ms() / hw.dram_read_ms)}}},
      {"measured",
       {{"ssd_ms_per_block", Round(m.measured.ssd_ms, 4)},
        {"dram_ms_per_block", Round(m.measured.dram_ms, 4)},
        {"batch", m.measured.batch},
        {"samples", m.measured.samples}}},
      {"scale", Round(m.scale, 5)},
      {"scale_source", m.scale_source},
      {"ssd_ms_per_block", Round(m.SsdMs(), 4)},
      {"h2d_ms_per_block", Round(m.h2d_ms_per_block, 4)},
      {"disk_cap", in.disk_cap_note},
      {"disk_cap_bytes_per_s", in.disk_cap_bytes_per_s},
      {"min_step_ms", in.min_step_ms},
      {"prefetch_deadline_floor_machine_ms",
       ScaledMs(o.prefetch_deadline_floor_ms, m.scale)},
      {"prefill_fixed_ms", Round(m.prefill_fixed_ms, 4)},
      {"prefill_ms_per_token", Round(m.prefill_ms_per_token, 6)},
      {"prefill_block_ms", Round(m.PrefillBlockMs(), 4)},
      {"prefill_source", m.prefill_source},
      {"decode_ms_per_token", Round(m.decode_ms_per_token, 4)},
      {"decode_source", m.decode_source},
      {"step_fixed_ms", Round(m.step_fixed_ms, 5)},
      {"step_ms_per_token", Round(m.step_ms_per_token, 7)},
      {"step_source", m.step_source},
      {"gpu_busy_target", o.gpu_busy},
      {"estimated_gpu_busy_off", Round(in.estimated_gpu_busy)},
      {"estimated_gpu_busy_off_per_engine",
       [&] {
         json v = json::array();
         for (double b : in.estimated_gpu_busy_per_engine)
           v.push_back(Round(b));
         return v;
       }()},
      {"dispatch_modelled", o.dispatch},
      {"disk_busy_cap", o.disk_busy_cap},
      {"estimated_disk_busy_off", Round(in.estimated_disk_busy)},
      {"load_bound", in.load_bound},
      {"utilisation_target", o.utilisation},
      {"estimated_utilisation_off", Round(in.estimated_utilisation)},
      {"recompute_over_ssd", Round(m.RecomputeOverSsd())},
      {"recompute_over_dram", Round(m.RecomputeOverDram())}};
  return j;
}

std::string RenderEngineModelMarkdown(const json& r) {
  const auto& s = r["setup"];
  const auto& em = r["engine_model"];
  const auto& hw = em["hardware"];
  const auto& cal = r["calibration"];
  std::string md;
  md += "## Engine model\n\n";
  md += fmt::format(
      "Modelled hardware: {}. Per 512-token block ({} MiB of KV): SSD read "
      "{} ms, DRAM read {} ms, recompute {:.1f} ms (= {:.1f} x SSD, {:.1f} x "
      "DRAM); prefill = {} ms + {:.4f} ms/token; decode {} ms/token.\n\n",
      hw["name"].get<std::string>(), Num(hw, "block_mib"),
      Num(hw, "ssd_read_ms"), Num(hw, "dram_read_ms"),
      Num(hw, "prefill_block_ms"), Num(hw, "recompute_over_ssd"),
      Num(hw, "recompute_over_dram"), Num(hw, "prefill_fixed_ms"),
      Num(hw, "prefill_ms_per_token"), Num(hw, "decode_ms_per_token"));
  md += "| | value |\n|---|---|\n";
  md += fmt::format(
      "| measured SSD read per block (batch of {}, median of {}) | {:.4f} ms "
      "|\n",
      em["measured"]["batch"].get<int>(), em["measured"]["samples"].get<int>(),
      Num(em["measured"], "ssd_ms_per_block"));
  md += fmt::format("| measured DRAM read per block | {:.4f} ms |\n",
                    Num(em["measured"], "dram_ms_per_block"));
  md += fmt::format(
      "| scale (machine ms per modelled ms; from {}) | {:.5f} |\n",
      em.value("scale_source", std::string("measured reads: geometric mean "
                                           "of both")),
      Num(em, "scale"));
  md += fmt::format("| disk cap | {} |\n",
                    em.value("disk_cap", std::string("none")));
  if (Num(em, "h2d_ms_per_block") > 0) {
    md += fmt::format(
        "| SSD read per block at the cap / modelled host-to-GPU copy per "
        "block | {:.4f} ms / {:.4f} ms |\n",
        Num(em, "ssd_ms_per_block"), Num(em, "h2d_ms_per_block"));
  }
  md += fmt::format(
      "| derived prefill per block ({}) | {:.3f} ms (= {:.2f} x SSD, {:.2f} x "
      "DRAM, as this run reads them) |\n",
      em["prefill_source"].get<std::string>(), Num(em, "prefill_block_ms"),
      Num(em, "recompute_over_ssd"), Num(em, "recompute_over_dram"));
  md += fmt::format("| prefill fixed part | {:.3f} ms |\n",
                    Num(em, "prefill_fixed_ms"));
  md += fmt::format(
      "| decode per output token ({}) | {:.4f} ms (off-arm utilisation "
      "estimate {:.2f}, target {:.2f}) |\n",
      em["decode_source"].get<std::string>(), Num(em, "decode_ms_per_token"),
      Num(em, "estimated_utilisation_off"), Num(em, "utilisation_target"));
  md += fmt::format(
      "| promotion ceiling of one holder (single worker, {} blocks at once) "
      "| {:.0f} blocks/s |\n",
      cal["ceiling_keys"].get<int>(), Num(cal, "promotion_ceiling_per_s"));
  md += fmt::format(
      "| DRAM read per block of those blocks once promoted | {:.4f} ms "
      "({} of the bytes over shared memory, {} over TCP) |\n\n",
      Num(cal, "promoted_dram_ms_per_block"),
      FormatSize(cal["promoted_shm_bytes"].get<uint64_t>()),
      FormatSize(cal["promoted_tcp_bytes"].get<uint64_t>()));

  if (s.contains("engine") && s["engine"] == "batching") {
    md += fmt::format(
        "Engine: batching (continuous batching, asynchronous KV loads "
        "starting at {}): a forward step over T tokens takes {} ms + {:.4f} "
        "ms x T on the modelled GPU ({:.4f} ms + {:.6f} ms x T here, source "
        "{}); max_num_batched_tokens {}, max_num_seqs {}, GPU KV {} tokens, "
        "{} loaders per engine. Time scale {:.4g} ({}{}; estimated off-arm "
        "GPU busy {:.2f}, target {:.2f}; disk busy {:.2f}, cap {:.2f}).\n\n",
        s["load_start"].get<std::string>(), Num(hw, "step_fixed_ms"),
        Num(hw, "step_ms_per_token"), Num(em, "step_fixed_ms"),
        Num(em, "step_ms_per_token"), em["step_source"].get<std::string>(),
        s["max_num_batched_tokens"].get<uint64_t>(),
        s["max_num_seqs"].get<uint64_t>(), s["gpu_kv_tokens"].get<uint64_t>(),
        s["loaders"].get<int>(), Num(s, "time_scale"),
        s["time_scale_source"].get<std::string>(),
        em.value("load_bound", std::string()) == "disk"
            ? ", set by the disk cap: the GPU target is out of reach"
        : em.value("load_bound", std::string()) == "busiest engine"
            ? ", set by the busiest engine under the arms' dispatch: the "
              "GPU target is out of reach"
        : em.value("load_bound", std::string()) == "gpu"
            ? ", set by the GPU target"
            : "",
        Num(em, "estimated_gpu_busy_off"), Num(em, "gpu_busy_target"),
        Num(em, "estimated_disk_busy_off"), Num(em, "disk_busy_cap"));
  } else if (s.contains("engine")) {
    md +=
        "Engine: serial (one request at a time per engine, decode "
        "included).\n\n";
  }
  return md;
}

}  // namespace kvpool::replay
