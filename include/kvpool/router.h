// kvpool::Router: the reference router of the router-triggered prefetch
// (docs/router_prefetch.md). For each request it looks
// up the tiers of the prompt's block keys (read-only, no lease), triggers
// BatchPrefetchToMemory for the SSD-only blocks of the matched prefix, and
// picks an engine: one co-located with the holders of those blocks first,
// then the least loaded.
//
// Thread-safe. Several routers may trigger the same keys: the master's
// per-key promotion entry makes a re-trigger a no-op (QUEUED).
#ifndef KVPOOL_ROUTER_H_
#define KVPOOL_ROUTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvpool/options.h"
#include "kvpool/status.h"

namespace kvpool {

// An inference engine the router may dispatch to.
struct EngineInfo {
  std::string id;
  // kvpool node ids whose DRAM this engine reads locally (same host): blocks
  // held there are read without a network hop.
  std::vector<std::string> local_node_ids;
  std::string endpoint;  // opaque to the router (e.g. "http://10.0.0.5:8000")
  // Requests the engine runs at once (vLLM's max_num_seqs); the ones routed
  // beyond it wait in its queue. 0 = unknown: the deadline estimate assumes
  // no request waits.
  int max_running = 0;
  // KV loads the engine runs at once (its loaders), for an engine that
  // counts requests whose KV is loading as waiting (vLLM's v1 scheduler
  // does). Set, with a reported queue, the deadline counts loads: a request
  // behind `waiting` of them gets its blocks once waiting - max_loading + 1
  // loads have ended (EstimateReadDeadlineFromLoadsMs). 0 = unknown: the
  // deadline counts completions or admissions as before.
  int max_loading = 0;
};

struct RouterConfig {
  std::string master_server_address = "127.0.0.1:50051";
  std::vector<EngineInfo> engines;
  // Trigger BatchPrefetchToMemory for SSD-only blocks of the matched prefix.
  // Off: the router only looks up and dispatches.
  bool enable_prefetch = true;
  int rpc_timeout_ms = 5000;
  // ---- identity and TLS on the control plane (docs/security.md) ----
  // The cluster secret file (mode 0600): the router calls the master with
  // the router key derived from it. Empty: no credential.
  std::string cluster_secret_file;
  std::string tls_ca_file;  // PEM CA of the master's certificate; set: TLS
  // PEM client certificate and key, for a master that requires one.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA of the nodes' data plane certificates, for the PREFETCH calls
  // the router makes to nodes that serve TLS (ClientConfig).
  std::string data_tls_ca_file;
  // Deadline-aware prefetch (off by default: triggers carry no deadline).
  // Each trigger carries the router's estimate of when the chosen engine
  // reads the blocks: floor + slack x (requests queued ahead of this one x
  // the engine's mean time between completions while it had a queue). With
  // a queue but no measured completion yet, no deadline is sent.
  bool prefetch_deadline = false;
  int64_t prefetch_deadline_floor_ms = 100;  // route -> get, nothing ahead
  double prefetch_deadline_slack = 2.0;      // an early drop wastes a hit
  // With the engine's reported queue (Router::ReportQueue): time each
  // request ahead by the engine's measured admission rate (requests routed
  // minus waiting, over time, while it had a queue) instead of its time
  // between completions. Off: completions. An engine bound by its KV memory
  // admits several requests at one completion, or none at many.
  bool prefetch_deadline_by_admissions = false;
  // Dispatch (docs/router.md, "Dispatch policy"): each engine costs its
  // requests in flight plus affinity_weight x max(1, the mean requests in
  // flight per engine) x the share of the prefix's blocks held by nodes not
  // local to it; the cheapest wins. So affinity may leave one engine at
  // most this share of the mean load ahead of another. Negative: pure
  // affinity (the engine local to the top holder, whatever its load).
  double affinity_weight = 0.5;
  // ---- following the master's KV events (docs/kv_events.md, "kvpool-router
  // follows the stream") ----
  // The master's KV events PUB endpoint (its kv_events_endpoint, as a
  // connect address: tcp://master-host:5557). Set: the router keeps a tier
  // map from the stream and routes the blocks it has fresh state for
  // without a lookup; the others are looked up (one RPC) and written into
  // the map. Empty: every route looks its keys up.
  std::string kv_events_endpoint;
  // The master's replay socket: gaps are filled from it; without it every
  // gap makes the map stale (keys are then looked up as they are asked).
  std::string kv_events_replay_endpoint;
  std::string kv_events_topic;  // the master's kv_events_topic
  // Keys the tier map holds, over all tenants; past it the least recently
  // updated go (and unknown keys of their tenant are looked up).
  int64_t kv_events_map_capacity = 1000000;
};

struct RouteRequest {
  std::string request_id;
  std::string tenant = "default";
  std::vector<std::string> block_keys;  // in prompt order
};

// Where one block of the matched prefix is.
struct BlockTier {
  std::string tier;     // "memory", "local_disk" or "processing"
  std::string node_id;  // holder of the best replica
  uint64_t size = 0;
};

struct RouteDecision {
  std::string request_id;
  std::string engine_id;  // empty when no engine is configured
  // Blocks from the start of the prompt that the store holds (any tier).
  size_t matched_prefix = 0;
  std::vector<BlockTier> prefix_tiers;  // one per matched block
  size_t ssd_only_blocks = 0;           // of the matched prefix
  // Per SSD-only block of the prefix, in order, when a trigger was sent.
  std::vector<std::string> triggered_keys;
  std::vector<PrefetchToMemoryStatus> prefetch_statuses;
  // The deadline the trigger carried, ms from the trigger (0 = none).
  int64_t prefetch_deadline_ms = 0;
  // The master has the trigger switched off (or predates it): no prefetch,
  // the lookup and dispatch still happened.
  bool prefetch_disabled = false;
  bool affinity_hit = false;  // the engine is local to the prefix's holders
  // The trigger RPC failed (e.g. the master went away after the lookup).
  // Prefetch is only an acceleration: the request was dispatched anyway.
  std::string prefetch_error;
};

struct RouterStats {
  uint64_t requests = 0;
  uint64_t blocks_looked_up = 0;
  uint64_t ssd_only_blocks = 0;
  uint64_t triggered = 0;
  uint64_t queued = 0;
  uint64_t in_memory = 0;
  uint64_t throttled_watermark = 0;
  uint64_t throttled_cap = 0;
  uint64_t no_local_disk = 0;
  uint64_t not_found = 0;
  uint64_t affinity_hits = 0;
  uint64_t lookup_errors = 0;
  uint64_t prefetch_errors = 0;     // trigger RPCs that failed (not "disabled")
  uint64_t deadlines_sent = 0;      // triggers that carried a deadline
  std::vector<uint64_t> in_flight;  // per engine, in config order
  // Per engine, in config order: the last ReportQueue count, -1 if the
  // engine never reported (its deadlines use the in-flight estimate).
  std::vector<int64_t> reported_waiting;
  // Tier lookups sent to the master (one per route without events).
  uint64_t lookup_rpcs = 0;
  // ---- with kv_events_endpoint; zero without ----
  bool kv_events = false;
  uint64_t routes_from_map = 0;  // routes that sent no lookup
  uint64_t blocks_from_map = 0;  // prefix blocks the tier map answered
  uint64_t event_batches = 0;    // batches applied, live or replayed
  uint64_t event_gaps = 0;       // jumps in the live sequence numbers
  uint64_t event_replays = 0;    // gaps filled from the replay socket
  uint64_t event_resyncs = 0;    // gaps that could not be: the map went stale
  uint64_t event_restarts = 0;   // the numbers went down: a new master
  uint64_t event_next_seq = 0;   // the batch number expected next
  uint64_t map_keys = 0;         // keys the tier map holds
  uint64_t map_evictions = 0;    // keys it dropped for its capacity
};

class Router {
 public:
  // Fails only on an invalid config (empty address, duplicate engine ids,
  // an unusable secret or TLS file, a KV events endpoint ZMQ refuses).
  static Result<std::unique_ptr<Router>> Create(const RouterConfig& config);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Looks up (or, following the KV events, reads the tier map), triggers
  // and picks an engine; counts the request as in flight
  // on that engine until Complete(engine_id). INVALID_PARAMS for an empty or
  // over-long key list; RPC_FAIL when the master is unreachable.
  Result<RouteDecision> Route(const RouteRequest& request);
  // The engine finished a request routed to it (load accounting, and the
  // service rate of the deadline estimate).
  void Complete(const std::string& engine_id);
  // The engine's own count of requests waiting for admission, as a router
  // that scrapes its engines sees it (vLLM's vllm:num_requests_waiting,
  // SGLang's num_queue_reqs). Once an engine has reported, its deadline
  // estimate counts the reported queue instead of in-flight requests beyond
  // max_running: an engine whose admission is bound by its KV memory rather
  // than by max_num_seqs queues requests long before max_running are in
  // flight (docs/router_prefetch.md, "Deadlines"). Unknown engine: ignored.
  void ReportQueue(const std::string& engine_id, uint64_t waiting);

  RouterStats stats() const;
  const RouterConfig& config() const;

 private:
  struct State;
  explicit Router(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_H_
