#include "common/metrics.h"

#include <sstream>
#include <vector>

namespace kvpool {

Counter& MetricsRegistry::GetCounter(const std::string& name,
                                     const std::string& labels,
                                     const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  if (!help.empty()) f.help = help;
  auto& slot = f.counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

void MetricsRegistry::AddGauge(const std::string& name,
                               const std::string& labels, GaugeFn fn,
                               const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_[name];
  f.is_gauge = true;
  if (!help.empty()) f.help = help;
  f.gauges[labels] = std::move(fn);
}

uint64_t MetricsRegistry::CounterValue(const std::string& name,
                                       const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto c = it->second.counters.find(labels);
  return c == it->second.counters.end() ? 0 : c->second->Value();
}

std::string MetricsRegistry::RenderPrometheus() const {
  // Gauges are evaluated after mu_ is released: their callbacks take other
  // locks (the master's shard locks), while code holding those locks counts
  // into this registry, so calling them under mu_ inverts the lock order
  // (TSan found the cycle: /metrics against a put).
  struct Line {
    std::string text;  // the whole line, or the series name of a gauge
    GaugeFn gauge;     // empty for header and counter lines
  };
  std::vector<Line> lines;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, f] : families_) {
      if (!f.help.empty()) {
        lines.push_back({"# HELP " + name + " " + f.help + "\n", nullptr});
      }
      lines.push_back(
          {"# TYPE " + name + (f.is_gauge ? " gauge" : " counter") + "\n",
           nullptr});
      // Captured by an init-capture: clang before 16 cannot capture a
      // structured binding.
      auto series = [&, &name = name](const std::string& labels) {
        return labels.empty() ? name : name + "{" + labels + "}";
      };
      for (const auto& [labels, c] : f.counters) {
        lines.push_back(
            {series(labels) + " " + std::to_string(c->Value()) + "\n",
             nullptr});
      }
      for (const auto& [labels, fn] : f.gauges) {
        lines.push_back({series(labels), fn});
      }
    }
  }
  std::ostringstream out;
  for (const Line& line : lines) {
    if (line.gauge) {
      out << line.text << " " << line.gauge() << "\n";
    } else {
      out << line.text;
    }
  }
  return out.str();
}

}  // namespace kvpool
