#include "router/read_deadline.h"

#include <algorithm>
#include <cmath>

namespace kvpool {

void ServiceInterval::OnComplete(int64_t now_ms, bool had_queue) {
  if (had_queue && last_ms_ >= 0 && now_ms >= last_ms_) {
    const double dt = double(now_ms - last_ms_);
    mean_ms_ = mean_ms_ == 0 ? dt : (1 - kWeight) * mean_ms_ + kWeight * dt;
  }
  last_ms_ = now_ms;
}

void AdmissionInterval::OnReport(int64_t now_ms, uint64_t routed,
                                 uint64_t waiting, uint64_t busy_at) {
  // A report may count a request the router has not sent yet as waiting, or
  // lag one it has: admitted never goes back, it waits for the count.
  const uint64_t admitted = routed > waiting ? routed - waiting : 0;
  if (last_had_queue_ && last_ms_ >= 0 && now_ms >= last_ms_) {
    const double dt = double(now_ms - last_ms_);
    const double da =
        admitted > last_admitted_ ? double(admitted - last_admitted_) : 0;
    elapsed_ms_ = (1 - kWeight) * elapsed_ms_ + kWeight * dt;
    admitted_ = (1 - kWeight) * admitted_ + kWeight * da;
  }
  last_ms_ = now_ms;
  last_admitted_ = std::max(last_admitted_, admitted);
  last_had_queue_ = waiting >= std::max<uint64_t>(busy_at, 1);
}

int64_t EstimateReadDeadlineMs(uint64_t in_flight, int max_running,
                               double mean_interval_ms, int64_t floor_ms,
                               double slack) {
  if (max_running <= 0 || in_flight < uint64_t(max_running)) return floor_ms;
  if (mean_interval_ms <= 0) return 0;
  const double ahead = double(in_flight - uint64_t(max_running)) + 1;
  return floor_ms + int64_t(std::ceil(slack * ahead * mean_interval_ms));
}

int64_t EstimateReadDeadlineFromQueueMs(uint64_t waiting,
                                        double mean_interval_ms,
                                        int64_t floor_ms, double slack) {
  if (waiting == 0) return floor_ms;
  if (mean_interval_ms <= 0) return 0;
  const double ahead = double(waiting) + 1;
  return floor_ms + int64_t(std::ceil(slack * ahead * mean_interval_ms));
}

int64_t EstimateReadDeadlineFromLoadsMs(uint64_t waiting, int max_loading,
                                        double departure_interval_ms,
                                        int64_t floor_ms, double slack) {
  // The loaders are the in-flight estimate's running slots: the request
  // waits for waiting - loaders + 1 departures.
  return EstimateReadDeadlineMs(waiting, std::max(max_loading, 1),
                                departure_interval_ms, floor_ms, slack);
}

}  // namespace kvpool
