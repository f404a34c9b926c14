// Client::State: what a kvpool::Client holds (its master connection, data
// plane, lease cache, registered buffers, open sessions). Internal to
// src/client: client.cc, client_put.cc, client_get.cc and
// client_sessions.cc share it.
#ifndef KVPOOL_CLIENT_CLIENT_STATE_H_
#define KVPOOL_CLIENT_CLIENT_STATE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/data_plane.h"
#include "client/liveness_pinger.h"
#include "client/op_metrics.h"
#include "client/ssd_prefetcher.h"
#include "common/mutex.h"
#include "kvpool/client.h"
#include "rpc/master_client.h"

namespace kvpool {

inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Bumped by every Register/UnregisterBuffer of every client, so that a
// thread's memo of the last registered region it met (see Registered) is
// never trusted across a change, nor for another client.
extern std::atomic<uint64_t> g_buffer_generation;

// One key's read: where to put it and what the master said.
struct ReadJob {
  std::string_view key;
  int64_t lease_deadline_ms = 0;  // steady clock
  uint8_t* dest = nullptr;
  uint64_t capacity = 0;
  const rpc::GetReplicaListResponse* reply = nullptr;
  int next_replica = 0;
  Result<uint64_t> result = ErrorCode::INTERNAL_ERROR;
  std::string owned;  // for Get: the value's own storage
  // Non-empty: read these pieces instead of the whole value into `dest`.
  // A DRAM replica serves them directly; an SSD read (whole values only)
  // stages the value in `owned` and copies them out.
  std::vector<ValuePiece> pieces;
  uint64_t piece_bytes = 0;  // what a successful read returns
  bool staged = false;       // the last attempt read into `owned`
  // Steady ms when the last attempt's transfer ended: the lease is judged
  // against it, not against the end of the whole batch.
  int64_t copied_ms = 0;
};

// Reads every job whose reply is OK; tries the next replica when a transfer
// fails, so a dead holder of one replica does not fail the read.
void RunReads(DataPlane& data, const std::string& tenant,
              std::vector<ReadJob>& jobs, SsdPrefetcher* prefetcher);

rpc::ReplicateConfig ToProto(const ReplicateConfig& rc);
TcpDataClientOptions TcpOptions(const ClientConfig& c);

struct Client::State {
  State(const ClientConfig& c, MasterSecurity security)
      : config(c),
        master(c.master_server_address, c.rpc_timeout_ms, std::move(security)),
        data(c.transport, TcpOptions(c)) {
    if (c.enable_ssd_prefetch) {
      SsdPrefetcherConfig pc;
      pc.throttle.dedup_ttl_ms = c.ssd_prefetch_dedup_ttl_sec * 1000;
      pc.throttle.cooldown_ms = c.ssd_prefetch_cooldown_sec * 1000;
      pc.allow_local_holder = c.transport != TransportMode::kTcp;
      prefetcher =
          std::make_unique<SsdPrefetcher>(pc, &master, &data, c.tenant);
    }
  }
  // Jobs hold pointers to master and data: drain them first. The pinger
  // reads the sessions and calls the master.
  ~State() {
    pinger.Stop();
    if (prefetcher) prefetcher->Shutdown();
  }
  ClientConfig config;
  // Declared before everything that may record into it.
  MetricsRegistry metrics;
  OpMetrics op_metrics{&metrics};
  MasterClient master;
  DataPlane data;
  std::unique_ptr<SsdPrefetcher>
      prefetcher;  // null when enable_ssd_prefetch is off
  struct CachedReply {
    std::shared_ptr<const rpc::GetReplicaListResponse> reply;
    int64_t deadline_ms =
        0;  // steady clock: end of the lease this client holds
    int64_t margin_ms = 0;
    // The first MEMORY replica's bytes in a local mapping, once resolved
    // (`resolved`); nullptr when none is reachable through shared memory.
    const uint8_t* shm_src = nullptr;
    std::shared_ptr<const ShmSegment> shm_seg;  // keeps shm_src mapped
    bool resolved = false;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const {
      return std::hash<std::string_view>{}(s);
    }
  };
  Mutex cache_mu;
  // lease_cache only; looked up by string_view (no key copy per get).
  std::unordered_map<std::string, CachedReply, KeyHash, std::equal_to<>> cache
      ABSL_GUARDED_BY(cache_mu);
  std::atomic<uint64_t> lease_cache_hits{0};
  uint64_t master_incarnation ABSL_GUARDED_BY(cache_mu) = 0;  // 0 = none seen
  // Entries whose lease ended are dropped every few seconds: each holds its
  // segment's mapping.
  int64_t next_cache_sweep_ms ABSL_GUARDED_BY(cache_mu) = 0;
  std::atomic<uint64_t> lease_cache_resets{0};
  std::atomic<uint64_t> put_retries{0};  // keys re-put away from a dead node
  std::atomic<uint64_t> put_retries_on_new_leader{0};
  SharedMutex buf_mu;
  // Registered regions.
  std::vector<std::pair<uintptr_t, uint64_t>> buffers ABSL_GUARDED_BY(buf_mu);

