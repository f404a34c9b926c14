#include "replay/replay.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "replay/arm.h"
#include "replay/calibrate.h"
#include "replay/report.h"

namespace kvpool::replay {

namespace {

namespace fs = std::filesystem;

// scripts/plot_replay.py: given, or found from the working directory or
// from the binary's place in a build tree (<repo>/build/bin/kvpool).
std::string FindPlotScript(const std::string& given) {
  if (!given.empty()) return given;
  std::vector<fs::path> candidates = {"scripts/plot_replay.py"};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path();
         p = p.parent_path()) {
      candidates.push_back(p / "scripts/plot_replay.py");
    }
  }
  for (const auto& c : candidates) {
    if (fs::exists(c, ec)) return fs::absolute(c, ec).string();
  }
  return "";
}

std::string Quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

}  // namespace

Result<ReplayOutput> RunReplay(const ReplayOptions& o) {
  if (o.engines < 1 || o.nodes < 1 || o.block_bytes < 4096 ||
      o.time_scale <= 0 || o.measure_requests == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "need engines, nodes >= 1, block_bytes >= 4 KiB, "
                  "time_scale > 0, measure >= 1");
  }
  std::vector<ArmSpec> arms;
  for (const auto& name : o.arms) {
    const ArmSpec* a = FindArm(name);
    if (!a) {
      return Status(ErrorCode::INVALID_PARAMS,
                    fmt::format("unknown arm '{}' (off, on-hit, exist, "
                                "router, exist+router)",
                                name));
    }
    arms.push_back(*a);
  }
  auto trace_r = ReadTrace(o.trace_path, o.requests);
  if (!trace_r.ok()) return trace_r.status();
  const std::vector<TraceRequest>& trace = trace_r.value();
  if (trace.size() < 2) {
    return Status(ErrorCode::INVALID_PARAMS, "the trace has < 2 requests");
  }
  ReplayPlan plan = MakePlan(trace, o.measure_requests);
  Progress progress(o.progress);

  // Calibrate on the arms' cluster, then derive the model.
  const std::string cal_root =
      fmt::format("{}/kvpool-replay-{}-cal", o.scratch_dir, getpid());
  fs::remove_all(cal_root);
  fs::create_directories(cal_root);
  CalibrationOptions co;
  co.block_bytes = o.block_bytes;
  auto cal_r =
      Calibrate(MakeClusterOptions(o, cal_root, AllArms()[0]), co, &progress);
  fs::remove_all(cal_root);
  if (!cal_r.ok()) return cal_r.status();
  const Calibration cal = cal_r.value();
  EngineModel model = DeriveEngineModel(o.hardware, cal.reads, o.overrides);
  LoadEstimate load = EstimateLoad(trace, plan.measure_begin, plan.measure_end,
                                   o.time_scale, model);
  if (o.overrides.decode_ms_per_token < 0) {
    model.decode_ms_per_token =
        DecodeMsPerTokenFor(o.utilisation, o.engines, load);
    model.decode_source = "auto";
  }
  const double utilisation =
      load.arrival_rate_per_s *
      (load.mean_service_ms +
       load.mean_output_tokens * model.decode_ms_per_token) /
      1000 / double(o.engines);
  std::fprintf(stderr,
               "engine model: SSD %.3f ms, DRAM %.3f ms per block measured; "
               "prefill %.2f ms per block (%.1fx SSD, %.1fx DRAM), decode "
               "%.3f ms/token (%s), est. utilisation %.2f; promotion ceiling "
               "%.0f blocks/s per holder\n",
               model.measured.ssd_ms, model.measured.dram_ms,
               model.PrefillBlockMs(), model.RecomputeOverSsd(),
               model.RecomputeOverDram(), model.decode_ms_per_token,
               model.decode_source.c_str(), utilisation,
               cal.promotion_ceiling_per_s);

  std::vector<ArmResult> results;
  for (size_t i = 0; i < arms.size(); ++i) {
    results.push_back(RunArm(o, plan, arms[i], model, int(i + 1),
                             int(arms.size()), &progress));
    if (!results.back().status.ok()) {
      std::fprintf(stderr, "arm %s: %s\n", arms[i].name.c_str(),
                   results.back().status.ToString().c_str());
    }
  }

  ReportInput in;
  in.options = &o;
  in.plan = &plan;
  in.calibration = &cal;
  in.model = &model;
  in.estimated_utilisation = utilisation;
  in.arms = &results;
  ReplayOutput out;
  out.report = BuildReport(in);

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  out.json_path = o.json_path.empty()
                      ? (fs::path(o.out_dir) / "replay.json").string()
                      : o.json_path;
  out.markdown_path = (fs::path(o.out_dir) / "replay.md").string();
  {
    std::ofstream f(out.json_path);
    f << out.report.dump(1) << "\n";
    if (!f) {
      return Status(ErrorCode::FILE_WRITE_FAIL, out.json_path);
    }
  }
  std::string md = RenderMarkdown(out.report);
  if (o.plots) {
    std::string script = FindPlotScript(o.plot_script);
    if (script.empty()) {
      out.plot_note = "no plots: scripts/plot_replay.py not found";
    } else {
      std::string cmd =
          fmt::format("{} {} {} {}", Quote(o.python), Quote(script),
                      Quote(out.json_path), Quote(o.out_dir));
      int rc = std::system(cmd.c_str());
      if (rc != 0) {
        out.plot_note = fmt::format(
            "no plots: `{}` failed (exit {}); install python3-matplotlib", cmd,
            WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
      } else {
        for (const char* f :
             {"ttft_cdf.svg", "watermark.svg", "window_hist.svg"}) {
          fs::path p = fs::path(o.out_dir) / f;
          if (fs::exists(p, ec)) out.plots.push_back(p.string());
        }
      }
    }
  } else {
    out.plot_note = "plots off (--no_plots)";
  }
  if (!out.plots.empty()) {
    md += "\n## Plots\n\n";
    for (const auto& p : out.plots) {
      std::string name = fs::path(p).filename().string();
      md += fmt::format("![{}]({})\n", name, name);
    }
  } else if (!out.plot_note.empty()) {
    md += "\n" + out.plot_note + "\n";
  }
  {
    std::ofstream f(out.markdown_path);
    f << md;
  }
  return out;
}

}  // namespace kvpool::replay
