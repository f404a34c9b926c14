// MasterConfig::ToString: the start-up log line shows every knob.
#include "master/master_config.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool {
namespace {

// Every field of MasterConfig (scripts/check_knobs.py fails when this
// struct gains a field ToString does not print).
TEST(MasterConfigTest, ToStringPrintsEveryField) {
  const std::string s = " " + MasterConfig().ToString();
  for (const char* name : {
           "rpc_address",
           "rpc_port",
           "metrics_port",
           "rpc_thread_num",
           "default_kv_lease_ttl",
           "default_kv_soft_pin_ttl",
           "allow_evict_soft_pinned_objects",
           "eviction_high_watermark_ratio",
           "eviction_ratio",
           "put_start_discard_timeout_sec",
           "put_start_release_timeout_sec",
           "client_ttl",
           "allocation_strategy",
           "housekeeping_interval_ms",
           "enable_offload",
           "offload_on_evict",
           "offload_force_evict",
           "offloading_queue_limit",
           "offload_task_ttl_sec",
           "put_offload_wait_ms",
           "holder_ack_timeout_ms",
           "put_waits_for_holders",
           "promotion_on_hit",
           "promotion_admission_threshold",
           "promotion_queue_limit",
           "promotion_max_per_heartbeat",
           "promotion_task_ttl_sec",
           "enable_prefetch_trigger",
           "prefetch_trigger_lease_ttl_ms",
           "prefetch_strict_buffer",
           "prefetch_consumed_lease_ms",
           "data_capabilities",
           "write_capability_ttl_ms",
           "emulate_pre_prefetch_master",
           "max_key_bytes",
           "max_tenant_name_bytes",
           "max_tenants",
           "version_floor_slots",
           "rpc_handshake_timeout_ms",
           "rpc_max_connection_idle_ms",
           "heap_trim_threshold_bytes",
           "cluster_secret_file",
           "auth_max_clock_skew_ms",
           "tls_cert_file",
           "tls_key_file",
           "tls_ca_file",
           "enable_ha",
           "etcd_endpoints",
           "cluster_id",
           "ha_lease_ttl_sec",
           "ha_advertise_host",
       }) {
    EXPECT_NE(s.find(std::string(" ") + name + "="), std::string::npos)
        << name << " missing from: " << s;
  }
}

TEST(MasterConfigTest, ToStringPrintsValues) {
  MasterConfig c;
  c.rpc_port = 1234;
  c.enable_ha = true;
  c.cluster_secret_file = "/etc/kvpool/secret";
  const std::string s = " " + c.ToString();
  EXPECT_NE(s.find(" rpc_address=\"127.0.0.1\""), std::string::npos) << s;
  EXPECT_NE(s.find(" rpc_port=1234"), std::string::npos) << s;
  EXPECT_NE(s.find(" enable_ha=true"), std::string::npos) << s;
  EXPECT_NE(s.find(" eviction_high_watermark_ratio=0.9"), std::string::npos)
      << s;
  EXPECT_NE(s.find(" cluster_secret_file=\"/etc/kvpool/secret\""),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(" etcd_endpoints=\"\""), std::string::npos) << s;
}

}  // namespace
}  // namespace kvpool
