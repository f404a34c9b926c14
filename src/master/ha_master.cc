#include "master/ha_master.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/mutex.h"

namespace kvpool::ha {

namespace {
std::vector<std::string> EndpointsOrEmpty(const std::string& list) {
  auto e = ParseEndpoints(list);
  return e.ok() ? e.value() : std::vector<std::string>{};
}
}  // namespace

// The ServingGate of one term's server: open while its election holds the
// lease; otherwise it names the leader the standby waits behind.
class HaMaster::Gate : public ServingGate {
 public:
  uint64_t ServingEpoch() const override {
    LeaderElection* e = election_.load(std::memory_order_acquire);
    return e != nullptr && leading_.load(std::memory_order_acquire) && e->Held()
               ? e->epoch()
               : 0;
  }
  std::string NotServingReason() const override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return reason_;
  }
  void SupersededBy(uint64_t epoch) override {
    LeaderElection* e = election_.load(std::memory_order_acquire);
    if (e != nullptr && leading_.load()) {
      e->Resign("a node has seen epoch " + std::to_string(epoch));
    }
  }
  void Begin(LeaderElection* e) {
    leading_.store(false);
    election_.store(e, std::memory_order_release);
    SetReason("standby; no leader known yet");
  }
  void Lead() { leading_.store(true, std::memory_order_release); }
  void End(const std::string& why) {
    leading_.store(false);
    SetReason(why);
  }
  void SetReason(std::string r) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    reason_ = std::move(r);
  }

 private:
  std::atomic<LeaderElection*> election_{nullptr};
  std::atomic<bool> leading_{false};
  mutable Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_) = "starting";
};

HaMaster::HaMaster(MasterConfig config)
    : config_(std::move(config)),
      etcd_(EndpointsOrEmpty(config_.etcd_endpoints), 1000),
      gate_(std::make_shared<Gate>()) {}

HaMaster::~HaMaster() = default;

uint64_t HaMaster::serving_epoch() const { return gate_->ServingEpoch(); }

Status HaMaster::Run(const std::atomic<bool>* stop) {
  if (!config_.enable_ha) {
    return Status(ErrorCode::INVALID_PARAMS, "HaMaster needs enable_ha");
  }
  if (auto e = ParseEndpoints(config_.etcd_endpoints); !e.ok()) {
    return e.status();
  }
  if (!config_.put_waits_for_holders) {
    spdlog::warn(
        "enable_ha without put_waits_for_holders: a put acknowledged just "
        "before the leader dies can be missing on its successor (a miss, "
        "never wrong bytes); docs/ha.md");
  }
  // Renewals must be answered well within a third of the TTL.
  EtcdClient renew_etcd(EndpointsOrEmpty(config_.etcd_endpoints),
                        static_cast<int>(std::clamp<int64_t>(
                            config_.ha_lease_ttl_sec * 1000 / 4, 100, 1000)));
  while (!stop->load()) {
    // A fresh server, and so fresh tables, for every term.
    auto server = std::make_unique<MasterServer>(config_);
    server->set_gate(gate_);
    if (Status s = server->Start(); !s.ok()) return s;
    if (on_server_) on_server_(*server);
    const std::string host = config_.ha_advertise_host.empty()
                                 ? config_.rpc_address
                                 : config_.ha_advertise_host;
    const std::string advertised =
        host + ":" + std::to_string(server->rpc_port());
    ElectionConfig ec;
    ec.key = LeaderKey(config_.cluster_id);
    ec.value = advertised;
    ec.lease_ttl_s = config_.ha_lease_ttl_sec;
    LeaderElection election(&renew_etcd, ec);
    gate_->Begin(&election);
    spdlog::info("kvpool-master {}: standby in cluster {}, campaigning",
                 advertised, config_.cluster_id);
    auto won = election.Campaign(stop, [&](const LeaderInfo& l) {
      gate_->SetReason("standby; the leader is " + l.address + " (epoch " +
                       std::to_string(l.epoch) + ")");
      spdlog::info("kvpool-master {}: standby behind {} (epoch {})", advertised,
                   l.address, l.epoch);
    });
    if (!won.ok()) {  // stopped while a standby
      gate_->End("stopping");
      server->Stop();
      gate_->Begin(nullptr);
      break;
    }
    gate_->Lead();
    // Its KV events stream starts: a reset naming it and its epoch, then
    // what its calls changed (held back until now). After Lead: the
    // stream closes itself as soon as the gate stops serving this epoch.
    server->OpenEventStream(won.value(), advertised);
    terms_led_.fetch_add(1);
    spdlog::info(
        "kvpool-master {}: leading cluster {} as epoch {} (lease {} s); "
        "nodes re-register what they hold",
        advertised, config_.cluster_id, won.value(), election.granted_ttl_s());
    const bool lost = election.WaitLost(stop);
    // No longer the leader: whatever its tables do from here (a reaper
    // that wakes after a freeze, calls in flight) is not published.
    server->CloseEventStream();
    gate_->End(lost ? "lost the leadership of epoch " +
                          std::to_string(won.value())
                    : "stopping");
    if (!lost) election.Resign("stopping");
    server->Stop();
    gate_->Begin(nullptr);
    if (lost) {
      spdlog::warn(
          "kvpool-master {}: lost the leadership of epoch {}; starting over "
          "as a standby with empty tables",
          advertised, won.value());
    }
  }
  return Status::OK();
}

}  // namespace kvpool::ha
