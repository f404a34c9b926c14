// Every knob of a holder (kvpool-node, or a client that hosts a segment):
// the one declaration of each. tools/kvpool_node.cc makes each a --flag of
// the same name (and a --config key); ctest knob_consistency
// (scripts/check_knobs.py) checks the flags, LocalClusterOptions, the
// Python LocalCluster and docs/configuration.md against these defaults.
#ifndef KVPOOL_NODE_NODE_CONFIG_H_
#define KVPOOL_NODE_NODE_CONFIG_H_

#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

struct NodeConfig {
  std::string master_server_address = "127.0.0.1:50051";
  uint64_t global_segment_size = 64ull << 20;  // bytes of DRAM contributed
  // Where the segment files are created (same-host clients map them from
  // there). /dev/shm: 4 KiB pages. A tmpfs mounted with huge=always (or a
  // hugetlbfs mount, sizes then multiples of 2 MiB) gives the segment huge
  // pages: an O_DIRECT read of a 1 MiB block into it is one disk request
  // instead of two (docs/ssd_tier.md, "Huge pages for the segment").
  std::string segment_dir = "/dev/shm";
  // Zero and map every page of the node's segments in a background thread
  // from start (segment_populator.h), so no put pays the first touch of a
  // page. Mount and puts never wait for it. Off: each page is zeroed by
  // the first put into it (~3 us a page), in the node or in a same-host
  // client.
  bool segment_prefault = true;
  // Where segment_dir gives 4 KiB pages, mount a private tmpfs with
  // huge=within_size under it and create the segments there (2 MiB pages:
  // no reader pays page-table set-up per 4 KiB; segment_dir.h). Without
  // CAP_SYS_ADMIN or THP for tmpfs: a warning, and segment_dir as it is.
  bool segment_huge_pages = true;
  std::string local_hostname = "127.0.0.1";  // address peers use for data
  int data_port = 0;                         // TCP data server; 0 = any
  std::string data_bind_address = "127.0.0.1";
  int metrics_port = -1;  // -1 = no HTTP endpoint
  std::string node_id;    // empty = generated
  int64_t heartbeat_interval_ms = 1000;
  int data_threads = 2;
  int rpc_timeout_ms = 5000;
  // ---- identity and TLS on the control plane (docs/security.md) ----
  // The cluster secret file (mode 0600); this node calls the master with
  // the node key derived from it. Empty: no credential (a master without
  // authentication).
  std::string cluster_secret_file;
  // PEM of the CA that signed the master's certificate; set: TLS.
  std::string tls_ca_file;
  // PEM client certificate and key, for a master that requires one.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Keep a directory of this node's COMPLETE DRAM replicas (fed by the
  // master) and re-register it when the master restarts or after this node
  // was declared dead, so those values survive (docs/failure_model.md).
  bool dram_directory = true;

  // ---- SSD tier (off by default) ----
  bool enable_ssd_offload = false;
  std::string ssd_offload_path;  // required when enabled
  uint64_t ssd_capacity_bytes = 4ull << 30;
  uint64_t ssd_segment_file_size = 256ull << 20;
  int64_t ssd_gc_interval_ms = 1000;
  int64_t ssd_eviction_interval_ms = 500;
  std::string ssd_io_backend = "auto";  // auto, io_uring, pread
  // Threads that verify checksums of multi-value SSD reads (0 = the reader).
  unsigned ssd_verify_threads = 1;
  // ---- router-triggered prefetch (docs/router_prefetch.md) ----
  // Bytes of a second DRAM segment of kind PREFETCH_BUFFER where router
  // promotions from this holder's SSD land (0 = none).
  uint64_t prefetch_buffer_segment = 0;
  // The promotion pull thread (off: promotions ride the long-poll
  // heartbeat, which hands them over at once).
  bool promotion_pull = false;
  int64_t promotion_pull_interval_ms = 100;
  int64_t promotion_max_per_pull = 32;
  int64_t promotion_read_batch = 1;  // SSD reads per worker submission
  // 0: the RFC's single sequential promotion worker. > 0: the pipelined
  // executor, `promotion_workers` threads with at most this many promotion
  // bytes in flight (SsdTierConfig).
  uint64_t promotion_inflight_bytes = 0;
  int64_t promotion_workers = 8;
  // Drop a task unread, as expired, when the batch taken now could not land
  // before its deadline (SsdTierConfig's). Off: only a passed deadline does.
  bool promotion_drop_unreachable = false;
  // Bytes a get's SSD read may keep for a queued promotion of the same key,
  // so one disk read serves both (SharedReads). 0: off, every promotion
  // reads the disk. On by default (docs/prefetch_defaults.md): inert until
  // a promotion waits for a key a get reads; only with enable_ssd_offload.
  uint64_t ssd_read_share_bytes = 64ull << 20;
  // Gets' SSD reads before promotions' (GetsFirst): while a get reads this
  // holder's disk, a promotion waits up to this long before submitting its
  // reads. 0 (the default): off, first come first served.
  int64_t promotion_yield_to_gets_ms = 0;
  // Prefetch promotions that come after their get (SsdTierConfig's): one
  // whose block exactly one get read from this holder's disk within this
  // many ms, leaving no bytes to take, is dropped rather than read again.
  // 0: off. On by default (docs/prefetch_defaults.md).
  int64_t promotion_skip_after_get_ms = 30000;
  // "default": the knobs above as set. "rfc": the seeds' literal holder,
  // whatever they say: every promotion reads the disk (no shared reads, no
  // skip after a get, no yield to gets, no drop before the deadline) on the
  // RFC's single sequential worker, one read per submission, no staging.
  std::string prefetch_profile = "default";
  // Huge-page staging memory for promotion reads (SsdTierConfig's); 0: off.
  uint64_t promotion_staging_bytes = 0;

  // Grace (ms) past a data-plane capability's expiry before this node
  // refuses it: the bound on how far its wall clock may lag the master's
  // (docs/security.md). 0 for hosts on one clock or with NTP.
  int64_t capability_clock_skew_ms = 0;
  // Bounds of the TCP data server (TcpDataServerOptions): connections at
  // once (0 = the open-file limit less 256), idle seconds before a
  // connection is closed, bytes all requests in flight may hold.
  uint64_t data_max_connections = 0;
  int64_t data_idle_timeout_ms = 60000;
  uint64_t data_max_buffered_bytes = uint64_t{1} << 30;
  // TLS on the TCP data plane (docs/security.md), off by default. With a
  // PEM certificate and key the data server serves TLS only; its
  // certificate must name local_hostname, the host peers dial (an IP SAN for an
  // address). data_tls_ca_file verifies the nodes this node writes
  // promotions into: set it when the other nodes serve TLS.
  std::string data_tls_cert_file;
  std::string data_tls_key_file;
  std::string data_tls_ca_file;

  // Test-only: serve no PREFETCH requests, as a holder built before
  // prefetch-on-exist would.
  bool emulate_pre_prefetch_holder = false;

  Status Validate() const;
  // The knobs the holder runs with: these, or under prefetch_profile "rfc"
  // these with every holder behaviour beyond the seeds turned off.
  NodeConfig WithPrefetchProfile() const;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_NODE_CONFIG_H_
