#include "tools/scale_sim_cmd.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/svg_chart.h"
#include "replay/trace.h"
#include "scale_sim/cost_model.h"
#include "scale_sim/report.h"
#include "scale_sim/simulator.h"
#include "scale_sim/workload.h"

namespace kvpool {

namespace {

using scale_sim::Op;
using scale_sim::Routing;
using scale_sim::ScenarioResult;

class ScaleSimCommandImpl : public ScaleSimCommand {
 public:
  explicit ScaleSimCommandImpl(CLI::App& app) {
    cmd_ = app.add_subcommand(
        "scale-sim",
        "simulate the metadata plane over N master shards (docs/scale.md): "
        "lookup latency, hot-shard skew, memory and failover per shard, and "
        "where sharding pays");
    cmd_->add_option("--trace", trace_,
                     "request trace (JSON lines: timestamp, hash_ids; "
                     "shared/traces or `kvpool trace-gen`)")
        ->capture_default_str();
    cmd_->add_option("--costs", costs_,
                     "per-operation cost file (docs/scale.md, 'The cost "
                     "file')")
        ->capture_default_str();
    cmd_->add_option("--shards", shards_, "shard counts to compare")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--rates", rates_, "request rates (requests/s)")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--routing", routings_,
                     "key (hash of each key) and/or prefix (hash tag: the "
                     "request's first block)")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--tag_depth", tag_depth_,
                     "prefix routing: tag with the request's block at this "
                     "depth; the blocks before it route by their own key "
                     "(0 = the first block)")
        ->capture_default_str();
    cmd_->add_option("--ops", ops_, "calls a request makes: lookup, get, put")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--requests", requests_, "requests sampled per run")
        ->capture_default_str();
    cmd_->add_option("--seed", seed_, "random seed")->capture_default_str();
    cmd_->add_option("--objects", objects_, "objects in the pool")
        ->capture_default_str();
    cmd_->add_option("--global_block_refs", global_min_refs_,
                     "blocks held by at least this many requests of the "
                     "trace (shared system prompts) are one key in every "
                     "copy of the trace (0 = none)")
        ->capture_default_str();
    cmd_->add_option("--nodes", nodes_, "nodes in the pool")
        ->capture_default_str();
    cmd_->add_option("--node_layout", layout_,
                     "all (every node heartbeats to every shard) or group "
                     "(a group of nodes per shard)")
        ->capture_default_str();
    cmd_->add_option("--max_util", limits_.max_util,
                     "limit: busiest shard's offered load")
        ->capture_default_str();
    cmd_->add_option("--max_p99_ms", limits_.max_p99_ms,
                     "limit: p99 of the router's lookup (ms)")
        ->capture_default_str();
    cmd_->add_option("--max_failover_s", limits_.max_failover_s,
                     "limit: one shard's failover until all served (s)")
        ->capture_default_str();
    cmd_->add_option("--max_shard_gib", limits_.max_shard_gib,
                     "limit: one shard's object table (GiB)")
        ->capture_default_str();
    cmd_->add_option("--out_dir", out_dir_,
                     "writes scale_sim.json, scale_sim.md and the SVGs here")
        ->capture_default_str();
    cmd_->add_option("--what_if_call_scale", call_scale_,
                     "what-if: multiply every call_us and heartbeat_us of "
                     "the cost file (e.g. 0.1 for a master whose per-call "
                     "cost is a tenth of the measured one)")
        ->capture_default_str();
    cmd_->add_option("--what_if_threads", threads_override_,
                     "what-if: service threads per master instead of the "
                     "cost file's (0 = the file's)")
        ->capture_default_str();
    cmd_->add_flag("--quiet", quiet_, "no progress lines on stderr");
  }

  bool chosen() const override { return cmd_->parsed(); }

