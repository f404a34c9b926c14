// A kvpool-master that is one of several (docs/ha.md): it serves as a
// standby (every RPC refused with UNAVAILABLE, naming the leader),
// campaigns in etcd, leads while its lease surely holds, and when it loses
// the lease stops serving at once and starts over as a standby with empty
// tables (a term's tables are never reused: the next leader rebuilds them
// from the nodes).
#ifndef KVPOOL_MASTER_HA_MASTER_H_
#define KVPOOL_MASTER_HA_MASTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "ha/leader_election.h"
#include "master/master_server.h"

namespace kvpool::ha {

class HaMaster {
 public:
  // `config.enable_ha` must be set.
  explicit HaMaster(MasterConfig config);
  ~HaMaster();

  // Runs terms until `*stop`: each term a fresh MasterServer, standby until
  // it wins, then leader until the lease is lost. Returns OK when stopped
  // (resigning first when leading, so a standby takes over at once), or
  // the error that kept a server from starting.
  Status Run(const std::atomic<bool>* stop);

  // Called (from Run's thread) when a term's server is up, before its
  // campaign: tests read the port from it.
  void set_on_server(std::function<void(MasterServer&)> f) {
    on_server_ = std::move(f);
  }
  // The epoch it leads under now, 0 when it does not.
  uint64_t serving_epoch() const;
  uint64_t terms_led() const { return terms_led_.load(); }

 private:
  class Gate;
  MasterConfig config_;
  EtcdClient etcd_;
  std::shared_ptr<Gate> gate_;
  std::function<void(MasterServer&)> on_server_;
  std::atomic<uint64_t> terms_led_{0};
};

}  // namespace kvpool::ha

#endif  // KVPOOL_MASTER_HA_MASTER_H_
