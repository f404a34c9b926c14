#include "master/master_config.h"

#include <iterator>
#include <type_traits>

#include <fmt/format.h>

#include "transport/wire_format.h"

namespace kvpool {

Status MasterConfig::Validate() const {
  auto bad = [](const std::string& m) {
    return Status(ErrorCode::INVALID_PARAMS, m);
  };
  if (enable_ha) {
    if (etcd_endpoints.empty()) return bad("enable_ha needs etcd_endpoints");
    if (cluster_id.empty() || cluster_id.find('/') != std::string::npos)
      return bad("cluster_id must be non-empty and without '/'");
    if (ha_lease_ttl_sec < 1 || ha_lease_ttl_sec > 600)
      return bad("ha_lease_ttl_sec must be in [1, 600]");
    if (ha_advertise_host.empty() && rpc_address == "0.0.0.0")
      return bad(
          "enable_ha with rpc_address 0.0.0.0 needs ha_advertise_host (the "
          "address other hosts dial)");
  }
  if (rpc_port < 0 || rpc_port > 65535) return bad("rpc_port out of range");
  if (metrics_port < -1 || metrics_port > 65535)
    return bad("metrics_port out of range");
  if (default_kv_lease_ttl <= 0) return bad("default_kv_lease_ttl must be > 0");
  if (default_kv_soft_pin_ttl <= 0 || default_kv_soft_pin_ttl > UINT32_MAX)
    return bad("default_kv_soft_pin_ttl must be in (0, 2^32) ms");
  if (!(eviction_high_watermark_ratio > 0 &&
        eviction_high_watermark_ratio <= 1)) {
    return bad("eviction_high_watermark_ratio must be in (0, 1]");
  }
  if (!(eviction_ratio > 0 && eviction_ratio <= 1))
    return bad("eviction_ratio must be in (0, 1]");
  if (put_start_discard_timeout_sec <= 0 ||
      put_start_release_timeout_sec < put_start_discard_timeout_sec) {
    return bad(
        "need 0 < put_start_discard_timeout_sec <= "
        "put_start_release_timeout_sec");
  }
  if (client_ttl <= 0) return bad("client_ttl must be > 0");
  if (write_capability_ttl_ms < 100)
    return bad("write_capability_ttl_ms must be >= 100");
  if (allocation_strategy != "random" &&
      allocation_strategy != "free_ratio_first") {
    return bad("allocation_strategy must be random or free_ratio_first");
  }
  if (housekeeping_interval_ms <= 0)
    return bad("housekeeping_interval_ms must be > 0");
  if (offloading_queue_limit < 0)
    return bad("offloading_queue_limit must be >= 0");
  if (offload_task_ttl_sec <= 0) return bad("offload_task_ttl_sec must be > 0");
  if (put_offload_wait_ms < 0) return bad("put_offload_wait_ms must be >= 0");
  if (holder_ack_timeout_ms < 0)
    return bad("holder_ack_timeout_ms must be >= 0");
  if (prefetch_trigger_lease_ttl_ms <= 0)
    return bad("prefetch_trigger_lease_ttl_ms must be > 0");
  if (prefetch_consumed_lease_ms < 0)
    return bad("prefetch_consumed_lease_ms must be >= 0");
  if (promotion_admission_threshold < 0)
    return bad("promotion_admission_threshold must be >= 0");
  if (promotion_queue_limit < 0)
    return bad("promotion_queue_limit must be >= 0");
  if (promotion_max_per_heartbeat < 0)
    return bad("promotion_max_per_heartbeat must be >= 0");
  if (promotion_task_ttl_sec <= 0)
    return bad("promotion_task_ttl_sec must be > 0");
  if (max_key_bytes < 1 || max_key_bytes > int64_t(wire::kMaxKeySize)) {
    return bad(fmt::format(
        "max_key_bytes must be in [1, {}] (the data plane's key limit)",
        wire::kMaxKeySize));
  }
  if (max_tenant_name_bytes < 1 ||
      max_tenant_name_bytes > int64_t(wire::kMaxTenantSize)) {
    return bad(fmt::format(
        "max_tenant_name_bytes must be in [1, {}] (the data plane's limit)",
        wire::kMaxTenantSize));
  }
  // Tenant ids are 32-bit and skip those in use when they wrap.
  if (max_tenants < 0 || max_tenants > (int64_t{1} << 30))
    return bad("max_tenants must be in [0, 2^30]");
  if (version_floor_slots < 1 || version_floor_slots > (int64_t{1} << 30))
    return bad("version_floor_slots must be in [1, 2^30]");
  if (rpc_handshake_timeout_ms < 100 || rpc_handshake_timeout_ms > 600000)
    return bad("rpc_handshake_timeout_ms must be in [100, 600000]");
  if (rpc_max_connection_idle_ms < 0 ||
      (rpc_max_connection_idle_ms > 0 && rpc_max_connection_idle_ms < 1000) ||
      rpc_max_connection_idle_ms > INT32_MAX)
    return bad("rpc_max_connection_idle_ms must be 0 or in [1000, 2^31)");
  // A day at most: beyond it the window stops bounding replays at all.
  if (auth_max_clock_skew_ms <= 0 || auth_max_clock_skew_ms > 86400000)
    return bad("auth_max_clock_skew_ms must be in (0, 86400000]");
  if (tls_cert_file.empty() != tls_key_file.empty())
    return bad("tls_cert_file and tls_key_file go together");
  if (!tls_ca_file.empty() && tls_cert_file.empty())
    return bad("tls_ca_file needs tls_cert_file and tls_key_file");
  if (!kv_events_replay_endpoint.empty() && kv_events_endpoint.empty())
    return bad("kv_events_replay_endpoint needs kv_events_endpoint");
  if (kv_events_buffer_steps < 0 || kv_events_buffer_steps > 10000000)
    return bad("kv_events_buffer_steps must be in [0, 10^7]");
  if (kv_events_hwm < 0 || kv_events_hwm > INT32_MAX)
    return bad("kv_events_hwm must be in [0, 2^31) (0 = no limit)");
  if (kv_events_max_queue_size < 1 || kv_events_max_queue_size > 100000000)
    return bad("kv_events_max_queue_size must be in [1, 10^8]");
  return Status::OK();
}

std::string MasterConfig::ToString() const {
  // Every field, as name=value in declaration order, so the start-up log
  // shows the whole configuration (scripts/check_knobs.py checks that each
  // field is here). Strings are quoted, so an empty one shows as "".
  std::string out;
  auto add = [&out](const char* name, const auto& value) {
    if (!out.empty()) out += ' ';
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
      fmt::format_to(std::back_inserter(out), "{}=\"{}\"", name, value);
    } else {
      fmt::format_to(std::back_inserter(out), "{}={}", name, value);
    }
  };
#define KVPOOL_ADD(field) add(#field, field)
  KVPOOL_ADD(rpc_address);
  KVPOOL_ADD(rpc_port);
  KVPOOL_ADD(metrics_port);
  KVPOOL_ADD(rpc_thread_num);
  KVPOOL_ADD(default_kv_lease_ttl);
  KVPOOL_ADD(default_kv_soft_pin_ttl);
  KVPOOL_ADD(allow_evict_soft_pinned_objects);
  KVPOOL_ADD(eviction_high_watermark_ratio);
  KVPOOL_ADD(eviction_ratio);
  KVPOOL_ADD(put_start_discard_timeout_sec);
  KVPOOL_ADD(put_start_release_timeout_sec);
  KVPOOL_ADD(client_ttl);
  KVPOOL_ADD(allocation_strategy);
  KVPOOL_ADD(housekeeping_interval_ms);
  KVPOOL_ADD(enable_offload);
  KVPOOL_ADD(offload_on_evict);
  KVPOOL_ADD(offload_force_evict);
  KVPOOL_ADD(offloading_queue_limit);
  KVPOOL_ADD(offload_task_ttl_sec);
  KVPOOL_ADD(put_offload_wait_ms);
  KVPOOL_ADD(holder_ack_timeout_ms);
  KVPOOL_ADD(put_waits_for_holders);
  KVPOOL_ADD(promotion_on_hit);
  KVPOOL_ADD(promotion_admission_threshold);
  KVPOOL_ADD(promotion_queue_limit);
  KVPOOL_ADD(promotion_max_per_heartbeat);
  KVPOOL_ADD(promotion_task_ttl_sec);
  KVPOOL_ADD(enable_prefetch_trigger);
  KVPOOL_ADD(prefetch_trigger_lease_ttl_ms);
  KVPOOL_ADD(prefetch_strict_buffer);
  KVPOOL_ADD(prefetch_consumed_lease_ms);
  KVPOOL_ADD(data_capabilities);
  KVPOOL_ADD(write_capability_ttl_ms);
  KVPOOL_ADD(emulate_pre_prefetch_master);
  KVPOOL_ADD(max_key_bytes);
  KVPOOL_ADD(max_tenant_name_bytes);
  KVPOOL_ADD(max_tenants);
  KVPOOL_ADD(version_floor_slots);
  KVPOOL_ADD(rpc_handshake_timeout_ms);
  KVPOOL_ADD(rpc_max_connection_idle_ms);
  KVPOOL_ADD(heap_trim_threshold_bytes);
  KVPOOL_ADD(cluster_secret_file);
  KVPOOL_ADD(auth_max_clock_skew_ms);
  KVPOOL_ADD(tls_cert_file);
  KVPOOL_ADD(tls_key_file);
  KVPOOL_ADD(tls_ca_file);
  KVPOOL_ADD(enable_ha);
  KVPOOL_ADD(etcd_endpoints);
  KVPOOL_ADD(cluster_id);
  KVPOOL_ADD(ha_lease_ttl_sec);
  KVPOOL_ADD(ha_advertise_host);
  KVPOOL_ADD(kv_events_endpoint);
  KVPOOL_ADD(kv_events_replay_endpoint);
  KVPOOL_ADD(kv_events_topic);
  KVPOOL_ADD(kv_events_buffer_steps);
  KVPOOL_ADD(kv_events_hwm);
  KVPOOL_ADD(kv_events_max_queue_size);
#undef KVPOOL_ADD
  return out;
}

}  // namespace kvpool
