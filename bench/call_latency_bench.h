// Per-call latency of exist, get and put through kvpool::Client (batch 1
// and 128) beside the empty-call floor of the same gRPC channel.
#ifndef KVPOOL_BENCH_CALL_LATENCY_BENCH_H_
#define KVPOOL_BENCH_CALL_LATENCY_BENCH_H_

#include <string>
#include <vector>

#include "kvpool/status.h"

namespace kvpool {

struct CallLatencyRow {
  std::string op;
  int batch = 0;
  double p50_us = 0, p99_us = 0;
};

Result<std::vector<CallLatencyRow>> MeasureCallLatency(double seconds);

}  // namespace kvpool

#endif  // KVPOOL_BENCH_CALL_LATENCY_BENCH_H_