  int Run() override {
    scale_sim::ScenarioConfig base;
    if (auto s = ParseConfig(&base); !s.empty()) return Usage(s);
    auto costs = scale_sim::LoadCostModel(costs_);
    if (!costs.ok()) return Usage(costs.status().message());
    if (!(call_scale_ > 0) || threads_override_ < 0) {
      return Usage("--what_if_call_scale > 0, --what_if_threads >= 0");
    }
    for (auto& op : costs->ops) op.call_us *= call_scale_;
    costs->heartbeat_us *= call_scale_;
    if (threads_override_ > 0) costs->service_threads = threads_override_;
    if (auto s = costs->Validate(); !s.ok()) return Usage(s.message());
    auto trace = replay::ReadTrace(trace_);
    if (!trace.ok()) return Usage(trace.status().message());
    std::vector<scale_sim::TraceEntry> entries;
    entries.reserve(trace->size());
    for (auto& r : trace.value()) {
      entries.push_back({r.timestamp_ms, std::move(r.hash_ids)});
    }
    auto workload =
        scale_sim::Workload::Create(std::move(entries), global_min_refs_);
    if (!workload.ok()) return Usage(workload.status().message());

    std::vector<ScenarioResult> runs;
    const size_t total = routing_.size() * shards_.size() * rates_.size();
    const auto t0 = std::chrono::steady_clock::now();
    for (Routing routing : routing_) {
      for (int shards : shards_) {
        for (double rate : rates_) {
          auto c = base;
          c.routing = routing;
          c.shards = shards;
          c.rate = rate;
          runs.push_back(scale_sim::RunScenario(*workload, *costs, c));
          Progress(runs.back(), runs.size(), total, t0);
        }
      }
    }
    const auto capacity = scale_sim::ComputeCapacity(runs, *costs, limits_);
    return Write(runs, capacity, *costs);
  }

 private:
  static int Usage(const std::string& message) {
    std::fprintf(stderr, "scale-sim: %s\n", message.c_str());
    return 2;
  }

  // Empty, or what is wrong with the command line.
  std::string ParseConfig(scale_sim::ScenarioConfig* c) {
    if (shards_.empty() || rates_.empty())
      return "--shards and --rates: at least one";
    for (int s : shards_) {
      if (s < 1 || s > 1024) return "--shards: each in [1, 1024]";
    }
    for (double r : rates_) {
      if (!(r > 0) || r > 1e8) return "--rates: each in (0, 1e8]";
    }
    routing_.clear();
    for (const auto& r : routings_) {
      if (r == "key") {
        routing_.push_back(Routing::kKey);
      } else if (r == "prefix") {
        routing_.push_back(Routing::kPrefix);
      } else {
        return "--routing: key or prefix, not " + r;
      }
    }
    if (routing_.empty()) return "--routing: at least one";
    c->enabled = {false, false, false};
    for (const auto& o : ops_) {
      bool found = false;
      for (int i = 0; i < scale_sim::kOpCount; ++i) {
        if (o == scale_sim::OpName(static_cast<Op>(i))) {
          c->enabled[i] = found = true;
        }
      }
      if (!found) return "--ops: lookup, get or put, not " + o;
    }
    if (!c->enabled[int(Op::kLookup)]) return "--ops must include lookup";
    if (requests_ < 100 || requests_ > 10'000'000) {
      return "--requests: in [100, 1e7]";
    }
    if (!(objects_ >= 1) || nodes_ < 0) return "--objects >= 1, --nodes >= 0";
    if (layout_ == "all") {
      c->layout = scale_sim::NodeLayout::kAll;
    } else if (layout_ == "group") {
      c->layout = scale_sim::NodeLayout::kGroup;
    } else {
      return "--node_layout: all or group";
    }
    if (!(limits_.max_util > 0) || !(limits_.max_p99_ms > 0) ||
        !(limits_.max_failover_s > 0) || !(limits_.max_shard_gib > 0)) {
      return "the --max_* limits must be > 0";
    }
    c->tag_depth = tag_depth_;
    c->requests = requests_;
    c->seed = seed_;
    c->objects = objects_;
    c->nodes = nodes_;
    return "";
  }

  void Progress(const ScenarioResult& r, size_t done, size_t total,
                std::chrono::steady_clock::time_point t0) const {
    if (quiet_) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    const auto& p = r.latency_ms[int(Op::kLookup)];
    std::fprintf(stderr,
                 "[%zu/%zu %.1fs] routing=%s shards=%d rate=%.0f: busiest "
                 "util %.2f%s, skew %.2f, lookup p99 %.2f ms\n",
                 done, total, s, scale_sim::RoutingName(r.config.routing),
                 r.config.shards, r.config.rate, r.max_util,
                 r.saturated() ? " (saturated)" : "", r.skew, p.p99);
  }

