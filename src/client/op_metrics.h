// Latency of a client's puts, gets and exists by the data path their bytes
// took: kvpool_client_op_duration_seconds{op="put|get|exist",
// path="shm|tcp|ssd|none"}. The path of a call is the slowest one any of its
// values took (ssd > tcp > shm); "none" when no value bytes moved (misses,
// exists, refusals).
//
// The data plane marks the paths it uses on the calling thread; an OpTimer
// around a public call reads them when the call ends. Only the outermost
// timer of a thread records, so a call made of other public calls counts
// once.
#ifndef KVPOOL_CLIENT_OP_METRICS_H_
#define KVPOOL_CLIENT_OP_METRICS_H_

#include <array>
#include <chrono>
#include <cstdint>

#include "common/metrics.h"

namespace kvpool {

enum class ClientOp : uint8_t { kPut = 0, kGet = 1, kExist = 2 };

// Path bits the data plane marks.
inline constexpr uint8_t kPathShm = 1, kPathTcp = 2, kPathSsd = 4;
void MarkDataPath(uint8_t path_bit);

class OpMetrics {
 public:
  explicit OpMetrics(MetricsRegistry* metrics);
  Histogram& For(ClientOp op, uint8_t paths);

 private:
  // [op][path]: path 0 = none, 1 = shm, 2 = tcp, 3 = ssd.
  std::array<std::array<Histogram*, 4>, 3> histograms_{};
};

class OpTimer {
 public:
  OpTimer(OpMetrics* metrics, ClientOp op);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpMetrics* metrics_;  // null: an inner timer, records nothing
  ClientOp op_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_OP_METRICS_H_
