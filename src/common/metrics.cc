#include "common/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <sstream>

namespace kvpool {
namespace {

// The family of counters called `name`, registered on first use (the
// caller holds the registry's lock).
template <typename FamilyMap>
prometheus::Family<prometheus::Counter>& CounterFamily(
    FamilyMap* families, prometheus::Registry* registry,
    const std::string& name, const std::string& help) {
  auto& family = (*families)[name];
  if (family == nullptr) {
    family =
        &prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
  }
  return *family;
}

// `a="x",b="y"` -> {{a,x},{b,y}}. Label text comes from the code, not from
// users, so a malformed one is a programming error: it is kept whole as the
// value of a label named `labels` rather than dropped.
prometheus::Labels ParseLabels(const std::string& text) {
  prometheus::Labels out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eq = text.find("=\"", pos);
    if (eq == std::string::npos) break;
    const size_t close = text.find('"', eq + 2);
    if (close == std::string::npos) break;
    out[text.substr(pos, eq - pos)] = text.substr(eq + 2, close - eq - 2);
    pos = close + 1;
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  if (pos < text.size()) return {{"labels", text}};
  return out;
}

}  // namespace

void Counter::Inc(uint64_t n) { c_->Increment(static_cast<double>(n)); }

uint64_t Counter::Value() const {
  return static_cast<uint64_t>(std::llround(c_->Value()));
}

void Histogram::Observe(double value) { h_->Observe(value); }

const std::vector<double>& LatencyBucketsSeconds() {
  static const std::vector<double> kBuckets = [] {
    std::vector<double> b;
    for (int i = 0; i <= 20; ++i) b.push_back(10e-6 * std::ldexp(1.0, i));
    return b;
  }();
  return kBuckets;
}

const std::vector<double>& SizeBucketsBytes() {
  static const std::vector<double> kBuckets = [] {
    std::vector<double> b;
    for (double v = 512; v <= 128.0 * 1024 * 1024; v *= 4) b.push_back(v);
    return b;
  }();
  return kBuckets;
}

CounterVec::CounterVec(MetricsRegistry* registry, std::string name,
                       std::string label, std::string help)
    : registry_(registry),
      name_(std::move(name)),
      label_(std::move(label)),
      help_(std::move(help)) {
  registry_->DeclareCounter(name_, help_);
}

Counter& CounterVec::With(const char* value) {
  int used = used_.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    if (slots_[i].value.load(std::memory_order_relaxed) == value) {
      return *slots_[i].counter.load(std::memory_order_relaxed);
    }
  }
  Counter& c =
      registry_->GetCounter(name_, label_ + "=\"" + value + "\"", help_);
  std::lock_guard<std::mutex> lock(mu_);
  used = used_.load(std::memory_order_relaxed);
  if (used < kSlots) {
    // Published by the release store of used_: readers see both fields.
    slots_[used].value.store(value, std::memory_order_relaxed);
    slots_[used].counter.store(&c, std::memory_order_relaxed);
    used_.store(used + 1, std::memory_order_release);
  }
  return c;  // past kSlots values: found through the registry each time
}

void CounterVec::Declare(std::initializer_list<const char*> values) {
  for (const char* v : values) With(v);
}

MetricsRegistry::MetricsRegistry()
    : registry_(std::make_unique<prometheus::Registry>()) {}

MetricsRegistry::~MetricsRegistry() = default;

Counter& MetricsRegistry::GetCounter(const std::string& name,
                                     const std::string& labels,
                                     const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = counters_[{name, labels}];
  if (slot) return *slot;
  auto& family = CounterFamily(&counter_families_, registry_.get(), name, help);
  slot = std::make_unique<Counter>(&family.Add(ParseLabels(labels)));
  return *slot;
}

void MetricsRegistry::DeclareCounter(const std::string& name,
                                     const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  CounterFamily(&counter_families_, registry_.get(), name, help);
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name,
                                         const std::string& labels,
                                         const std::vector<double>& buckets,
                                         const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = histograms_[{name, labels}];
  if (slot) return *slot;
  auto& family = histogram_families_[name];
  if (family == nullptr) {
    family = &prometheus::BuildHistogram().Name(name).Help(help).Register(
        *registry_);
  }
  slot =
      std::make_unique<Histogram>(&family->Add(ParseLabels(labels), buckets));
  return *slot;
}

void MetricsRegistry::AddGauge(const std::string& name,
                               const std::string& labels, GaugeFn fn,
                               const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Gauge& g : gauges_) {
    if (g.name == name && g.labels == labels) {
      g.fn = std::move(fn);
      return;
    }
  }
  gauges_.push_back({name, labels, help, std::move(fn)});
}

uint64_t MetricsRegistry::CounterValue(const std::string& name,
                                       const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find({name, labels});
  return it == counters_.end() ? 0 : it->second->Value();
}

uint64_t MetricsRegistry::HistogramCount(const std::string& name,
                                         const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (histograms_.find({name, labels}) == histograms_.end()) return 0;
  const prometheus::Labels want = ParseLabels(labels);
  for (const auto& family : registry_->Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      prometheus::Labels have;
      for (const auto& l : m.label) have[l.name] = l.value;
      if (have == want) return m.histogram.sample_count;
    }
  }
  return 0;
}

std::string MetricsRegistry::RenderPrometheus() const {
  std::vector<Gauge> gauges;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gauges = gauges_;
  }
  // Gauges are evaluated after mu_ is released: their callbacks take other
  // locks (the master's shard locks), while code holding those locks counts
  // into this registry, so calling them under mu_ inverts the lock order
  // (TSan found the cycle: /metrics against a put).
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::map<std::string, size_t> gauge_family;  // name -> index in families
  for (const Gauge& g : gauges) {
    auto [it, added] = gauge_family.try_emplace(g.name, families.size());
    if (added) {
      prometheus::MetricFamily f;
      f.name = g.name;
      f.help = g.help;
      f.type = prometheus::MetricType::Gauge;
      families.push_back(std::move(f));
    }
    prometheus::ClientMetric m;
    for (const auto& [k, v] : ParseLabels(g.labels)) m.label.push_back({k, v});
    m.gauge.value = g.fn();
    families[it->second].metric.push_back(std::move(m));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace kvpool
