// Every knob of kvpool-master, with Mooncake's names where it has one: the
// one declaration of each (name and default). tools/kvpool_master.cc makes
// each a --flag of the same name, which CLI11 also reads as a key of the
// file given with --config; docs/configuration.md has a row for each, and
// LocalClusterOptions copies of them keep the name and the default. ctest
// knob_consistency (scripts/check_knobs.py) fails when any of these
// disagree. Validated once at start-up; ToString prints every field.
#ifndef KVPOOL_MASTER_MASTER_CONFIG_H_
#define KVPOOL_MASTER_MASTER_CONFIG_H_

#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

struct MasterConfig {
  std::string rpc_address = "127.0.0.1";  // 0.0.0.0 to serve other hosts
  int rpc_port = 50051;                   // 0 = any free port
  int metrics_port = 9003;                // 0 = any free port, -1 = off
  int rpc_thread_num = 4;

  int64_t default_kv_lease_ttl = 10000;  // ms, granted by get and exist
  // Soft pin: how long (ms) a soft-pinned object outranks unpinned ones for
  // eviction, renewed by each get (Mooncake's default: 30 min); whether it
  // may be evicted at all once nothing unpinned is left.
  int64_t default_kv_soft_pin_ttl = 30 * 60 * 1000;
  bool allow_evict_soft_pinned_objects = true;
  double eviction_high_watermark_ratio = 0.90;
  double eviction_ratio = 0.05;  // share of capacity freed per pass
  int64_t put_start_discard_timeout_sec = 30;
  int64_t put_start_release_timeout_sec = 600;
  int64_t client_ttl = 10;  // s of heartbeat silence => node dead
  std::string allocation_strategy = "free_ratio_first";  // or "random"
  int64_t housekeeping_interval_ms = 100;

  // ---- SSD tier (off by default) ----
  bool enable_offload = false;    // copy DRAM values to holders' SSDs
  bool offload_on_evict = false;  // false: offload at PutEnd; true: at eviction
  bool offload_force_evict =
      false;  // may eviction drop a key with no SSD copy?
  int64_t offloading_queue_limit = 50000;
  int64_t offload_task_ttl_sec = 600;  // an unanswered offload task is dropped
  // A put that finds DRAM full of keys still being copied waits for copies
  // to land (each wakes it) for at most this long before NO_AVAILABLE_HANDLE.
  int64_t put_offload_wait_ms = 5000;
  // A remove or an upsert answers once every holder of a copy of the old
  // value has applied its deletion (one heartbeat hand-over), so no master
  // crash after the answer can let a node re-register the old value; at
  // most this long (a paused holder), then it answers anyway. 0 = no wait.
  int64_t holder_ack_timeout_ms = 1000;
  // A put answers only once the holders of its replicas have recorded it in
  // their directories (within holder_ack_timeout_ms), so a master crash
  // right after the answer cannot lose it: one heartbeat hand-over more per
  // put. Off: a put acknowledged within that hand-over before a master
  // crash may be lost (a miss, never wrong bytes).
  bool put_waits_for_holders = false;
  bool promotion_on_hit = false;  // promote SSD-only keys that gets hit
  int64_t promotion_admission_threshold = 2;
  int64_t promotion_queue_limit = 50000;  // promotions in flight, all paths
  int64_t promotion_max_per_heartbeat = 1;
  int64_t promotion_task_ttl_sec = 600;  // the reaper's deadline
  // Router-triggered prefetch (BatchPrefetchToMemory), off by default.
  bool enable_prefetch_trigger = false;
  // Lease granted at enqueue: covers the router -> engine get window.
  int64_t prefetch_trigger_lease_ttl_ms = 10000;
  // Router promotions land only in the holder's PREFETCH_BUFFER segment
  // (when it has one), never in the main cache; off: the buffer first, then
  // the main cache.
  bool prefetch_strict_buffer = true;
  // Recycling of the prefetch buffer (0 = off: a get of a buffered replica
  // renews the full default_kv_lease_ttl, as the RFC has it). When > 0, a get
  // of a replica that lives only in a prefetch buffer grants this shorter
  // lease (ms), and the get that consumes the last pending trigger of the
  // key drops the trigger's lease, so a consumed block leaves the buffer as
  // soon as its readers are done instead of holding it for a whole lease.
  int64_t prefetch_consumed_lease_ms = 0;
  // Sign data-plane capabilities (docs/security.md): each node gets a key
  // at mount and refuses every TCP range and SSD key without the master's
  // token. Off only to measure what they cost, or for a network where
  // anyone who can reach a node may read and write all of its memory: the
  // master then gives nodes no key and they serve unchecked, as with a
  // master older than capabilities.
  bool data_capabilities = true;
  // A put's (and a promotion's) write capability lives this long, plus 10 ms
  // per MiB of the value, at most put_start_discard_timeout_sec: the window
  // in which its writer may still write. A revoked or discarded put's range
  // is held longer than that; an object evicted or removed within it is not
  // (docs/security.md, "What is not protected yet").
  int64_t write_capability_ttl_ms = 5000;
  // Test-only: answer the additive prefetch RPCs as an older master would
  // (UNIMPLEMENTED), to prove callers degrade to a quiet no-op.
  bool emulate_pre_prefetch_master = false;

