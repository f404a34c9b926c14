// Configuration objects of the Mooncake-compatible store (the Python
// kvpool.mooncake.MooncakeDistributedStore and the C API share them): the
// arguments of Mooncake's setup() and its ReplicateConfig, and their
// translation to kvpool's own types.
#ifndef KVPOOL_CAPI_COMPAT_CONFIG_H_
#define KVPOOL_CAPI_COMPAT_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvpool/options.h"
#include "kvpool/status.h"

namespace kvpool::compat {

// Mooncake's SoftPinAction (same values): what a put does to the object's
// soft pin. kvpool's master takes the pin with the put, so PRESERVE means
// "as with_soft_pin says".
enum class SoftPinAction : uint8_t {
  kPreserve = 0,
  kEnable = 1,
  kDisable = 2,
};

// ReplicateConfig as Mooncake's Python class exposes it.
struct MooncakeReplicateConfig {
  int64_t replica_num = 1;
  bool with_soft_pin = false;
  SoftPinAction soft_pin_action = SoftPinAction::kPreserve;
  // Unset: the master's default_kv_soft_pin_ttl. 0: no soft pin (Mooncake
  // registers none for a zero TTL). > 0: this TTL. Set only with a soft pin
  // (ENABLE, or PRESERVE with with_soft_pin), else INVALID_PARAMS.
  std::optional<uint64_t> soft_pin_ttl_ms;
  bool with_hard_pin = false;
  std::string preferred_segment;
  std::vector<std::string> preferred_segments;
  // Accepted for compatibility; kvpool places by the preferred segments.
  bool prefer_alloc_in_same_node = false;
  // Mooncake's object groups (evicted and removed together there). Kept and
  // shown; kvpool places and evicts each key on its own (docs/python.md).
  std::optional<std::vector<std::string>> group_ids;
};

// INVALID_PARAMS for replica_num outside [1, 64], or a TTL without a soft
// pin.
Result<ReplicateConfig> ToReplicateConfig(const MooncakeReplicateConfig& rc);

// The arguments of Mooncake's setup(), plus kvpool's own keys (setup(dict)
// only). metadata_server, protocol and rdma_devices are accepted and not
// used: bytes move over shared memory on one host and TCP otherwise.
struct SetupConfig {
  std::string local_hostname = "localhost";  // "host" or "host:port"
  std::string metadata_server;
  uint64_t global_segment_size = 16ull << 20;  // 0 = pure client
  uint64_t local_buffer_size = 16ull << 20;
  std::string protocol = "tcp";
  std::string rdma_devices;
  std::string master_server_addr = "127.0.0.1:50051";

  std::string tenant = "default";
  TransportMode transport = TransportMode::kAuto;
  int rpc_timeout_ms = 5000;
  int data_connect_timeout_ms = 5000;  // ClientConfig's data-plane limits
  int data_io_timeout_ms = 30000;
  bool lease_cache = false;
  bool enable_ssd_prefetch = false;
  int64_t heartbeat_interval_ms = 1000;
  bool enable_ssd_offload = false;  // the hosted segment spills to SSD
  std::string ssd_offload_path;
  uint64_t ssd_capacity_bytes = 4ull << 30;
  // Identity and TLS on the control plane (docs/security.md), as in
  // ClientConfig: the client presents credential_file, or the cluster
  // secret file (admin) when only that is given; a hosted segment's node
  // needs cluster_secret_file.
  std::string credential_file;
  std::string cluster_secret_file;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;

  Status Validate() const;
};

// A size as Mooncake's setup() takes it: a number (decimals allowed) and an
// optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (powers of 1024,
// any case), with or without a space between ("16MB", "16 MB", "1.5 GB").
// Anything else, a percentage among them, is INVALID_PARAMS.
Result<uint64_t> ParseMooncakeSize(const std::string& text);

// setup(config_dict): every value arrives as a string (Python passes str()
// of it); sizes take suffixes ("4GiB"), booleans true/false/1/0. Mooncake's
// key names, their aliases (device_name, master_server_address) and the
// kvpool keys above. Unknown keys are ignored, as Mooncake does.
Result<SetupConfig> SetupConfigFromDict(
    const std::map<std::string, std::string>& dict);

}  // namespace kvpool::compat

#endif  // KVPOOL_CAPI_COMPAT_CONFIG_H_
