// A small metrics registry rendered as Prometheus text.
//
// Counters are created once (under a lock) and then bumped lock-free, so the
// hot path costs one relaxed atomic add. Gauges are callbacks evaluated at
// scrape time, so they never go stale. Thread-safe.
#ifndef KVPOOL_COMMON_METRICS_H_
#define KVPOOL_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvpool {

class Counter {
 public:
  void Inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class MetricsRegistry {
 public:
  // `labels` is Prometheus label text without braces, e.g. `result="ok"`.
  // The returned reference stays valid for the registry's lifetime.
  Counter& GetCounter(const std::string& name, const std::string& labels = "",
                      const std::string& help = "");
  using GaugeFn = std::function<double()>;
  void AddGauge(const std::string& name, const std::string& labels, GaugeFn fn,
                const std::string& help = "");
  // Prometheus text exposition format.
  std::string RenderPrometheus() const;
  // Value of a counter, 0 if it was never created (for tests and /status).
  uint64_t CounterValue(const std::string& name,
                        const std::string& labels = "") const;

 private:
  struct Family {
    std::string help;
    bool is_gauge = false;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, GaugeFn> gauges;
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_METRICS_H_
