// MasterService's reclaim of unfinished puts: those whose client died
// (ClientLiveness: silent for client_ttl) and those past
// put_start_release_timeout_sec; and ClientPing, which keeps a client
// alive. Split from master_service.cc and master_put.cc to keep each file
// to one concern; all implement the one MasterService class.
#include <algorithm>

#include "master/master_service.h"

namespace kvpool {

Result<int64_t> MasterService::ClientPing(const ClientId& client) {
  if (client.empty())
    return Status(ErrorCode::INVALID_PARAMS, "a ping names its client");
  if (!clients_.Touch(client)) {
    metrics_
        .GetCounter("kvpool_master_clients_untracked_total", "",
                    "pings and puts of a client the master could not track "
                    "(the table of clients was full): its puts are released "
                    "only after put_start_release_timeout_sec")
        .Inc();
  }
  return clients_.ttl_ms();
}

int64_t MasterService::DeadClientHoldUntil(const ObjectMeta& m,
                                           int64_t now) const {
  // Without capabilities a node takes a write whenever it arrives (a paused
  // node's socket buffer): held for the write grace, as a revoked put.
  if (!config_.data_capabilities) return now + kTaskGraceMs;
  // With them a node refuses the put's writes once its token has expired:
  // WriteGrantTtlMs after the put started (last_access_ms, while it is in
  // progress), signed a little later; a second covers that. Every later
  // owner of the range is granted a newer write generation, which the node
  // also refuses an older write for.
  return std::max(now, m.last_access_ms() + WriteGrantTtlMs(m.size) + 1000);
}

void MasterService::ReclaimPendingPuts(int64_t now) {
  const int64_t release_ms = config_.put_start_release_timeout_sec * 1000;
  const int64_t live = clients_.Now();
  // Without a dead client the scan only looks at the put timeouts.
  const bool any_dead = clients_.AnyDead();
  uint64_t reclaimed = 0, released_dead = 0;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    auto& shard = objects_.shard(i);
    MutexLock lock(&shard.mu());
    for (auto p = shard.pending_puts().begin();
         p != shard.pending_puts().end();) {
      // Asked now rather than from a list made before the scan: a client
      // heard of again meanwhile (a put of it just recorded) is alive.
      const bool dead = any_dead && clients_.Dead(p->second);
      bool still_pending = false;
      for (auto* table : {&shard.objects(), &shard.upserts()}) {
        auto it = table->find(p->first);
        if (it == table->end() || !it->second.HasProcessing()) continue;
        ObjectMeta& m = it->second;
        const bool timed_out = now - m.last_access_ms() >= release_ms;
        if (!timed_out && !dead) {
          still_pending = true;
          continue;
        }
        const int64_t not_before = timed_out ? 0 : DeadClientHoldUntil(m, now);
        ReleaseReplicas(m.TakeReplicas([](const Replica& r) {
          return r.status == ReplicaStatus::kProcessing;
        }),
                        not_before);
        ++(timed_out ? reclaimed : released_dead);
        if (!m.replicas.empty()) continue;
        if (table == &shard.objects()) {
          EraseObject(shard, it, 0);
        } else {
          const uint32_t tenant = it->first.tenant;
          table->erase(it);
          tenants_.Unref(tenant);
        }
      }
      p = still_pending ? std::next(p) : shard.pending_puts().erase(p);
    }
  }
  // Their puts are released: every put recorded since touched its client.
  if (any_dead) clients_.ForgetDeadAt(live);
  if (reclaimed) {
    metrics_
        .GetCounter(
            "kvpool_master_put_reclaimed_total", "",
            "unfinished puts reclaimed after put_start_release_timeout_sec")
        .Inc(reclaimed);
  }
  if (released_dead) {
    metrics_.GetCounter("kvpool_master_puts_released_dead_client_total")
        .Inc(released_dead);
  }
}

}  // namespace kvpool
