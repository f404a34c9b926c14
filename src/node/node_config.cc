// NodeConfig's checks, apart from the node itself so that a tool can check
// a configuration without starting one.
#include <string>

#include "node/node_config.h"

namespace kvpool {

Status NodeConfig::Validate() const {
  auto bad = [](const std::string& m) {
    return Status(ErrorCode::INVALID_PARAMS, m);
  };
  if (master_server_address.empty())
    return bad("master_server_address is required");
  if (global_segment_size == 0) return bad("global_segment_size must be > 0");
  if (data_port < 0 || data_port > 65535) return bad("data_port out of range");
  if (heartbeat_interval_ms <= 0)
    return bad("heartbeat_interval_ms must be > 0");
  if (data_threads <= 0) return bad("data_threads must be > 0");
  if (rpc_timeout_ms <= 0) return bad("rpc_timeout_ms must be > 0");
  if (segment_dir.empty() || segment_dir.front() != '/')
    return bad("segment_dir must be an absolute path");
  if (data_tls_cert_file.empty() != data_tls_key_file.empty()) {
    return bad("data_tls_cert_file and data_tls_key_file go together");
  }
  if (enable_ssd_offload && ssd_offload_path.empty()) {
    return bad("enable_ssd_offload needs ssd_offload_path");
  }
  if (enable_ssd_offload && ssd_capacity_bytes == 0)
    return bad("ssd_capacity_bytes must be > 0");
  if (promotion_pull_interval_ms <= 0)
    return bad("promotion_pull_interval_ms must be > 0");
  if (promotion_max_per_pull <= 0 || promotion_max_per_pull > 1024)
    return bad("promotion_max_per_pull must be in [1, 1024]");
  if (promotion_read_batch <= 0 || promotion_read_batch > 1024)
    return bad("promotion_read_batch must be in [1, 1024]");
  if (promotion_workers <= 0 || promotion_workers > 64)
    return bad("promotion_workers must be in [1, 64]");
  if (promotion_staging_bytes > (64ull << 30))
    return bad("promotion_staging_bytes must be at most 64GiB");
  if (promotion_staging_bytes > 0 && !enable_ssd_offload)
    return bad("promotion_staging_bytes needs enable_ssd_offload");
  if (promotion_yield_to_gets_ms < 0 || promotion_yield_to_gets_ms > 10000)
    return bad("promotion_yield_to_gets_ms must be in [0, 10000]");
  if (promotion_yield_to_gets_ms > 0 && !enable_ssd_offload)
    return bad("promotion_yield_to_gets_ms needs enable_ssd_offload");
  if (promotion_skip_after_get_ms < 0 || promotion_skip_after_get_ms > 3600000)
    return bad("promotion_skip_after_get_ms must be in [0, 3600000]");
  if (prefetch_profile != "default" && prefetch_profile != "rfc")
    return bad("prefetch_profile must be \"default\" or \"rfc\", not \"" +
               prefetch_profile + "\"");
  if (promotion_inflight_bytes > 0 && !enable_ssd_offload)
    return bad("promotion_inflight_bytes needs enable_ssd_offload");
  if ((prefetch_buffer_segment > 0 || promotion_pull) && !enable_ssd_offload)
    return bad(
        "prefetch_buffer_segment and promotion_pull need enable_ssd_offload");
  return Status::OK();
}

NodeConfig NodeConfig::WithPrefetchProfile() const {
  NodeConfig c = *this;
  if (prefetch_profile != "rfc") return c;
  c.ssd_read_share_bytes = 0;
  c.promotion_skip_after_get_ms = 0;
  c.promotion_yield_to_gets_ms = 0;
  c.promotion_drop_unreachable = false;
  c.promotion_inflight_bytes = 0;
  c.promotion_read_batch = 1;
  c.promotion_staging_bytes = 0;
  return c;
}

}  // namespace kvpool
