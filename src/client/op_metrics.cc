#include "client/op_metrics.h"

#include <string>

namespace kvpool {
namespace {

// Per thread: whether a timer is open, and the paths marked since it opened.
thread_local bool timer_open = false;
thread_local uint8_t marked_paths = 0;

}  // namespace

void MarkDataPath(uint8_t path_bit) { marked_paths |= path_bit; }

OpMetrics::OpMetrics(MetricsRegistry* metrics) {
  static constexpr const char* kOps[] = {"put", "get", "exist"};
  static constexpr const char* kPaths[] = {"none", "shm", "tcp", "ssd"};
  for (int o = 0; o < 3; ++o) {
    for (int p = 0; p < 4; ++p) {
      histograms_[o][p] = &metrics->GetHistogram(
          "kvpool_client_op_duration_seconds",
          std::string("op=\"") + kOps[o] + "\",path=\"" + kPaths[p] + "\"",
          LatencyBucketsSeconds(),
          "client call latency by the slowest data path its values took");
    }
  }
}

Histogram& OpMetrics::For(ClientOp op, uint8_t paths) {
  const int p = (paths & kPathSsd)   ? 3
                : (paths & kPathTcp) ? 2
                : (paths & kPathShm) ? 1
                                     : 0;
  return *histograms_[static_cast<int>(op)][p];
}

OpTimer::OpTimer(OpMetrics* metrics, ClientOp op)
    : metrics_(timer_open ? nullptr : metrics), op_(op) {
  if (metrics_ == nullptr) return;
  timer_open = true;
  marked_paths = 0;
  start_ = std::chrono::steady_clock::now();
}

OpTimer::~OpTimer() {
  if (metrics_ == nullptr) return;
  metrics_->For(op_, marked_paths).ObserveSince(start_);
  timer_open = false;
}

}  // namespace kvpool