  // Generation of `buffers` (from g_buffer_generation); changes under
  // buf_mu held exclusively.
  // Open put and get sessions (client_sessions.cc), by key; guarded by
  // session_mu.
  struct PutSession {
    std::shared_ptr<rpc::PutStartResponse> start;  // the granted replicas
    uint64_t size = 0;
  };
  struct GetSession {
    std::shared_ptr<const rpc::GetReplicaListResponse> reply;
    int64_t lease_deadline_ms = 0;  // steady clock
  };
  Mutex session_mu;
  std::unordered_map<std::string, PutSession> put_sessions
      ABSL_GUARDED_BY(session_mu);
  std::unordered_map<std::string, GetSession> get_sessions
      ABSL_GUARDED_BY(session_mu);

  std::atomic<uint64_t> buffers_generation{
      g_buffer_generation.fetch_add(1, std::memory_order_relaxed)};

  // Puts between their PutStart and their PutEnd or revoke, besides the
  // open put sessions: while there are any, the pinger tells the master
  // this client is alive, so it does not release them (liveness_pinger.h).
  std::atomic<int64_t> puts_in_flight{0};
  LivenessPinger pinger{&master, config.tenant, [this] {
                          if (puts_in_flight.load() > 0) return true;
                          MutexLock lock(&session_mu);
                          return !put_sessions.empty();
                        }};
  // Counts a put in flight while it lives (from before its PutStart).
  class PutInFlight {
   public:
    explicit PutInFlight(State* s) : s_(s) {
      s_->puts_in_flight.fetch_add(1);
      s_->pinger.EnsureStarted();
    }
    ~PutInFlight() { s_->puts_in_flight.fetch_sub(1); }
    PutInFlight(const PutInFlight&) = delete;
    PutInFlight& operator=(const PutInFlight&) = delete;

   private:
    State* s_;
  };

  bool Registered(const void* p, uint64_t size) ABSL_LOCKS_EXCLUDED(buf_mu) {
    // Each thread remembers the last region it found, so that the hot path
    // of a get into the same registered buffer takes no lock.
    struct Memo {
      const State* owner = nullptr;
      uint64_t generation = 0;
      uintptr_t base = 0;
      uint64_t len = 0;
    };
    thread_local Memo memo;
    auto a = reinterpret_cast<uintptr_t>(p);
    auto inside = [&](uintptr_t base, uint64_t len) {
      return a >= base && size <= len && a - base <= len - size;
    };
    if (memo.owner == this &&
        memo.generation == buffers_generation.load(std::memory_order_acquire) &&
        inside(memo.base, memo.len)) {
      return true;
    }
    ReaderLock lock(&buf_mu);
    for (const auto& [base, len] : buffers) {
      if (inside(base, len)) {
        memo = Memo{this, buffers_generation.load(std::memory_order_relaxed),
                    base, len};
        return true;
      }
    }
    return false;
  }
};

struct Client::Replies {
  Status status;  // an RPC failure, for every key
  std::vector<std::shared_ptr<const rpc::GetReplicaListResponse>> items;
  std::vector<int64_t> lease_deadline_ms;  // steady clock
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_CLIENT_STATE_H_
