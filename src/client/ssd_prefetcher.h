// SsdPrefetcher: prefetch-on-exist on the client side
// (docs/prefetch_on_exist.md). TriggerPrefetch costs the
// caller one throttle reservation and one enqueue: no RPC, nothing
// proportional to the table. A fixed pool of workers then, per 128-key
// chunk, runs the read-only tier lookup (no lease, no promote-on-hit, no get
// metrics), keeps the SSD-only keys (COMPLETE LOCAL_DISK, no MEMORY, size >
// 0) and hands them to their holder: an in-process holder promotes them
// itself (RegisterPrefetchTask + the shared chain); a remote holder gets the
// PREFETCH data-plane request and does the same under the keys' tenant.
// Best effort throughout: any failure drops the key (counted), never the
// caller's exist or get. Shutdown() refuses new work, drains queued and
// running jobs and joins the workers. Thread-safe.
#ifndef KVPOOL_CLIENT_SSD_PREFETCHER_H_
#define KVPOOL_CLIENT_SSD_PREFETCHER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/data_plane.h"
#include "client/prefetch_throttle.h"
#include "common/mutex.h"
#include "kvpool/client.h"
#include "rpc/master_client.h"

namespace kvpool {

struct SsdPrefetcherConfig {
  int workers = 4;
  size_t chunk_keys = 128;
  size_t max_queued_jobs = 4096;  // beyond this a trigger is dropped (counted)
  // Let an in-process holder promote directly (false with transport kTcp,
  // which asks for no in-process shortcuts).
  bool allow_local_holder = true;
  PrefetchThrottleConfig throttle;
};

// What fired a trigger. The get-side kick bypasses the client's cooldown
// (only that) and its promotions are for the *next* get of each key: the
// get that kicked reads the SSD at once, so the holder never drops them for
// coming after that read (LocalHolder::PrefetchKeys, PREFETCH_FOR_NEXT_GET).
enum class PrefetchTrigger { kExist, kGetKick };

class SsdPrefetcher {
 public:
  // `master` and `data` must outlive the prefetcher (Shutdown joins first).
  SsdPrefetcher(SsdPrefetcherConfig config, MasterClient* master,
                DataPlane* data, std::string tenant,
                const Clock* clock = SystemClock::Default());
  ~SsdPrefetcher();

  void TriggerPrefetch(const std::vector<std::string>& keys,
                       PrefetchTrigger trigger) ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until no job is queued or running (tests, benchmarks).
  bool WaitIdle(std::chrono::milliseconds timeout) ABSL_LOCKS_EXCLUDED(mu_);
  PrefetchStats stats() const;

 private:
  // Throttle and counters, shared with completion callbacks that an
  // in-process holder may run after this client is gone.
  struct Shared {
    Shared(PrefetchThrottleConfig c, const Clock* clock) : throttle(c, clock) {}
    void OnKeyDone(const std::string& key, ErrorCode code);
    PrefetchThrottle throttle;
    std::atomic<uint64_t> triggers{0}, keys_triggered{0}, delegations{0},
        completed{0}, failed{0}, already_resident{0}, dropped{0},
        not_ssd_only{0};
  };
  struct Job {
    std::vector<std::string> keys;
    PrefetchTrigger trigger;
  };
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void RunJob(const std::vector<std::string>& keys, PrefetchTrigger trigger);

  const SsdPrefetcherConfig config_;
  MasterClient* master_;
  DataPlane* data_;
  const std::string tenant_;
  std::shared_ptr<Shared> shared_;

  Mutex mu_;
  CondVar cv_, idle_cv_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  // Filled by the constructor, joined and cleared by Shutdown (one caller
  // at a time: the owner); not guarded by mu_.
  std::vector<std::thread> workers_;
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_SSD_PREFETCHER_H_
