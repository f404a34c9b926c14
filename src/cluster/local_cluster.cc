#include "kvpool/local_cluster.h"

#include "master/master_server.h"
#include "node/node.h"

namespace kvpool {

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(options) {}

LocalCluster::~LocalCluster() { Stop(); }

Status LocalCluster::Start() {
  MasterConfig mc;
  mc.rpc_address = "127.0.0.1";
  mc.rpc_port = options_.master_port;
  mc.metrics_port = options_.metrics_port;
  mc.default_kv_lease_ttl = options_.default_kv_lease_ttl;
  mc.client_ttl = options_.client_ttl;
  mc.eviction_high_watermark_ratio = options_.eviction_high_watermark_ratio;
  mc.eviction_ratio = options_.eviction_ratio;
  mc.enable_offload = options_.enable_ssd;
  mc.offload_on_evict = options_.offload_on_evict;
  mc.offload_force_evict = options_.offload_force_evict;
  mc.promotion_on_hit = options_.promotion_on_hit;
  mc.promotion_queue_limit = options_.promotion_queue_limit;
  mc.enable_prefetch_trigger = options_.enable_prefetch_trigger;
  mc.prefetch_trigger_lease_ttl_ms = options_.prefetch_trigger_lease_ttl_ms;
  mc.prefetch_consumed_lease_ms = options_.prefetch_consumed_lease_ms;
  mc.prefetch_strict_buffer = options_.prefetch_strict_buffer;
  mc.promotion_task_ttl_sec = options_.promotion_task_ttl_sec;
  mc.emulate_pre_prefetch_master = options_.emulate_pre_prefetch_master;
  mc.data_capabilities = options_.data_capabilities;
  mc.cluster_secret_file = options_.cluster_secret_file;
  mc.kv_events_endpoint = options_.kv_events_endpoint;
  mc.kv_events_replay_endpoint = options_.kv_events_replay_endpoint;
  if (options_.enable_ssd && options_.ssd_root.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "enable_ssd needs ssd_root");
  }
  master_ = std::make_unique<MasterServer>(mc);
  if (Status s = master_->Start(); !s.ok()) return s;
  for (int i = 0; i < options_.num_nodes; ++i) {
    NodeConfig nc;
    nc.master_server_address = master_->address();
    nc.global_segment_size = options_.segment_size;
    nc.heartbeat_interval_ms = options_.heartbeat_interval_ms;
    nc.node_id = options_.node_id_prefix + std::to_string(i);
    nc.cluster_secret_file = options_.cluster_secret_file;
    nc.data_tls_cert_file = options_.data_tls_cert_file;
    nc.data_tls_key_file = options_.data_tls_key_file;
    nc.data_tls_ca_file = options_.data_tls_ca_file;
    nc.dram_directory = options_.dram_directory;
    nc.segment_dir = options_.segment_dir;
    nc.segment_prefault = options_.segment_prefault;
    nc.segment_huge_pages = options_.segment_huge_pages;
    nc.enable_ssd_offload = options_.enable_ssd;
    // The SSD knobs below reach a node only with its SSD tier: NodeConfig
    // refuses most of them without one.
    if (options_.enable_ssd) {
      nc.ssd_offload_path = options_.ssd_root + "/node" + std::to_string(i);
      nc.ssd_capacity_bytes = options_.ssd_capacity_bytes;
      nc.ssd_segment_file_size = options_.ssd_segment_file_size;
      nc.ssd_io_backend = options_.ssd_io_backend;
      nc.emulate_pre_prefetch_holder = options_.emulate_pre_prefetch_holder;
      nc.prefetch_buffer_segment = options_.prefetch_buffer_size;
      nc.promotion_pull = options_.promotion_pull;
      nc.promotion_pull_interval_ms = options_.promotion_pull_interval_ms;
      nc.promotion_max_per_pull = options_.promotion_max_per_pull;
      nc.promotion_read_batch = options_.promotion_read_batch;
      nc.promotion_inflight_bytes = options_.promotion_inflight_bytes;
      nc.promotion_workers = options_.promotion_workers;
      nc.promotion_drop_unreachable = options_.promotion_drop_unreachable;
      nc.ssd_read_share_bytes = options_.ssd_read_share_bytes;
      nc.promotion_yield_to_gets_ms = options_.promotion_yield_to_gets_ms;
      nc.promotion_skip_after_get_ms = options_.promotion_skip_after_get_ms;
      nc.promotion_staging_bytes = options_.promotion_staging_bytes;
      nc.prefetch_profile = options_.prefetch_profile;
    }
    auto node = std::make_unique<Node>(nc);
    if (Status s = node->Start(); !s.ok()) {
      Stop();
      return s;
    }
    nodes_.push_back(std::move(node));
    node_configs_.push_back(std::make_unique<NodeConfig>(nc));
  }
  return Status::OK();
}

void LocalCluster::Stop() {
  for (auto& n : nodes_) n->Stop();
  nodes_.clear();
  node_configs_.clear();
  if (master_) master_->Stop();
}

void LocalCluster::CrashNode(size_t i) { nodes_.at(i)->PauseHeartbeats(true); }

Status LocalCluster::RestartNode(size_t i) {
  nodes_.at(i)->Stop();
  nodes_[i] = std::make_unique<Node>(*node_configs_.at(i));
  return nodes_[i]->Start();
}

std::string LocalCluster::master_address() const { return master_->address(); }

int LocalCluster::metrics_port() const { return master_->metrics_port(); }

Result<std::unique_ptr<Client>> LocalCluster::NewClient(
    ClientConfig config) const {
  config.master_server_address = master_address();
  return Client::Create(config);
}

}  // namespace kvpool
