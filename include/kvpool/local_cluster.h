// kvpool::LocalCluster: a master and N nodes inside this process, on
// loopback ports chosen by the kernel. The same code as the kvpool-master and
// kvpool-node binaries, so a test or demo on a LocalCluster exercises the real
// gRPC control plane and the real data plane.
#ifndef KVPOOL_LOCAL_CLUSTER_H_
#define KVPOOL_LOCAL_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvpool/client.h"
#include "kvpool/status.h"

namespace kvpool {

class MasterServer;
class Node;
struct MasterConfig;
struct NodeConfig;

// Each field carries the name and the default of the MasterConfig or
// NodeConfig field it sets, except the few that scripts/check_knobs.py
// lists (ALIASES, OVERRIDES, CLUSTER_ONLY); ctest knob_consistency fails
// when they disagree.
struct LocalClusterOptions {
  int num_nodes = 2;
  uint64_t segment_size = 64ull << 20;
  int master_port = 0;    // 0 = any free port
  int metrics_port = -1;  // master HTTP; -1 = off, 0 = any free port
  int64_t default_kv_lease_ttl = 10000;
  int64_t client_ttl = 10;  // s
  int64_t heartbeat_interval_ms = 1000;
  double eviction_high_watermark_ratio = 0.90;
  double eviction_ratio = 0.05;

  // SSD tier: each node gets <ssd_root>/node<i>; the master offloads.
  bool enable_ssd = false;
  std::string ssd_root;  // required with enable_ssd
  uint64_t ssd_capacity_bytes = 4ull << 30;
  uint64_t ssd_segment_file_size = 256ull << 20;
  std::string ssd_io_backend = "auto";
  bool offload_on_evict = false;
  bool offload_force_evict = false;
  bool promotion_on_hit = false;
  int64_t promotion_queue_limit = 50000;
  bool enable_prefetch_trigger = false;
  int64_t prefetch_trigger_lease_ttl_ms = 10000;
  int64_t prefetch_consumed_lease_ms = 0;
  bool prefetch_strict_buffer = true;
  uint64_t prefetch_buffer_size = 0;  // per node; 0 = no PREFETCH_BUFFER
  bool promotion_pull = false;
  int64_t promotion_pull_interval_ms = 100;
  int64_t promotion_max_per_pull = 32;
  int64_t promotion_read_batch = 1;
  uint64_t promotion_inflight_bytes = 0;  // 0 = the RFC's sequential worker
  int64_t promotion_workers = 8;
  bool promotion_drop_unreachable = false;      // NodeConfig's
  uint64_t ssd_read_share_bytes = 64ull << 20;  // NodeConfig's; 0 = off
  int64_t promotion_yield_to_gets_ms = 0;       // NodeConfig's; 0 = off
  int64_t promotion_skip_after_get_ms = 30000;  // NodeConfig's; 0 = off
  std::string prefetch_profile = "default";     // NodeConfig's; or "rfc"
  uint64_t promotion_staging_bytes = 0;         // NodeConfig's; 0 = off
  std::string segment_dir = "/dev/shm";         // NodeConfig's
  bool segment_prefault = true;                 // NodeConfig's
  bool segment_huge_pages = true;               // NodeConfig's
  int64_t promotion_task_ttl_sec = 600;
  // Master and nodes authenticate with this cluster secret file (clients
  // then need a credential: ClientConfig::credential_file). Empty: off.
  std::string cluster_secret_file;
  // Node i is "<node_id_prefix><i>" (its shm file is named after it, so two
  // clusters in one process need different prefixes).
  std::string node_id_prefix = "node";
  // TLS on the nodes' data plane (NodeConfig::data_tls_*): certificate and
  // key of every node, and the CA the nodes verify each other with.
  std::string data_tls_cert_file;
  std::string data_tls_key_file;
  std::string data_tls_ca_file;
  // MasterConfig::data_capabilities (off only to measure their cost).
  bool data_capabilities = true;
  // NodeConfig::dram_directory of every node.
  bool dram_directory = true;
  // MasterConfig's KV events publisher (docs/kv_events.md); a `*` port
  // takes a free one (MasterServer::events_publisher() has the bound one).
  std::string kv_events_endpoint;
  std::string kv_events_replay_endpoint;
  // Rolling-upgrade tests: behave as builds without the prefetch RPCs.
  bool emulate_pre_prefetch_master = false;
  bool emulate_pre_prefetch_holder = false;
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options = {});
  ~LocalCluster();
  Status Start();
  void Stop();

  std::string master_address() const;
  int metrics_port() const;
  size_t num_nodes() const { return nodes_.size(); }
  Node& node(size_t i) { return *nodes_[i]; }
  MasterServer& master() { return *master_; }
  // Stops node i as a crash would look to the master: no unmount, no more
  // heartbeats (its segment stays mapped so no reader faults).
  void CrashNode(size_t i);
  // Stops node i cleanly and starts it again with the same configuration
  // (same node id and SSD directory), as an operator restart would.
  Status RestartNode(size_t i);
  // A client of this cluster.
  Result<std::unique_ptr<Client>> NewClient(ClientConfig config = {}) const;

 private:
  LocalClusterOptions options_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<NodeConfig>> node_configs_;
};

}  // namespace kvpool

#endif  // KVPOOL_LOCAL_CLUSTER_H_
