#include "tools/trace_gen_cmd.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "replay/trace_gen.h"

namespace kvpool {

namespace {

using replay::LogNormalSpec;
using replay::SessionClass;
using replay::TraceGenConfig;

class TraceGenCommandImpl : public TraceGenCommand {
 public:
  explicit TraceGenCommandImpl(CLI::App& app) {
    cmd_ = app.add_subcommand(
        "trace-gen",
        "write a synthetic request trace (sessions, multi-turn reuse, shared "
        "system prompts, tool loops) for `kvpool replay`");
    cmd_->add_option("--preset", preset_,
                     "chat, agent, long-doc or bursty-mix (--list-presets)");
    cmd_->add_flag("--list-presets", list_, "print the presets and exit");
    cmd_->add_option("--out", out_, "trace file to write (JSON lines)");
    cmd_->add_flag("--stats", stats_, "print the generated trace's statistics");
    Override(
        "--requests", "requests in the trace (default 4000)",
        [](TraceGenConfig& c, double v) { c.requests = size_t(v); }, true);
    Override(
        "--seed", "random seed (default 1)",
        [](TraceGenConfig& c, double v) { c.seed = uint64_t(v); }, true);
    Override("--rate", "target requests per second of trace time",
             [](TraceGenConfig& c, double v) { c.request_rate = v; });
    cmd_->add_option("--arrival", arrival_,
                     "arrivals of new sessions: poisson or gamma");
    Override("--arrival_cv",
             "gamma inter-arrivals' coefficient of variation (> 1: bursty)",
             [](TraceGenConfig& c, double v) { c.arrival_cv = v; });
    Override(
        "--max_prompt_tokens",
        "a session ends before a longer prompt (default 65536)",
        [](TraceGenConfig& c, double v) { c.max_prompt_tokens = uint64_t(v); },
        true);
    Override("--decode_ms_per_token",
             "response time per output token before the think time",
             [](TraceGenConfig& c, double v) { c.decode_ms_per_token = v; });
    // The rest set a field of every session class of the preset.
    ForClasses(
        "--system_prompts", "system prompts in each class's pool",
        [](SessionClass& k, double v) { k.system_prompts = int(v); }, true);
    ForClasses("--system_zipf", "Zipf exponent of system prompt popularity",
               [](SessionClass& k, double v) { k.system_zipf = v; });
    ForClasses("--system_tokens", "mean system prompt tokens",
               [](SessionClass& k, double v) { k.system_tokens.mean = v; });
    ForClasses("--turns", "mean turns per session (geometric, >= 1)",
               [](SessionClass& k, double v) { k.mean_turns = v; });
    ForClasses("--first_user_tokens", "mean new tokens of a session's turn 1",
               [](SessionClass& k, double v) { k.first_user_tokens.mean = v; });
    ForClasses("--user_tokens", "mean new user tokens of the later turns",
               [](SessionClass& k, double v) { k.user_tokens.mean = v; });
    ForClasses("--user_sigma", "sigma of log(user tokens), both kinds",
               [](SessionClass& k, double v) {
                 k.user_tokens.sigma = k.first_user_tokens.sigma = v;
               });
    ForClasses("--output_tokens", "mean output tokens",
               [](SessionClass& k, double v) { k.output_tokens.mean = v; });
    ForClasses("--output_sigma", "sigma of log(output tokens)",
               [](SessionClass& k, double v) { k.output_tokens.sigma = v; });
    ForClasses("--think_ms", "mean think time between turns (ms)",
               [](SessionClass& k, double v) { k.think_ms.mean = v; });
  }

  bool chosen() const override { return cmd_->parsed(); }

