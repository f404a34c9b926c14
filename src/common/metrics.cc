#include "common/metrics.h"

#include <sstream>

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
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out << "# HELP " << name << " " << f.help << "\n";
    out << "# TYPE " << name << (f.is_gauge ? " gauge" : " counter") << "\n";
    // Captured by an init-capture: clang before 16 cannot capture a
    // structured binding.
    auto series = [&, &name = name](const std::string& labels) {
      return labels.empty() ? name : name + "{" + labels + "}";
    };
    for (const auto& [labels, c] : f.counters) {
      out << series(labels) << " " << c->Value() << "\n";
    }
    for (const auto& [labels, fn] : f.gauges) {
      out << series(labels) << " " << fn() << "\n";
    }
  }
  return out.str();
}

}  // namespace kvpool
