// Tells the master that this client is alive while it has puts in flight
// (issue #41): the master releases the puts of a client silent for its
// client_ttl, so a client killed mid-put holds the pool for seconds, not
// for put_start_release_timeout_sec. The client names itself by a random
// 128-bit id, sent on its PutStarts (PutStartRequest.client_id) and on each
// ClientPing.
//
// One thread, started by the first put (a client that only reads has
// none), which pings every third of the ttl the master states (1 s until
// it has), and only while `active` says puts are in flight; an idle client
// costs a lock and a check per period. Stop ends it at once: it wakes the
// wait and cancels a ping in flight. Thread-safe.
#ifndef KVPOOL_CLIENT_LIVENESS_PINGER_H_
#define KVPOOL_CLIENT_LIVENESS_PINGER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "rpc/master_client.h"

namespace kvpool {

class LivenessPinger {
 public:
  // `master` must outlive the pinger (or its Stop).
  LivenessPinger(const MasterClient* master, std::string tenant,
                 std::function<bool()> active);
  ~LivenessPinger() { Stop(); }
  LivenessPinger(const LivenessPinger&) = delete;
  LivenessPinger& operator=(const LivenessPinger&) = delete;

  // 16 random bytes, never all zero.
  const std::string& id() const { return id_; }
  // Starts the thread unless it runs (or was stopped). Cheap once started.
  void EnsureStarted() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Pings answered by the master (for tests).
  uint64_t pings() const { return pings_.load(std::memory_order_relaxed); }

  // Until the master has stated its ttl, and after a failed ping (another
  // leader, an older master without ClientPing, which may be upgraded any
  // time): no longer than any client_ttl (>= 1 s).
  static constexpr int64_t kFirstPeriodMs = 1000;

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const MasterClient* master_;
  const std::string tenant_;
  const std::string id_;
  const std::function<bool()> active_;
  std::atomic<bool> started_{false};
  std::atomic<uint64_t> pings_{0};
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The ping in flight, for Stop to cancel.
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;  // started under mu_; joined by Stop
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_LIVENESS_PINGER_H_
