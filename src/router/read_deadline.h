// The router's estimate of when an engine will read a request's blocks, as
// pure arithmetic so it can be tested without a cluster or a clock.
#ifndef KVPOOL_ROUTER_READ_DEADLINE_H_
#define KVPOOL_ROUTER_READ_DEADLINE_H_

#include <cstdint>

namespace kvpool {

// An engine's service rate: the mean time between its completions, counted
// only while requests were waiting (an idle engine's gaps say nothing about
// how fast it drains a queue). Exponentially weighted, so it follows load
// changes within a few dozen completions.
class ServiceInterval {
 public:
  // A completion at `now_ms`; `had_queue`: requests were waiting behind the
  // running ones when it completed.
  void OnComplete(int64_t now_ms, bool had_queue);
  // 0 until a completion with a queue has followed another completion.
  double mean_ms() const { return mean_ms_; }

 private:
  static constexpr double kWeight = 0.1;
  int64_t last_ms_ = -1;
  double mean_ms_ = 0;
};

// An engine's admission rate, from its reported waiting queue
// (Router::ReportQueue): every request routed to it is either waiting or
// admitted, so admitted = routed - waiting at each report. Over each stretch
// between two reports that began with a queue, dt ms and dA admissions; the
// mean time per admission is the ratio of their exponentially weighted sums,
// so a stretch without an admission lengthens it rather than being skipped.
// An engine bound by its KV memory admits several requests at one
// completion, or none at many: the completion interval misses both.
// An engine that counts its loading requests as waiting (as vLLM does) has
// a request leave the count when its load ends, so this is then the time
// between load completions.
class AdmissionInterval {
 public:
  // A report at `now_ms` of `waiting` requests, when `routed` requests had
  // been routed to the engine in all. The stretch it begins counts as one
  // with a queue when `waiting >= busy_at`: with `busy_at` = the engine's
  // loads at once, only stretches in which every loader had work, since an
  // idle loader's gaps say nothing about how fast loads drain.
  void OnReport(int64_t now_ms, uint64_t routed, uint64_t waiting,
                uint64_t busy_at = 1);
  // 0 until a stretch with a queue has admitted a request.
  double mean_ms() const { return admitted_ > 0 ? elapsed_ms_ / admitted_ : 0; }

 private:
  static constexpr double kWeight = 0.1;
  int64_t last_ms_ = -1;
  uint64_t last_admitted_ = 0;
  bool last_had_queue_ = false;
  double elapsed_ms_ = 0, admitted_ = 0;  // weighted sums
};

// ms from now until the engine reads the blocks of a request routed to it
// now, with `in_flight` requests already routed to it (this one not
// counted) of which it runs `max_running` at once (0 = unknown: none waits).
// The request is admitted after the requests queued ahead of it and one
// more completion: floor + slack x that many mean intervals. Returns 0 (no
// deadline) when a queue exists but no interval has been measured.
int64_t EstimateReadDeadlineMs(uint64_t in_flight, int max_running,
                               double mean_interval_ms, int64_t floor_ms,
                               double slack);

// The same from the engine's own count of requests waiting for admission
// (Router::ReportQueue): none waiting, the floor; else the request is
// admitted after those `waiting` and one more completion. 0 (no deadline)
// when no interval has been measured.
int64_t EstimateReadDeadlineFromQueueMs(uint64_t waiting,
                                        double mean_interval_ms,
                                        int64_t floor_ms, double slack);

// The same for an engine that reports its loading requests as waiting and
// loads `max_loading` of them at once (EngineInfo::max_loading): a request
// routed behind `waiting` of them starts its load (its get) after
// waiting - max_loading + 1 of them have left the count; with fewer
// waiting a loader is free and the deadline is the floor. Each departure
// takes `departure_interval_ms` (AdmissionInterval with busy_at =
// max_loading). 0 (no deadline) when the request would wait but no
// interval has been measured. Measured on the replay's engine
// (docs/results/README.md, "Deadlines counted in loads"): the route -> get
// window grows by one departure per request beyond the loaders.
int64_t EstimateReadDeadlineFromLoadsMs(uint64_t waiting, int max_loading,
                                        double departure_interval_ms,
                                        int64_t floor_ms, double slack);

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_READ_DEADLINE_H_
