// Configuration objects of kvpool's public API.
#ifndef KVPOOL_OPTIONS_H_
#define KVPOOL_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvpool {

// How a client reaches a segment's bytes.
enum class TransportMode {
  kAuto,  // shared memory when the segment is on this host, TCP otherwise
  kShm,   // shared memory only: a remote segment is a TRANSFER_FAIL
  kTcp,   // TCP only, even on the same host
};

struct ClientConfig {
  std::string master_server_address = "127.0.0.1:50051";
  std::string tenant = "default";
  TransportMode transport = TransportMode::kAuto;
  int rpc_timeout_ms = 5000;
  // Data plane (TCP): a connect to a node fails after data_connect_timeout_ms;
  // a transfer fails once no byte has moved for data_io_timeout_ms, so a hung
  // node cannot hold a get longer than that (and a get with another replica
  // tries it next).
  int data_connect_timeout_ms = 5000;
  int data_io_timeout_ms = 30000;
  // PEM of the CA that signs the nodes' data plane certificates; set: TLS
  // to every node's TCP data server, whose certificate must name the host
  // of its data endpoint (docs/security.md). Empty: plaintext. Shared
  // memory transfers are unaffected.
  std::string data_tls_ca_file;
  // Reuse a replica list while this client still holds its read lease, so a
  // repeated get of a hot key costs no master round trip (the master keeps
  // leased memory from reuse, even across remove and upsert; a cached get
  // may return the value as of the lease, never other bytes). Off by default.
  bool lease_cache = false;
  // Prefetch-on-exist (off by default; with it off exist and get are
  // exactly as before).
  bool enable_ssd_prefetch = false;
  int64_t ssd_prefetch_dedup_ttl_sec = 30;  // 0 disables the dedup window
  int64_t ssd_prefetch_cooldown_sec =
      5;  // 0 disables the DRAM-pressure backoff

  // ---- identity and TLS on the control plane (docs/security.md) ----
  // A credential file written by `kvpool credential` (a tenant's or the
  // admin's), or the cluster secret file itself, which makes this client
  // `secret_role`. Empty: calls carry no credential (a master without
  // authentication). A tenant credential acts only on its own tenant, so
  // `tenant` must name it.
  std::string credential_file;
  // With the cluster secret as credential_file: "admin", or "router" /
  // "node" for infrastructure that acts through a Client.
  std::string secret_role = "admin";
  // PEM of the CA that signed the master's certificate; set: TLS to the
  // master (dial it by a name or address its certificate carries).
  std::string tls_ca_file;
  // PEM client certificate and key, for a master that requires one.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Placement wishes for a put, honoured by the master.
struct ReplicateConfig {
  int replica_num = 1;
  std::string preferred_segment;  // node id to place on first, optional
  std::vector<std::string> preferred_segments;  // then these, in order
  bool with_soft_pin = false;  // evicted only after unpinned objects
  // How long the soft pin lasts (renewed by each get); 0 = the master's
  // default_kv_soft_pin_ttl.
  int64_t soft_pin_ttl_ms = 0;
  bool with_hard_pin = false;  // never evicted
};

struct ExistOptions {
  // Probe without granting the read lease (Mooncake issue 3599: probe
  // leases keep hot keys from being evicted).
  bool grant_lease = true;
  // Start a best-effort SSD->DRAM promotion of existing SSD-only keys
  // (needs ClientConfig::enable_ssd_prefetch; never blocks the call).
  bool prefetch_to_memory = false;
};

// Per-key answer of the router-triggered prefetch (BatchPrefetchToMemory).
enum class PrefetchToMemoryStatus {
  kInMemory,            // already in DRAM (lease refreshed)
  kQueued,              // lease granted, promotion enqueued (idempotent)
  kThrottledWatermark,  // DRAM above the high watermark
  kThrottledCap,        // promotions in flight at the shared cap
  kNoLocalDisk,         // nothing on SSD to promote
  kNotFound,            // unknown key
};

// One replica as the tier lookup reports it.
struct ReplicaInfo {
  enum class Kind { kMemory, kLocalDisk } kind = Kind::kMemory;
  bool complete = false;
  std::string node_id;
  std::string data_endpoint;
  uint64_t segment_id = 0;
  uint64_t offset = 0;
};

// Result of the read-only tier lookup of one key (no lease, no side
// effects).
struct TierInfo {
  uint64_t size = 0;
  int64_t lease_remaining_ms = 0;  // <= 0: no live lease
  std::vector<ReplicaInfo> replicas;
  // "memory", "local_disk" or "processing": where a get would read from.
  std::string BestTier() const;
};

struct SegmentReport {
  uint64_t segment_id = 0;
  std::string node_id;
  std::string kind;  // "main" or "prefetch_buffer"
  uint64_t capacity = 0;
  uint64_t used = 0;
  std::string data_endpoint;
};

struct ClusterReport {
  uint64_t objects = 0;
  uint64_t memory_replicas = 0;
  uint64_t evictions = 0;
  std::vector<SegmentReport> segments;
};

}  // namespace kvpool

#endif  // KVPOOL_OPTIONS_H_
