// The process's metrics, held in a prometheus-cpp registry and rendered as
// Prometheus text.
//
// Counters and histograms are registered once (under a lock) and then used
// through the handle that registration returns, so the hot path is one atomic
// update (a counter) or one short per-series lock (a histogram): keep the
// handle in a member rather than calling Get* per event. Gauges are callbacks
// evaluated at scrape time, so they never go stale. Thread-safe.
#ifndef KVPOOL_COMMON_METRICS_H_
#define KVPOOL_COMMON_METRICS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace prometheus {
class Counter;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace kvpool {

// A monotonically increasing count. Exact up to 2^53.
class Counter {
 public:
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  void Inc(uint64_t n = 1);
  uint64_t Value() const;

 private:
  prometheus::Counter* c_;
};

// A distribution of observations into fixed buckets (Prometheus histogram:
// `_bucket{le=...}`, `_sum`, `_count`).
class Histogram {
 public:
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  void Observe(double value);
  // Observes the seconds elapsed since `start` (steady clock).
  void ObserveSince(std::chrono::steady_clock::time_point start) {
    Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }

 private:
  prometheus::Histogram* h_;
};

// Bucket sets, so that series of one kind compare across processes.
// 10 us .. ~10.5 s, doubling (21 buckets): RPCs, data-plane requests, SSD
// reads and writes, promotions.
const std::vector<double>& LatencyBucketsSeconds();
// 512 B .. 128 MiB, x4 (11 buckets): data-plane request sizes.
const std::vector<double>& SizeBucketsBytes();

class MetricsRegistry;

// The series of one counter family that differ in one label, found by the
// label's value without formatting or locking: the values are the call
// sites' string literals, matched by address first. For a label whose
// values are few and fixed (a status, a fate, a reason).
class CounterVec {
 public:
  CounterVec(MetricsRegistry* registry, std::string name, std::string label,
             std::string help = "");
  Counter& With(const char* value);
  // Creates the series of each known value at 0, so that a scraper sees
  // them (and rate() has a start) before the first event.
  void Declare(std::initializer_list<const char*> values);

 private:
  static constexpr int kSlots = 16;
  struct Slot {
    std::atomic<const char*> value{nullptr};
    std::atomic<Counter*> counter{nullptr};
  };
  MetricsRegistry* registry_;
  const std::string name_, label_, help_;
  Slot slots_[kSlots];
  std::atomic<int> used_{0};
  std::mutex mu_;  // serializes adding a slot
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // `labels` is Prometheus label text without braces, e.g. `result="ok"` or
  // `op="get",path="shm"` (values must not contain `"` or `,`). A family's
  // help is fixed by its first registration that gives one. The returned
  // reference stays valid for the registry's lifetime.
  Counter& GetCounter(const std::string& name, const std::string& labels = "",
                      const std::string& help = "");
  // `buckets` must be the same for every series of one family.
  Histogram& GetHistogram(const std::string& name, const std::string& labels,
                          const std::vector<double>& buckets,
                          const std::string& help = "");
  // Registers the family `name` with no series yet, so a scrape lists it
  // (HELP and TYPE) before its first event.
  void DeclareCounter(const std::string& name, const std::string& help);
  using GaugeFn = std::function<double()>;
  void AddGauge(const std::string& name, const std::string& labels, GaugeFn fn,
                const std::string& help = "");
  // Prometheus text exposition format (version 0.0.4).
  std::string RenderPrometheus() const;
  // Value of a counter, 0 if it was never created (for tests and /status).
  uint64_t CounterValue(const std::string& name,
                        const std::string& labels = "") const;
  // Observations of a histogram series, 0 if it was never created.
  uint64_t HistogramCount(const std::string& name,
                          const std::string& labels = "") const;

 private:
  struct Gauge {
    std::string name, labels, help;
    GaugeFn fn;
  };
  using Key = std::pair<std::string, std::string>;  // name, labels

  std::unique_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*>
      counter_families_;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*>
      histogram_families_;
  std::map<Key, std::unique_ptr<Counter>> counters_;
  std::map<Key, std::unique_ptr<Histogram>> histograms_;
  std::vector<Gauge> gauges_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_METRICS_H_
