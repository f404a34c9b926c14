// The store an arm runs on, behind one interface: in this process (a
// LocalCluster, the default), as separate processes (kvpool-master and one
// kvpool-node per node, started by the replay from the binaries next to it
// and stopped by PID at the end of the arm), so that engines and store do not
// share a process, or a cluster already running elsewhere (real hosts).
// Readings come from the master's and nodes' own status and metrics: in
// process directly, across processes over their HTTP /status and /metrics.
#ifndef KVPOOL_REPLAY_REPLAY_CLUSTER_H_
#define KVPOOL_REPLAY_REPLAY_CLUSTER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "replay/cluster_probe.h"

namespace kvpool::replay {

class ReplayCluster {
 public:
  virtual ~ReplayCluster() = default;
  virtual Status Start() = 0;
  virtual void Stop() = 0;
  virtual std::string master_address() const = 0;
  virtual size_t num_nodes() const = 0;
  virtual std::string node_id(size_t i) const = 0;
  virtual Result<std::unique_ptr<Client>> NewClient(
      ClientConfig config = {}) const = 0;
  virtual ClusterSnapshot Snapshot() = 0;
  virtual MasterCounters Counters() = 0;
  // Promotions node `i` reported, ok or failed.
  virtual uint64_t NodePromotions(size_t i, bool ok) = 0;
  // The store's processes other than this one, (label, pid), for CPU
  // accounting; empty in process.
  virtual std::vector<std::pair<std::string, int>> processes() const {
    return {};
  }
  // HTTP endpoints ("HOST:PORT", and "NODE_ID=HOST:PORT" per node) of a
  // cluster of processes; empty in process.
  virtual std::string master_http() const { return ""; }
  virtual std::vector<std::string> node_http() const { return {}; }
  // The master's KV events endpoints as bound (LocalClusterOptions'
  // kv_events_*), and the batches it has published; empty and 0 when it
  // publishes none or runs in another process.
  virtual std::string kv_events_endpoint() const { return ""; }
  virtual std::string kv_events_replay_endpoint() const { return ""; }
  virtual uint64_t kv_events_batches() const { return 0; }
};

enum class ClusterKind { kInProcess, kProcesses, kExternal };
bool ParseClusterKind(const std::string& s, ClusterKind* out);
const char* ClusterKindName(ClusterKind k);

// A cluster that is already running (kExternal), on this host or others:
// its master's gRPC address, its master's HTTP endpoint (--metrics_port),
// and optionally "NODE_ID=HOST:PORT" of its nodes' HTTP endpoints (for the
// holders' promotion counters; a node not named reads 0).
struct ExternalCluster {
  std::string master_address;
  std::string master_http;
  std::vector<std::string> node_http;
};

// `bin_dir` holds kvpool-master and kvpool-node (kProcesses only; empty =
// the directory of this executable). kExternal attaches to `external` and
// never stops it; the arm's options then do not apply (the cluster's own
// flags are the arm).
std::unique_ptr<ReplayCluster> MakeReplayCluster(
    ClusterKind kind, const LocalClusterOptions& o, const std::string& bin_dir,
    const ExternalCluster& external = {});

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPLAY_CLUSTER_H_
