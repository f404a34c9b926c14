#include "replay/replay.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "replay/arm.h"
#include "replay/batch_sim.h"
#include "replay/calibrate.h"
#include "replay/disk_cap.h"
#include "replay/report.h"
#include "replay/report_parts.h"
#include "replay/report_windows.h"

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

Result<ReplayOutput> RunReplay(const ReplayOptions& given) {
  ReplayOptions o = given;
  if (o.engines < 1 || o.nodes < 1 || o.block_bytes < 4096 ||
      o.measure_requests == 0 || o.loaders < 1 ||
      o.scheduler.max_num_batched_tokens == 0 ||
      o.scheduler.max_num_seqs == 0 || o.gpu_busy <= 0 || o.gpu_busy >= 1 ||
      o.disk_busy_cap <= 0 || o.disk_busy_cap > 1) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "need engines, nodes, loaders >= 1, block_bytes >= 4 KiB, "
                  "measure >= 1, max_num_batched_tokens and max_num_seqs "
                  ">= 1, 0 < gpu_busy < 1, 0 < disk_busy_cap <= 1");
  }
  if (o.router_kv_events && o.cluster != ClusterKind::kInProcess) {
    // The router reads the bound ports from the in-process master.
    return Status(ErrorCode::INVALID_PARAMS,
                  "--router_kv_events needs the in-process cluster");
  }
  if (o.prefetch_deadline_by_loads &&
      (!o.prefetch_deadline || o.engine != EngineKind::kBatching)) {
    // The serial engine has no loaders, and without deadlines the flag
    // would change nothing: refused rather than silently ignored.
    return Status(ErrorCode::INVALID_PARAMS,
                  "--prefetch_deadline_by_loads needs --prefetch_deadline "
                  "and the batching engine");
  }
  std::vector<ArmSpec> arms;
  std::map<std::string, int> seen;
  for (const auto& name : o.arms) {
    const ArmSpec* a = FindArm(name);
    if (!a) {
      return Status(ErrorCode::INVALID_PARAMS,
                    fmt::format("unknown arm '{}' (off, on-hit, exist, "
                                "router, exist+router, all-dram)",
                                name));
    }
    arms.push_back(*a);
    if (int n = ++seen[name]; n > 1) {
      arms.back().name = fmt::format("{}#{}", name, n);
    }
  }
  auto trace_r = ReadTrace(o.trace_path, o.requests);
  if (!trace_r.ok()) return trace_r.status();
  const std::vector<TraceRequest>& trace = trace_r.value();
  if (trace.size() < 2) {
    return Status(ErrorCode::INVALID_PARAMS, "the trace has < 2 requests");
  }
  if (o.cluster == ClusterKind::kExternal &&
      (arms.size() != 1 || arms[0].all_dram)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "--cluster=external runs one arm per invocation (not "
                  "all-dram), against a cluster started with that arm's "
                  "flags and fresh for it");
  }
  ReplayPlan plan = MakePlan(trace, o.measure_requests);
  if (o.engine == EngineKind::kBatching) {
    BatchScheduler probe(o.scheduler);
    for (size_t i = plan.measure_begin; i < plan.measure_end; ++i) {
      if (probe.TooLarge(trace[i].input_length, trace[i].output_length)) {
        return Status(
            ErrorCode::INVALID_PARAMS,
            fmt::format("request {} needs {} tokens of GPU KV memory, more "
                        "than --gpu_kv_tokens {}",
                        i, trace[i].input_length + trace[i].output_length,
                        o.scheduler.gpu_kv_tokens));
      }
    }
  }
  Progress progress(o.progress);

  // A disk of one speed for the whole run, the calibration included. An
  // external cluster's disks are elsewhere: no cap here can hold them.
  std::unique_ptr<DiskCap> disk_cap;
  CappedTiming timing;
  std::string disk_cap_note = "off (--disk_cap 0)";
  if (o.disk_cap_bytes_per_s > 0 && o.cluster == ClusterKind::kExternal) {
    disk_cap_note = "not applied: --cluster=external (its disks are its own)";
    std::fprintf(stderr, "disk cap %s\n", disk_cap_note.c_str());
  } else if (o.disk_cap_bytes_per_s > 0) {
    if (o.min_step_ms < 0) {
      return Status(ErrorCode::INVALID_PARAMS, "--min_step_ms must be >= 0");
    }
    timing = ChooseCappedTiming(o.hardware, o.block_bytes,
                                o.disk_cap_bytes_per_s, o.min_step_ms);
    auto cap = DiskCap::Apply(o.scratch_dir, timing.disk_bytes_per_s);
    if (!cap.ok()) return cap.status();
    disk_cap = std::move(cap).value();
    disk_cap_note = fmt::format("{:.0f} MB/s read and write on {} ({})",
                                double(timing.disk_bytes_per_s) / 1e6,
                                disk_cap->device(), disk_cap->group());
    std::fprintf(stderr, "disk cap %s\n", disk_cap_note.c_str());
  }

  // Calibrate on the arms' cluster, then derive the model.
  const std::string cal_root =
      fmt::format("{}/kvpool-replay-{}-cal", o.scratch_dir, getpid());
  fs::remove_all(cal_root);
  fs::create_directories(cal_root);
  CalibrationOptions co;
  co.block_bytes = o.block_bytes;
  auto cal_r = Calibrate(MakeClusterOptions(o, cal_root, AllArms()[0]), co,
                         &progress, o.cluster, o.bin_dir, o.external);
  fs::remove_all(cal_root);
  if (!cal_r.ok()) return cal_r.status();
  const Calibration cal = cal_r.value();
  EngineModel model =
      disk_cap
          ? DeriveCappedEngineModel(o.hardware, cal.reads, timing, o.overrides)
          : DeriveEngineModel(o.hardware, cal.reads, o.overrides);
  // Load sizing. Batching: the arrival time scale at which a simulation of
  // the off arm (hits from an unbounded cache, read at the SSD time: the off
  // arm's hits are SSD reads under this method) keeps the GPUs busy
  // `gpu_busy` of the time. Scaling arrivals, not the GPU, keeps the
  // recompute : SSD : DRAM proportions of the modelled hardware.
  std::string time_scale_source = "given";
  double busy_estimate = 0, disk_estimate = 0;
  std::string load_bound;  // "gpu" or "disk" when sized automatically
  SimConfig sim;
  sim.scheduler = o.scheduler;
  sim.loaders = o.loaders;
  sim.step_fixed_ms = model.step_fixed_ms;
  sim.step_ms_per_token = model.step_ms_per_token;
  // Every node's SSD directory is on this machine's one disk, read at the
  // cap's rate when capped (not at the calibration's bursts, which the
  // throttle lets through at the disk's own speed).
  sim.disk_ms_per_block = model.SsdMs();
  // The dispatch the off arm runs under.
  sim.dispatch =
      o.dispatch == "router" ? SimDispatch::kRouter : SimDispatch::kLeastLoaded;
  sim.nodes = o.nodes;
  sim.affinity_weight = o.affinity_weight;
  sim.seed = o.seed;
  std::vector<double> busy_per_engine;
  if (o.time_scale <= 0) {
    if (o.engine == EngineKind::kBatching) {
      LoadSizing l = SizeLoad(trace, plan.measure_begin, plan.measure_end,
                              o.engines, sim, o.gpu_busy, o.disk_busy_cap);
      o.time_scale = l.time_scale;
      busy_estimate = l.gpu_busy;
      disk_estimate = l.disk_busy;
      busy_per_engine = l.gpu_busy_per_engine;
      load_bound = l.bound;
      if (l.bound == "disk") {
        std::fprintf(stderr,
                     "gpu busy target %.2f out of reach: the off arm's SSD "
                     "reads would keep the disk more than %.2f busy first; "
                     "load set by the disk (gpu busy %.2f)\n",
                     o.gpu_busy, o.disk_busy_cap, l.gpu_busy);
      } else if (l.bound == "busiest engine") {
        std::fprintf(stderr,
                     "gpu busy target %.2f out of reach: the %s dispatch "
                     "would load one engine past %.2f first; load set by "
                     "the busiest engine (gpu busy %.2f)\n",
                     o.gpu_busy, o.dispatch.c_str(), kBusiestEngineCap,
                     l.gpu_busy);
      }
      time_scale_source = "auto";
    } else {
      o.time_scale = 1.0;
      time_scale_source = "default";
    }
  }
  if (o.engine == EngineKind::kBatching && time_scale_source == "given") {
    auto reqs = SimRequestsOf(trace, plan.measure_begin, plan.measure_end,
                              o.time_scale, o.engines, o.nodes);
    const double span = (trace[plan.measure_end - 1].timestamp_ms -
                         trace[plan.measure_begin].timestamp_ms) *
                        o.time_scale;
    SimResult sr = Simulate(reqs, o.engines, sim);
    busy_estimate = sr.BusyFraction(0, span);
    disk_estimate = sr.DiskBusyFraction(0, span);
    for (const auto& e : sr.steps) {
      SimResult one;
      one.steps = {e};
      busy_per_engine.push_back(one.BusyFraction(0, span));
    }
  }
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
  std::fprintf(
      stderr,
      "engine model: SSD %.3f ms, DRAM %.3f ms per block (scale %.4f from "
      "%s); "
      "prefill %.2f ms per block (%.1fx SSD, %.1fx DRAM), decode "
      "%.3f ms/token (%s), est. utilisation %.2f; promotion ceiling "
      "%.0f blocks/s per holder\n"
      "engine: %s; time scale %.4f (%s), estimated GPU busy %.2f "
      "(batching target %.2f), disk busy %.2f (cap %.2f); step "
      "%.4f ms + %.6f ms/token\n",
      model.SsdMs(), model.DramMs(), model.scale, model.scale_source.c_str(),
      model.PrefillBlockMs(), model.RecomputeOverSsd(),
      model.RecomputeOverDram(), model.decode_ms_per_token,
      model.decode_source.c_str(), utilisation, cal.promotion_ceiling_per_s,
      EngineKindName(o.engine), o.time_scale, time_scale_source.c_str(),
      busy_estimate, o.gpu_busy, disk_estimate, o.disk_busy_cap,
      model.step_fixed_ms, model.step_ms_per_token);

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
  in.time_scale_source = time_scale_source;
  in.estimated_gpu_busy = busy_estimate;
  in.estimated_disk_busy = disk_estimate;
  in.load_bound = load_bound;
  in.estimated_gpu_busy_per_engine = busy_per_engine;
  in.disk_cap_note = disk_cap_note;
  in.disk_cap_bytes_per_s = disk_cap ? disk_cap->bytes_per_s() : 0;
  in.min_step_ms = disk_cap ? o.min_step_ms : 0;
  in.arms = &results;
  return WriteReplayOutput(o, BuildReport(in));
}