  int Write(const std::vector<ScenarioResult>& runs,
            const std::vector<scale_sim::Capacity>& capacity,
            const scale_sim::CostModel& costs) const {
    std::error_code ec;
    std::filesystem::create_directories(out_dir_, ec);
    auto json = scale_sim::ToJson(runs, capacity, limits_);
    json["command"] = {{"trace", trace_},
                       {"costs", costs_},
                       {"requests", requests_},
                       {"seed", seed_},
                       {"objects", objects_},
                       {"nodes", nodes_},
                       {"node_layout", layout_},
                       {"ops", ops_},
                       {"what_if_call_scale", call_scale_},
                       {"what_if_threads", threads_override_},
                       {"global_block_refs", global_min_refs_},
                       {"tag_depth", tag_depth_}};
    json["service_threads"] = costs.service_threads;
    const std::string md =
        "## Where sharding pays\n\n" +
        scale_sim::VerdictMarkdown(capacity, limits_, objects_) + "\n" +
        scale_sim::CapacityMarkdown(capacity, limits_) + "\n## Runs\n\n" +
        scale_sim::RunsMarkdown(runs);
    if (!WriteText(out_dir_ + "/scale_sim.json", json.dump(1) + "\n") ||
        !WriteText(out_dir_ + "/scale_sim.md", md)) {
      return 1;
    }
    for (Routing routing : routing_) {
      if (!WriteCharts(runs, routing)) return 1;
    }
    std::printf("%s", md.c_str());
    return 0;
  }

  // Lookup p99 and the busiest shard's load against log10(rate), one line
  // per shard count. Saturated points are drawn at the chart's ceiling.
  bool WriteCharts(const std::vector<ScenarioResult>& runs,
                   Routing routing) const {
    const double ceiling = 4 * limits_.max_p99_ms;
    std::map<int, bench::LineSeries> p99, util;
    for (const auto& r : runs) {
      if (r.config.routing != routing) continue;
      const int n = r.config.shards;
      p99[n].name = util[n].name =
          fmt::format("{} shard{}", n, n > 1 ? "s" : "");
      const double x = std::log10(r.config.rate);
      const double y =
          r.saturated() ? ceiling
                        : std::min(ceiling, r.latency_ms[int(Op::kLookup)].p99);
      p99[n].points.emplace_back(x, y);
      util[n].points.emplace_back(x, std::min(r.max_util, 2.0));
    }
    auto values = [](std::map<int, bench::LineSeries>& m) {
      std::vector<bench::LineSeries> v;
      for (auto& [n, s] : m) v.push_back(std::move(s));
      return v;
    };
    const std::string name = scale_sim::RoutingName(routing);
    return bench::WriteFile(
               out_dir_ + "/scale_sim_p99_" + name + ".svg",
               bench::LineChartSvg(
                   fmt::format("router lookup p99 by shard count, routing by "
                               "{} (saturated or above: drawn at {:.0f} ms)",
                               name, ceiling),
                   "log10 requests/s", "p99 ms", values(p99))) &&
           bench::WriteFile(
               out_dir_ + "/scale_sim_util_" + name + ".svg",
               bench::LineChartSvg(
                   fmt::format("busiest shard's offered load, routing by {} "
                               "(>= 1: saturated; capped at 2)",
                               name),
                   "log10 requests/s", "utilisation", values(util)));
  }

  static bool WriteText(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) {
      std::fprintf(stderr, "scale-sim: cannot write %s\n", path.c_str());
      return false;
    }
    return true;
  }

  CLI::App* cmd_ = nullptr;
  std::string trace_ = "../shared/traces/synthetic_trace.jsonl";
  std::string costs_ = KVPOOL_SCALE_SIM_DEFAULT_COSTS;
  std::vector<int> shards_ = {1, 2, 4, 8, 16};
  std::vector<double> rates_ = {100,  200,   500,   1000,  2000,
                                5000, 10000, 20000, 50000, 100000};
  std::vector<std::string> routings_ = {"key", "prefix"};
  std::vector<std::string> ops_ = {"lookup", "get", "put"};
  std::vector<Routing> routing_;
  size_t requests_ = 20000;
  uint64_t seed_ = 1;
  double objects_ = 1e8;
  int nodes_ = 1000;
  std::string layout_ = "all";
  scale_sim::Limits limits_;
  std::string out_dir_ = "scale-sim";
  uint32_t global_min_refs_ = 0;
  uint32_t tag_depth_ = 0;
  double call_scale_ = 1;
  int threads_override_ = 0;
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<ScaleSimCommand> AddScaleSimCommand(CLI::App& app) {
  return std::make_unique<ScaleSimCommandImpl>(app);
}

}  // namespace kvpool
