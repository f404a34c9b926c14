#include "tools/replay_cmd.h"

#include <cstdio>

#include "replay/replay.h"
#include "replay/report.h"
#include "tools/flags.h"

namespace kvpool {

namespace {

class ReplayCommandImpl : public ReplayCommand {
 public:
  explicit ReplayCommandImpl(CLI::App& app) {
    using replay::ReplayOptions;
    ReplayOptions& o = opts_;
    cmd_ = app.add_subcommand(
        "replay",
        "replay a request trace through engines, router and store: TTFT, "
        "M0 figures and prefetch fates per arm (off, on-hit, exist, router, "
        "exist+router, all-dram)");
    cmd_->add_option("--trace", o.trace_path,
                     "trace file (JSON lines: timestamp, input_length, "
                     "output_length, hash_ids)")
        ->capture_default_str();
    cmd_->add_option("--requests", o.requests,
                     "requests read from the trace (0 = all); the last "
                     "--measure are measured, the ones before fill the cache")
        ->capture_default_str();
    cmd_->add_option("--measure", o.measure_requests, "requests measured")
        ->capture_default_str();
    cmd_->add_option("--time_scale", o.time_scale,
                     "machine seconds per trace second (0 = auto: batching "
                     "picks it from --gpu_busy, serial takes 1)")
        ->capture_default_str();
    cmd_->add_option("--gpu_busy", o.gpu_busy,
                     "batching: the off arm's GPU busy fraction the automatic "
                     "time scale aims at (estimated by simulation)")
        ->capture_default_str();
    cmd_->add_option("--disk_busy_cap", o.disk_busy_cap,
                     "batching: automatic time scale keeps the off arm's "
                     "simulated disk at most this busy")
        ->capture_default_str();
    AddSizeFlag(*cmd_, "--disk_cap", &o.disk_cap_bytes_per_s,
                "cap per second on reads and on writes of the disk under "
                "--dir, applied by the replay (cgroup; needs root) for a "
                "disk of one speed; the model is scaled from it; 0 = "
                "uncapped, scaled by measured reads (docs/replay.md, Timing)");
    cmd_->add_option("--min_step_ms", o.min_step_ms,
                     "with --disk_cap: the shortest modelled step lasts at "
                     "least this long (ms); the cap is lowered to match")
        ->capture_default_str();
    cmd_->add_option_function<std::string>(
            "--engine",
            [&o](const std::string& v) {
              if (!replay::ParseEngineKind(v, &o.engine)) {
                throw CLI::ValidationError("--engine", "batching or serial");
              }
            },
            "engine model: batching (continuous batching, asynchronous KV "
            "loads; default) or serial (one request at a time)")
        ->default_str("batching");
    cmd_->add_option_function<std::string>(
            "--load_start",
            [&o](const std::string& v) {
              if (!replay::ParseLoadStart(v, &o.scheduler.load_start)) {
                throw CLI::ValidationError("--load_start",
                                           "admission or arrival");
              }
            },
            "batching: a request's KV load starts at admission (vLLM KV "
            "connector) or at arrival (SGLang HiCache L3 prefetch)")
        ->default_str("admission");
    cmd_->add_option("--max_num_batched_tokens",
                     o.scheduler.max_num_batched_tokens,
                     "batching: tokens per forward step (vLLM's name)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd_->add_option("--max_num_seqs", o.scheduler.max_num_seqs,
                     "batching: requests holding GPU KV memory at once")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd_->add_option("--gpu_kv_tokens", o.scheduler.gpu_kv_tokens,
                     "batching: tokens of KV the modelled GPU holds")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd_->add_option_function<std::string>(
            "--cluster",
            [&o](const std::string& v) {
              if (!replay::ParseClusterKind(v, &o.cluster)) {
                throw CLI::ValidationError("--cluster",
                                           "in-process, processes or external");
              }
            },
            "where each arm's store runs: in-process (a LocalCluster), "
            "processes (kvpool-master and kvpool-node, started and stopped "
            "by the replay) or external (a running cluster: --master, "
            "--master_http; one arm per run)")
        ->default_str("in-process");
    cmd_->add_option("--master", o.external.master_address,
                     "--cluster=external: the master's gRPC HOST:PORT");
    cmd_->add_option("--master_http", o.external.master_http,
                     "--cluster=external: the master's HTTP HOST:PORT "
                     "(its --metrics_port)");
    cmd_->add_option("--node_http", o.external.node_http,
                     "--cluster=external: NODE_ID=HOST:PORT of each node's "
                     "HTTP endpoint, for its promotion counters")
        ->delimiter(',');
    cmd_->add_option("--bin_dir", o.bin_dir,
                     "with --cluster=processes: where kvpool-master and "
                     "kvpool-node are (default: next to this binary)");
    cmd_->add_option("--loaders", o.loaders,
                     "batching: KV loads in flight per engine")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd_->add_option("--step_fixed_ms", o.overrides.step_fixed_ms,
                     "batching: override the fixed part of a step (machine "
                     "ms)");
    cmd_->add_option("--step_ms_per_token", o.overrides.step_ms_per_token,
                     "batching: override a step's time per token (machine "
                     "ms)");
    cmd_->add_option("--hw_step_fixed_ms", o.hardware.step_fixed_ms,
                     "modelled fixed part of a forward step (weight read)")
        ->capture_default_str();
    cmd_->add_option("--hw_step_ms_per_token", o.hardware.step_ms_per_token,
                     "modelled step time per token")
        ->capture_default_str();
    AddSizeFlag(*cmd_, "--block_size", &o.block_bytes,
                "bytes per 512-token block");
    cmd_->add_option("--engines", o.engines, "simulated engines")
        ->capture_default_str();
    cmd_->add_option("--nodes", o.nodes, "kvpool nodes of each LocalCluster")
        ->capture_default_str();
    AddSizeFlag(*cmd_, "--dram", &o.dram_per_node, "DRAM per node");
    AddSizeFlag(*cmd_, "--ssd", &o.ssd_per_node, "SSD tier per node");
    AddSizeFlag(*cmd_, "--prefetch_buffer", &o.prefetch_buffer_per_node,
                "prefetch-buffer segment per node, where the build has it");
    cmd_->add_option("--high_watermark", o.high_watermark,
                     "eviction_high_watermark_ratio")
        ->capture_default_str();
    cmd_->add_option("--prefetch_lease_ms", o.prefetch_lease_ms,
                     "prefetch_trigger_lease_ttl_ms (lease at enqueue)")
        ->capture_default_str();
    cmd_->add_option("--prefetch_consumed_lease_ms",
                     o.prefetch_consumed_lease_ms,
                     "prefetch_consumed_lease_ms (0 = off): buffer recycling")
        ->capture_default_str();
    cmd_->add_option("--bound_block_read_ms", o.bound_block_read_ms,
                     "also report the reach bound at this SSD read time per "
                     "block (0 = only the calibrated one and 10x faster)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd_->add_flag("--prefetch_deadline", o.prefetch_deadline,
                   "the router's triggers carry its estimate of the "
                   "engine's read (EDF; too late = expired)");
    cmd_->add_option("--prefetch_deadline_floor_ms",
                     o.prefetch_deadline_floor_ms,
                     "the router's deadline when nothing is queued ahead, "
                     "in modelled ms (the router gets it x the model's "
                     "scale)")
        ->capture_default_str();
    cmd_->add_option("--prefetch_deadline_slack", o.prefetch_deadline_slack,
                     "the router's multiplier on its queue-wait estimate")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd_->add_option("--affinity_weight", o.affinity_weight,
                     "the router's dispatch: an engine costs its requests in "
                     "flight + this x max(1, mean in flight) x the share of "
                     "the prefix held off its host (negative: pure affinity)")
        ->capture_default_str();
    cmd_->add_flag("--prefetch_deadline_by_admissions",
                   o.prefetch_deadline_by_admissions,
                   "the router times the queue ahead by each engine's "
                   "admission rate instead of its completion interval");
    cmd_->add_flag("--prefetch_deadline_by_loads", o.prefetch_deadline_by_loads,
                   "batching engine: engines declare their loaders to the "
                   "router (max_loading), whose deadline then counts loads "
                   "ahead");
    cmd_->add_flag("--router_kv_events", o.router_kv_events,
                   "the master publishes KV events and the router routes "
                   "from the tier map it keeps from them, looking up only "
                   "keys without fresh state (in-process cluster only)");
    cmd_->add_option("--promotion_pull", o.promotion_pull,
                     "holders run the promotion pull thread")
        ->capture_default_str();
    cmd_->add_option("--promotion_read_batch", o.promotion_read_batch,
                     "SSD reads per promotion-worker submission")
        ->capture_default_str();
    AddSizeFlag(*cmd_, "--promotion_inflight_bytes",
                &o.promotion_inflight_bytes,
                "holders' pipelined promotion executor: bytes in flight (0 = "
                "the RFC's sequential worker)");
    AddSizeFlag(*cmd_, "--ssd_read_share_bytes", &o.ssd_read_share_bytes,
                "holders: bytes a get's SSD read may keep for a queued "
                "promotion of the same key (0 = off)");
    cmd_->add_option("--promotion_yield_to_gets_ms",
                     o.promotion_yield_to_gets_ms,
                     "holders: while a get reads the SSD, a promotion waits "
                     "up to this long before submitting its reads (0 = off)")
        ->capture_default_str();
    cmd_->add_option("--promotion_workers", o.promotion_workers,
                     "pipelined promotion executor: workers per holder")
        ->capture_default_str();
    cmd_->add_option("--promotion_skip_after_get_ms",
                     o.promotion_skip_after_get_ms,
                     "holders drop a prefetch promotion whose block a get "
                     "read from the disk within this many ms (0 = off)")
        ->capture_default_str();
    cmd_->add_option("--prefetch_profile", o.prefetch_profile,
                     "holders' prefetch_profile: default, or rfc (the seeds' "
                     "holder: no shared reads, no skip after a get, one "
                     "sequential worker)")
        ->capture_default_str()
        ->check(CLI::IsMember({"default", "rfc"}));
    cmd_->add_option("--promotion_drop_unreachable",
                     o.promotion_drop_unreachable,
                     "holders drop a task unread when it could not land "
                     "before its deadline")
        ->capture_default_str();
    cmd_->add_option("--lease_ms", o.lease_ms, "default_kv_lease_ttl")
        ->capture_default_str();
    cmd_->add_option("--overflow", o.overflow_ratio,
                     "filler written after the fill, in units of pool DRAM")
        ->capture_default_str();
    cmd_->add_option("--ssd_only_share", o.ssd_only_share,
                     "DRAM pressure: share of the fill blocks left SSD-only "
                     "after the overflow; a seeded 1 - share of them is put "
                     "again into DRAM (1 = none; all-dram ignores it; the "
                     "report's fill_blocks_at_measure_start is the measured "
                     "share)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    cmd_->add_option("--arms", o.arms, "arms to run, in order")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--dispatch", o.dispatch,
                     "router (every arm through kvpool::Router) or "
                     "least-loaded (the non-router arms)")
        ->capture_default_str();
    cmd_->add_option(
            "--seed", o.seed,
            "tie-breaks of least-loaded dispatch; the --ssd_only_share choice")
        ->capture_default_str();
    cmd_->add_option("--utilisation", o.utilisation,
                     "serial: engine utilisation the automatic decode time "
                     "aims at")
        ->capture_default_str();
    cmd_->add_option("--prefill_fixed_ms", o.overrides.prefill_fixed_ms,
                     "override a of prefill = a + b x tokens (machine ms)");
    cmd_->add_option("--prefill_ms_per_token", o.overrides.prefill_ms_per_token,
                     "override b (machine ms per token)");
    cmd_->add_option("--decode_ms_per_token", o.overrides.decode_ms_per_token,
                     "override the decode time per output token (machine ms; "
                     "default: auto, see --utilisation)");
    cmd_->add_option("--hw_ssd_read_ms", o.hardware.ssd_read_ms,
                     "modelled SSD read of one 512-token block")
        ->capture_default_str();
    cmd_->add_option("--hw_dram_read_ms", o.hardware.dram_read_ms,
                     "modelled DRAM read of one block")
        ->capture_default_str();
    cmd_->add_option("--hw_prefill_fixed_ms", o.hardware.prefill_fixed_ms,
                     "modelled prefill fixed part")
        ->capture_default_str();
    cmd_->add_option("--hw_prefill_ms_per_token",
                     o.hardware.prefill_ms_per_token,
                     "modelled prefill per token")
        ->capture_default_str();
    cmd_->add_option("--hw_decode_ms_per_token", o.hardware.decode_ms_per_token,
                     "modelled decode per token")
        ->capture_default_str();
    cmd_->add_option("--hw_name", o.hardware.name, "modelled hardware");
    cmd_->add_option("--dir", o.scratch_dir, "scratch directory (SSD files)")
        ->capture_default_str();
    cmd_->add_option("--out", o.out_dir,
                     "report directory (replay.md, replay.json, plots)")
        ->capture_default_str();
    cmd_->add_option("--json", o.json_path,
                     "JSON results here (default <out>/replay.json)");
    cmd_->add_flag("!--no_plots", o.plots, "skip the plots");
    cmd_->add_option("--python", o.python, "python with matplotlib")
        ->capture_default_str();
    cmd_->add_option("--plot_script", o.plot_script,
                     "scripts/plot_replay.py (found automatically)");
    cmd_->add_flag("!--no_progress", o.progress, "no progress line");
    cmd_->add_option("--from_json", from_json_,
                     "run nothing: render this earlier report.json again "
                     "into --out (replay.md, plots) with this build's report");
  }