  int Run() override {
    if (list_) {
      for (const auto& p : replay::TracePresets()) {
        std::printf("%-12s %s\n", p.name.c_str(), p.description.c_str());
      }
      return 0;
    }
    if (preset_.empty()) return Usage("--preset is required");
    if (out_.empty() && !stats_) return Usage("give --out FILE or --stats");
    auto base = replay::PresetConfig(preset_);
    if (!base.ok()) return Usage(base.status().message());
    TraceGenConfig config = base.value();
    for (auto& apply : apply_) apply(config);
    if (!arrival_.empty()) {
      if (arrival_ == "poisson") {
        config.arrival = replay::ArrivalProcess::kPoisson;
      } else if (arrival_ == "gamma") {
        config.arrival = replay::ArrivalProcess::kGamma;
      } else {
        return Usage("--arrival must be poisson or gamma");
      }
    }
    if (config.requests == 0) return Usage("--requests must be >= 1");
    if (auto s = replay::ValidateTraceGenConfig(config); !s.ok()) {
      return Usage(s.message());
    }
    const auto trace = replay::GenerateTrace(config);
    if (!out_.empty()) {
      if (auto s = replay::WriteTrace(trace, out_); !s.ok()) {
        std::fprintf(stderr, "trace-gen: %s\n", s.message().c_str());
        return 1;
      }
    }
    if (stats_) PrintStats(trace);
    return 0;
  }

 private:
  static int Usage(const std::string& message) {
    std::fprintf(stderr, "trace-gen: %s\n", message.c_str());
    return 2;
  }

  void PrintStats(const std::vector<replay::TraceRequest>& trace) const {
    const auto s = replay::ComputeTraceGenStats(trace);
    std::printf("preset              %s\n", preset_.c_str());
    std::printf("requests            %zu\n", s.requests);
    std::printf("span                %.1f s\n", s.span_s);
    std::printf("request rate        %.2f /s\n", s.request_rate);
    std::printf("blocks / request    %.1f\n", s.mean_blocks);
    std::printf("  reused / request  %.1f\n", s.mean_reused_blocks);
    std::printf("  new / request     %.1f\n", s.mean_new_blocks);
    std::printf("input tokens        %.0f (mean)\n", s.mean_input_tokens);
    std::printf("output tokens       %.0f (mean)\n", s.mean_output_tokens);
    std::printf("distinct blocks     %zu\n", s.distinct_blocks);
    if (s.window_distinct_blocks > 0) {
      std::printf(
          "distinct blocks of requests 3000-3399 (replay --requests "
          "3400 --measure 400): %zu\n",
          s.window_distinct_blocks);
    }
  }

  // A numeric flag that, when given, changes the config. Integers are
  // checked here, so "--requests 2.5" is an error rather than 2.
  void Override(const std::string& flag, const std::string& help,
                std::function<void(TraceGenConfig&, double)> set,
                bool integer = false) {
    cmd_->add_option_function<double>(
            flag,
            [this, flag, set, integer](double v) {
              if (!std::isfinite(v) || v < 0 ||
                  (integer && (v != std::floor(v) || v > 9.0e15))) {
                throw CLI::ValidationError(flag, integer
                                                     ? "an integer in [0, 9e15]"
                                                     : "a non-negative number");
              }
              apply_.push_back([set, v](TraceGenConfig& c) { set(c, v); });
            },
            help)
        ->type_name(integer ? "INT" : "NUM");
  }
  void ForClasses(const std::string& flag, const std::string& help,
                  std::function<void(SessionClass&, double)> set,
                  bool integer = false) {
    Override(
        flag, help + " (every class)",
        [set](TraceGenConfig& c, double v) {
          for (auto& k : c.classes) set(k, v);
        },
        integer);
  }

  CLI::App* cmd_ = nullptr;
  std::string preset_, out_, arrival_;
  bool list_ = false, stats_ = false;
  std::vector<std::function<void(TraceGenConfig&)>> apply_;
};

}  // namespace

std::unique_ptr<TraceGenCommand> AddTraceGenCommand(CLI::App& app) {
  return std::make_unique<TraceGenCommandImpl>(app);
}

}  // namespace kvpool