Result<ReplayOutput> WriteReplayOutput(const ReplayOptions& o,
                                       nlohmann::json report) {
  ReplayOutput out;
  out.report = std::move(report);
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
             {"ttft_cdf.svg", "ttft_breakdown.svg", "gpu_busy_cpu.svg",
              "watermark.svg", "window_hist.svg"}) {
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

Result<ReplayOutput> RerenderReplay(const ReplayOptions& o,
                                    const std::string& json_path) {
  std::ifstream f(json_path);
  if (!f) return Status(ErrorCode::FILE_NOT_FOUND, json_path);
  nlohmann::json report = nlohmann::json::parse(f, nullptr, false);
  if (report.is_discarded() || !report.is_object() ||
      !report.contains("arms") || !report["arms"].is_array()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  json_path + " is not a kvpool replay report");
  }
  // A file edited by hand or cut short can still hold an "arms" array:
  // render once before writing anything, so such a file is refused whole.
  try {
    // Comparisons and verdicts by this build's rules, from the arms' data.
    AddComparisons(&report);
    AddWindowBands(&report);
    (void)RenderMarkdown(report);
  } catch (const nlohmann::json::exception& e) {
    return Status(ErrorCode::INVALID_PARAMS,
                  json_path +
                      " is not a replay report this build can "
                      "render: " +
                      e.what());
  }
  return WriteReplayOutput(o, std::move(report));
}

}  // namespace kvpool::replay