  bool chosen() const override { return cmd_->parsed(); }

  int Run() override {
    auto r = from_json_.empty() ? replay::RunReplay(opts_)
                                : replay::RerenderReplay(opts_, from_json_);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
      return 2;
    }
    const auto& rep = r->report;
    std::printf("\nkvpool replay: %s\n", opts_.trace_path.c_str());
    std::printf("%s", replay::RenderTable(rep).c_str());
    std::printf(
        "ttft in ms (waiting + KV load + prefill); dram_rd / "
        "ssd_rd = blocks read per tier; ssd>dram = blocks SSD-only when "
        "routed that their get read from DRAM.\n");
    if (rep.contains("targets")) {
      const auto& t = rep["targets"];
      std::printf(
          "router arm: %.1f%% of SSD-only blocks read from DRAM (target "
          ">= 90%%); TTFT p50 %+.1f%% vs off (target <= -50%%)\n",
          100 * t["ssd_only_read_from_dram"].get<double>(),
          -100 * t["ttft_p50_cut_vs_off"].get<double>());
    }
    std::printf("report: %s, %s\n", r->markdown_path.c_str(),
                r->json_path.c_str());
    for (const auto& p : r->plots) std::printf("plot: %s\n", p.c_str());
    if (!r->plot_note.empty()) std::printf("%s\n", r->plot_note.c_str());
    bool failed_arm = false;
    for (const auto& a : rep["arms"]) failed_arm |= !a["ok"].get<bool>();
    return failed_arm ? 1 : 0;
  }

 private:
  CLI::App* cmd_;
  replay::ReplayOptions opts_;
  std::string from_json_;
};

}  // namespace

std::unique_ptr<ReplayCommand> AddReplayCommand(CLI::App& app) {
  return std::make_unique<ReplayCommandImpl>(app);
}

}  // namespace kvpool