  // ---- limits on what a request may make the master keep ----
  // Longest key accepted, in bytes; at most the data plane's limit
  // (wire::kMaxKeySize), which could not carry a longer one.
  int64_t max_key_bytes = 4096;
  // Longest tenant name accepted, in bytes.
  int64_t max_tenant_name_bytes = 256;
  // Tenants (besides the default one) the master keeps at once: a request
  // that would create one more is refused with NO_AVAILABLE_HANDLE. A
  // tenant holding nothing any more is forgotten and no longer counts.
  int64_t max_tenants = 4096;
  // Slots of the table of version floors (8 bytes each, rounded down to a
  // power of two): the oldest version of a key a restarted node may
  // re-register. Keys share slots by hash; a shared slot only refuses a
  // copy that is older than another key's removal (a clean miss, never a
  // stale read), so fewer slots cost hit rate after restarts, not safety.
  // The tenants' table (remove_all) gets a sixteenth of it, at most 2^16.
  int64_t version_floor_slots = int64_t{1} << 20;
  // A gRPC connection that has not completed its HTTP/2 handshake (sent its
  // preface and settings) this long (ms) after it was accepted is closed, so
  // idle TCP connections cannot keep the master's descriptors.
  int64_t rpc_handshake_timeout_ms = 5000;
  // A gRPC connection with no call in progress for this long (ms) is closed
  // (GOAWAY; its client reconnects at its next call). 0 = never.
  int64_t rpc_max_connection_idle_ms = 300000;
  // Give freed heap memory back to the kernel (malloc_trim) once the
  // master's resident memory exceeds what it has in use by this much more
  // than after the last trim (checked once a second): what a burst of large
  // or refused requests leaves behind. 0 = never.
  uint64_t heap_trim_threshold_bytes = uint64_t{32} << 20;

  // ---- identity and TLS on the control plane (docs/security.md) ----
  // File holding the cluster secret (hex, mode 0600). Empty: no
  // authentication, every caller may call every RPC (the one-host demo).
  std::string cluster_secret_file;
  // How far a token's issue time may be from this master's clock (ms):
  // bounds both clock skew and how long a captured token can be replayed.
  int64_t auth_max_clock_skew_ms = 5 * 60 * 1000;
  // PEM files; both set: serve gRPC over TLS, else plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA; set: require client certificates that it signed.
  std::string tls_ca_file;

  // ---- high availability on etcd (docs/ha.md) ----
  // Several masters campaign for leadership in etcd; one serves, the others
  // wait as standbys. Off: one master, no etcd (the default).
  bool enable_ha = false;
  // etcd's client endpoints, "h1:2379;h2:2379" (',' works too).
  std::string etcd_endpoints;
  // Masters of one cluster share it; the leader key is
  // /kvpool/<cluster_id>/master.
  std::string cluster_id = "kvpool";
  // The leader's etcd lease, seconds: a crashed leader is replaced about
  // this long after it stopped renewing. 2 is the least etcd grants with
  // its default timings (1.5 x its 1 s election timeout, rounded up).
  int64_t ha_lease_ttl_sec = 2;
  // The host others dial to reach this master, published with the bound
  // port when it leads. Empty: rpc_address (which must then not be
  // 0.0.0.0).
  std::string ha_advertise_host;

  // ---- KV events (docs/kv_events.md), named as vLLM's KVEventsConfig ----
  // ZMQ PUB address the tier changes are published on, vLLM's KV-events
  // format ("tcp://127.0.0.1:5557"; a `*` port takes any free one). Empty:
  // no events (the default), and no cost on any path.
  std::string kv_events_endpoint;
  // ZMQ ROUTER address answering "every batch from sequence N" out of the
  // last kv_events_buffer_steps batches. Empty: no replay.
  std::string kv_events_replay_endpoint;
  // First frame of every published message (subscribers filter on it).
  std::string kv_events_topic;
  // Batches kept for replay (each at most 1024 events).
  int64_t kv_events_buffer_steps = 10000;
  // ZMQ send high-water mark (messages per subscriber): past it, PUB drops
  // for that subscriber, which then sees a gap; the master never waits.
  int64_t kv_events_hwm = 100000;
  // Tier changes queued for the publisher thread; when full, changes are
  // dropped (counted) and the next batch's sequence number skips one.
  int64_t kv_events_max_queue_size = 100000;

  // Checks ranges and names; returns INVALID_PARAMS with the offending knob.
  Status Validate() const;
  std::string ToString() const;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_CONFIG_H_
