// Master leadership on etcd (docs/ha.md). Masters campaign by creating one
// key, attached to an etcd lease, with their address as its value; the one
// whose create succeeds leads until its lease ends. The key's create
// revision is the leader's *epoch*: etcd's revisions only grow, so every
// later leader has a larger epoch than every earlier one, and nodes can
// refuse anything an older leader says.
//
// A leader serves only while it is sure its lease is alive: it counts the
// lease's TTL from the moment it *sent* each keep-alive (etcd counts from
// when it received it, later), less a margin for clock rates, and stops the
// moment that time is up, renewed or not. So a leader cut off from etcd has
// stopped before etcd lets anyone else win.
#ifndef KVPOOL_HA_LEADER_ELECTION_H_
#define KVPOOL_HA_LEADER_ELECTION_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ha/etcd_client.h"

namespace kvpool::ha {

// The key a cluster's leader holds: "/kvpool/<cluster_id>/master".
std::string LeaderKey(const std::string& cluster_id);

struct LeaderInfo {
  std::string address;  // what the leader published (its gRPC host:port)
  uint64_t epoch = 0;   // the key's create revision
};

// Who leads now; nullopt while no one does (between a leader's end and its
// successor's win).
Result<std::optional<LeaderInfo>> FindLeader(EtcdClient* etcd,
                                             const std::string& key);

struct ElectionConfig {
  std::string key;    // LeaderKey(cluster_id)
  std::string value;  // the address clients should dial
  // The lease's TTL. etcd may grant more (its minimum is 1.5x its election
  // timeout, rounded up); the granted TTL is what counts.
  int64_t lease_ttl_s = 5;
  // How often a standby looks whether the key is gone.
  int poll_interval_ms = 100;
  // Held() ends this share of the TTL before etcd would end the lease,
  // whatever the keep-alives say: room for clocks running at different rates.
  double clock_margin = 0.1;
};

class LeaderElection {
 public:
  // `etcd` must outlive this object.
  LeaderElection(EtcdClient* etcd, ElectionConfig config);
  // Stops renewing; does not revoke (a crashed leader would not either).
  ~LeaderElection();

  // Blocks until this process leads, then returns its epoch and renews the
  // lease in the background until it is lost. UNAVAILABLE_IN_CURRENT_STATUS
  // if `*stop` became true first. `on_standby` is called (from this thread)
  // whenever the leader it waits behind changes.
  Result<uint64_t> Campaign(
      const std::atomic<bool>* stop,
      const std::function<void(const LeaderInfo&)>& on_standby = {});

  // Whether the lease is certainly still this process's. One atomic load
  // and a clock read: asked before every RPC. Once it has returned false it
  // stays false until a later Campaign wins, whatever renewal answers after.
  bool Held() const;
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Blocks until leadership is lost or `*stop` is true; true if lost.
  bool WaitLost(const std::atomic<bool>* stop);
  // Gives the leadership up at once: stops serving, revokes the lease so a
  // standby need not wait for its TTL. For a clean shutdown, and for a
  // leader that learns a newer epoch exists.
  void Resign(const std::string& why);

  int64_t granted_ttl_s() const { return granted_ttl_s_; }

 private:
  void RenewLoop(int64_t lease_id);
  void Lose(const std::string& why);
  void StopRenewing();
  static int64_t NowMs();

  EtcdClient* etcd_;
  ElectionConfig config_;
  int64_t granted_ttl_s_ = 0;
  // Steady clock; 0 = not leading. Mutable: Held() zeroes a lapsed time.
  mutable std::atomic<int64_t> held_until_ms_{0};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int64_t> lease_id_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool lost_ = false;           // guarded by mu_
  bool stop_renewing_ = false;  // guarded by mu_
  std::thread renewer_;
};

}  // namespace kvpool::ha

#endif  // KVPOOL_HA_LEADER_ELECTION_H_
