// Which clients (kvpool::Client instances) are alive, so that the puts of
// one that died are released after client_ttl instead of
// put_start_release_timeout_sec (issue #41: a client killed mid-batch held
// the whole pool for ten minutes). A client names itself by a random
// 128-bit id on its PutStarts and pings while it has puts in flight
// (ClientPing); the master notes when it last heard of each id.
//
// Silence is measured on a LivenessClock, as the nodes' is: a paused master
// declares no client dead when it resumes. Bounded: at most `max_clients`
// ids are tracked, a silent one is forgotten once its puts are released,
// and an id that finds the table full is not tracked (its puts keep the
// release timeout, as those of a client without an id do). Thread-safe; its
// lock is a leaf (taken under a shard's).
#ifndef KVPOOL_MASTER_CLIENT_LIVENESS_H_
#define KVPOOL_MASTER_CLIENT_LIVENESS_H_

#include <cstdint>
#include <string_view>

#include <absl/container/flat_hash_map.h>

#include "common/clock.h"
#include "common/mutex.h"
#include "master/liveness_clock.h"

namespace kvpool {

// A client's id; all zero = none (an older client).
struct ClientId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool empty() const { return hi == 0 && lo == 0; }
  bool operator==(const ClientId& o) const { return hi == o.hi && lo == o.lo; }
  // From the 16 bytes of the wire; none for any other length.
  static ClientId FromBytes(std::string_view b);
  template <typename H>
  friend H AbslHashValue(H h, const ClientId& id) {
    return H::combine(std::move(h), id.hi, id.lo);
  }
};

class ClientLiveness {
 public:
  ClientLiveness(const Clock* clock, int64_t max_step_ms, int64_t ttl_ms,
                 size_t max_clients)
      : clock_(clock, max_step_ms), ttl_ms_(ttl_ms), max_(max_clients) {}

  // The client was heard from now. False when it is not tracked: no id, or
  // a new id while `max_clients` are tracked already.
  bool Touch(const ClientId& id) ABSL_LOCKS_EXCLUDED(mu_);
  // Tracked and silent for longer than the ttl: its puts are to be released.
  // A client never heard of (a master that restarted, an id the table had
  // no room for) is not dead.
  bool Dead(const ClientId& id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether any tracked client is dead now (a cheap test before a scan).
  bool AnyDead() const ABSL_LOCKS_EXCLUDED(mu_);
  // The liveness clock now (ms).
  int64_t Now() const { return clock_.Now(); }
  // Forgets the clients that were dead at `live_ms` (a Now() taken before
  // their puts were released) and have not been heard of since; returns
  // how many. One that died later keeps its entry until its puts are
  // released; one heard of again is tracked anew.
  size_t ForgetDeadAt(int64_t live_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Advances the liveness clock; every housekeeping tick.
  void Tick() { clock_.Tick(); }
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t ttl_ms() const { return ttl_ms_; }

 private:
  LivenessClock clock_;  // its own lock, taken under mu_
  const int64_t ttl_ms_;
  const size_t max_;
  mutable Mutex mu_;
  // Liveness-clock ms each client was last heard of.
  absl::flat_hash_map<ClientId, int64_t> last_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_CLIENT_LIVENESS_H_
