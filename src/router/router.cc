#include "kvpool/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_set>

#include "events/kv_event_subscriber.h"
#include "events/tier_map.h"
#include "kvpool/client.h"
#include "router/dispatch.h"
#include "router/prefix_tiers.h"
#include "router/read_deadline.h"
#include "rpc/master_client.h"

namespace kvpool {

namespace {

// The master's limits (master_service.h kMaxKeyLength, the gRPC batch
// bound): checked here so a bad request fails as INVALID_PARAMS before any
// RPC instead of as a per-key error the prefix scan would misread as a miss.
constexpr size_t kMaxKeyLength = 4096;
constexpr size_t kMaxBlocks = 65536;
// One Client (one gRPC channel) per tenant: tenant names come from the
// request, so the map is bounded against a caller that invents them.
constexpr size_t kMaxTenants = 4096;

}  // namespace

struct Router::State {
  RouterConfig config;

  std::mutex clients_mu;
  std::map<std::string, std::unique_ptr<Client>> clients;  // by tenant

  // Pick and increment under one lock: two concurrent routes must not both
  // see the same engine as the least loaded.
  mutable std::mutex load_mu;
  std::vector<uint64_t> in_flight;       // indexed like config.engines
  std::vector<ServiceInterval> service;  // likewise, for the deadline
  // Requests routed to each engine in all, and its admission rate from
  // them and its reported queue (prefetch_deadline_by_admissions).
  std::vector<uint64_t> routed;
  std::vector<AdmissionInterval> admissions;
  // The engine's last reported waiting queue (ReportQueue); -1: never.
  std::vector<int64_t> reported_waiting;

  std::atomic<uint64_t> requests{0}, blocks_looked_up{0}, ssd_only_blocks{0},
      triggered{0}, queued{0}, in_memory{0}, throttled_watermark{0},
      throttled_cap{0}, no_local_disk{0}, not_found{0}, affinity_hits{0},
      lookup_errors{0}, prefetch_errors{0}, deadlines_sent{0}, lookup_rpcs{0},
      routes_from_map{0}, blocks_from_map{0};

  // With kv_events_endpoint: the map the subscriber's thread writes and
  // routes read (the subscriber goes first: it writes into the map).
  std::unique_ptr<events::TierMap> tier_map;
  std::unique_ptr<events::KvEventSubscriber> subscriber;

  Result<Client*> ClientFor(const std::string& tenant) {
    std::lock_guard<std::mutex> lock(clients_mu);
    auto it = clients.find(tenant);
    if (it != clients.end()) return it->second.get();
    if (clients.size() >= kMaxTenants) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "router: too many tenants (limit " +
                        std::to_string(kMaxTenants) + ")");
    }
    ClientConfig cc;
    cc.master_server_address = config.master_server_address;
    cc.tenant = tenant;
    cc.rpc_timeout_ms = config.rpc_timeout_ms;
    cc.credential_file = config.cluster_secret_file;
    cc.secret_role = "router";
    cc.tls_ca_file = config.tls_ca_file;
    cc.tls_cert_file = config.tls_cert_file;
    cc.tls_key_file = config.tls_key_file;
    cc.data_tls_ca_file = config.data_tls_ca_file;
    auto c = Client::Create(cc);
    if (!c.ok()) return c.status();
    Client* raw = c.value().get();
    clients.emplace(tenant, std::move(c.value()));
    return raw;
  }

  void CountStatus(PrefetchToMemoryStatus s) {
    switch (s) {
      case PrefetchToMemoryStatus::kInMemory:
        ++in_memory;
        break;
      case PrefetchToMemoryStatus::kQueued:
        ++queued;
        break;
      case PrefetchToMemoryStatus::kThrottledWatermark:
        ++throttled_watermark;
        break;
      case PrefetchToMemoryStatus::kThrottledCap:
        ++throttled_cap;
        break;
      case PrefetchToMemoryStatus::kNoLocalDisk:
        ++no_local_disk;
        break;
      case PrefetchToMemoryStatus::kNotFound:
        ++not_found;
        break;
    }
  }
};

Result<std::unique_ptr<Router>> Router::Create(const RouterConfig& config) {
  if (config.master_server_address.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "router: master_server_address is required");
  }
  if (config.rpc_timeout_ms <= 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "router: rpc_timeout_ms must be > 0");
  }
  if (config.prefetch_deadline_floor_ms <= 0 ||
      !(config.prefetch_deadline_slack > 0)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "router: prefetch_deadline_floor_ms and "
                  "prefetch_deadline_slack must be > 0");
  }
  {
    // Checked now, not at the first request of each tenant.
    MasterSecurityFiles files;
    files.credential_file = config.cluster_secret_file;
    files.secret_role = auth::Role::kRouter;
    files.tls_ca_file = config.tls_ca_file;
    files.tls_cert_file = config.tls_cert_file;
    files.tls_key_file = config.tls_key_file;
    if (auto s = LoadMasterSecurity(files); !s.ok())
      return Status(s.code(), "router: " + s.status().message());
  }
  std::unordered_set<std::string> ids;
  for (const auto& e : config.engines) {
    if (e.id.empty()) {
      return Status(ErrorCode::INVALID_PARAMS, "router: engine without an id");
    }
    if (!ids.insert(e.id).second) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "router: duplicate engine id '" + e.id + "'");
    }
  }
  auto state = std::make_unique<State>();
  state->config = config;
  state->in_flight.assign(config.engines.size(), 0);
  state->service.assign(config.engines.size(), ServiceInterval());
  state->routed.assign(config.engines.size(), 0);
  state->admissions.assign(config.engines.size(), AdmissionInterval());
  state->reported_waiting.assign(config.engines.size(), -1);
  if (!config.kv_events_endpoint.empty()) {
    if (config.kv_events_map_capacity < 1) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "router: kv_events_map_capacity must be >= 1");
    }
    state->tier_map = std::make_unique<events::TierMap>(
        static_cast<size_t>(config.kv_events_map_capacity));
    events::SubscriberOptions so;
    so.endpoint = config.kv_events_endpoint;
    so.replay_endpoint = config.kv_events_replay_endpoint;
    so.topic = config.kv_events_topic;
    state->subscriber =
        std::make_unique<events::KvEventSubscriber>(so, state->tier_map.get());
    if (Status st = state->subscriber->Start(); !st.ok()) return st;
  } else if (!config.kv_events_replay_endpoint.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "router: kv_events_replay_endpoint needs kv_events_endpoint");
  }
  return std::unique_ptr<Router>(new Router(std::move(state)));
}

Router::Router(std::unique_ptr<State> state) : state_(std::move(state)) {}
Router::~Router() = default;

Result<RouteDecision> Router::Route(const RouteRequest& request) {
  State& s = *state_;
  ++s.requests;
  const auto& keys = request.block_keys;
  if (keys.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "router: no block keys");
  }
  if (keys.size() > kMaxBlocks) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "router: " + std::to_string(keys.size()) +
                      " block keys, limit " + std::to_string(kMaxBlocks));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty() || keys[i].size() > kMaxKeyLength) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "router: block key " + std::to_string(i) +
                        " is empty or longer than " +
                        std::to_string(kMaxKeyLength) + " bytes");
    }
  }
  auto client =
      s.ClientFor(request.tenant.empty() ? "default" : request.tenant);
  if (!client.ok()) return client.status();

  RouteDecision d;
  d.request_id = request.request_id;

  // Read-only lookups: no lease, no hit metrics, so routing never changes
  // what the store evicts or promotes by itself.
  Client* c = client.value();
  auto lookup = [c](const std::vector<std::string>& ks) {
    return c->BatchGetReplicaDesc(ks);
  };
  const std::string tenant =
      request.tenant.empty() ? "default" : request.tenant;
  auto prefix = s.tier_map
                    ? PrefixFromMap(s.tier_map.get(), tenant, keys, lookup)
                    : PrefixFromLookup(keys, lookup);
  if (!prefix.ok()) {
    ++s.lookup_errors;
    ++s.lookup_rpcs;
    return prefix.status();
  }
  s.blocks_looked_up += prefix->keys_looked_up;
  s.blocks_from_map += prefix->blocks_from_map;
  if (prefix->lookup_rpc) {
    ++s.lookup_rpcs;
  } else {
    ++s.routes_from_map;
  }
  std::vector<std::string> holders;
  for (const auto& b : prefix->blocks) holders.push_back(b.node_id);
  d.prefix_tiers = std::move(prefix->blocks);
  std::vector<std::string> ssd_keys = std::move(prefix->ssd_keys);
  d.matched_prefix = d.prefix_tiers.size();
  d.ssd_only_blocks = ssd_keys.size();
  s.ssd_only_blocks += ssd_keys.size();

  // The engine first: the trigger's deadline depends on its queue.
  int64_t deadline_ms = 0;
  {
    std::lock_guard<std::mutex> lock(s.load_mu);
    DispatchChoice c = PickEngine(s.config.engines, s.in_flight, holders,
                                  s.config.affinity_weight);
    if (c.engine >= 0) {
      const size_t e = static_cast<size_t>(c.engine);
      d.engine_id = s.config.engines[e].id;
      d.affinity_hit = c.affinity;
      const int max_loading = s.config.engines[e].max_loading;
      if (s.config.prefetch_deadline && s.reported_waiting[e] >= 0 &&
          max_loading > 0) {
        deadline_ms = EstimateReadDeadlineFromLoadsMs(
            uint64_t(s.reported_waiting[e]), max_loading,
            s.admissions[e].mean_ms(), s.config.prefetch_deadline_floor_ms,
            s.config.prefetch_deadline_slack);
      } else if (s.config.prefetch_deadline && s.reported_waiting[e] >= 0) {
        const double interval = s.config.prefetch_deadline_by_admissions
                                    ? s.admissions[e].mean_ms()
                                    : s.service[e].mean_ms();
        deadline_ms = EstimateReadDeadlineFromQueueMs(
            uint64_t(s.reported_waiting[e]), interval,
            s.config.prefetch_deadline_floor_ms,
            s.config.prefetch_deadline_slack);
      } else if (s.config.prefetch_deadline) {
        deadline_ms = EstimateReadDeadlineMs(
            s.in_flight[e], s.config.engines[e].max_running,
            s.service[e].mean_ms(), s.config.prefetch_deadline_floor_ms,
            s.config.prefetch_deadline_slack);
      }
      ++s.in_flight[e];
      ++s.routed[e];
    }
  }
  if (d.affinity_hit) ++s.affinity_hits;

  if (s.config.enable_prefetch && !ssd_keys.empty()) {
    auto r = client.value()->BatchPrefetchToMemory(ssd_keys, deadline_ms);
    if (r.ok()) {
      s.triggered += ssd_keys.size();
      if (deadline_ms > 0) ++s.deadlines_sent;
      d.prefetch_deadline_ms = deadline_ms;
      for (auto st : r.value()) s.CountStatus(st);
      d.triggered_keys = std::move(ssd_keys);
      d.prefetch_statuses = std::move(r.value());
    } else if (r.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      d.prefetch_disabled = true;
    } else {
      // The lookup succeeded, so the request can still be served (from SSD);
      // failing it here would turn an acceleration into an outage.
      ++s.prefetch_errors;
      d.prefetch_error = r.status().ToString();
      spdlog::warn("router: prefetch trigger for request '{}' failed: {}",
                   request.request_id, d.prefetch_error);
    }
  }

  return d;
}

void Router::Complete(const std::string& engine_id) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.load_mu);
  for (size_t i = 0; i < s.config.engines.size(); ++i) {
    if (s.config.engines[i].id != engine_id) continue;
    // A duplicate completion must not wrap the counter.
    if (s.in_flight[i] == 0) return;
    const int max_running = s.config.engines[i].max_running;
    const bool had_queue =
        s.reported_waiting[i] >= 0
            ? s.reported_waiting[i] > 0
            : max_running > 0 && s.in_flight[i] > uint64_t(max_running);
    s.service[i].OnComplete(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count(),
        had_queue);
    --s.in_flight[i];
    return;
  }
}

void Router::ReportQueue(const std::string& engine_id, uint64_t waiting) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.load_mu);
  for (size_t i = 0; i < s.config.engines.size(); ++i) {
    if (s.config.engines[i].id != engine_id) continue;
    s.reported_waiting[i] =
        int64_t(std::min<uint64_t>(waiting, uint64_t(INT64_MAX)));
    s.admissions[i].OnReport(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count(),
        s.routed[i], waiting,
        uint64_t(std::max(s.config.engines[i].max_loading, 1)));
    return;
  }
}

RouterStats Router::stats() const {
  const State& s = *state_;
  RouterStats r;
  r.requests = s.requests.load();
  r.blocks_looked_up = s.blocks_looked_up.load();
  r.ssd_only_blocks = s.ssd_only_blocks.load();
  r.triggered = s.triggered.load();
  r.queued = s.queued.load();
  r.in_memory = s.in_memory.load();
  r.throttled_watermark = s.throttled_watermark.load();
  r.throttled_cap = s.throttled_cap.load();
  r.no_local_disk = s.no_local_disk.load();
  r.not_found = s.not_found.load();
  r.affinity_hits = s.affinity_hits.load();
  r.lookup_errors = s.lookup_errors.load();
  r.prefetch_errors = s.prefetch_errors.load();
  r.deadlines_sent = s.deadlines_sent.load();
  r.lookup_rpcs = s.lookup_rpcs.load();
  if (s.subscriber) {
    r.kv_events = true;
    r.routes_from_map = s.routes_from_map.load();
    r.blocks_from_map = s.blocks_from_map.load();
    const events::SubscriberStats e = s.subscriber->stats();
    r.event_batches = e.batches;
    r.event_gaps = e.gaps;
    r.event_replays = e.replays;
    r.event_resyncs = e.resyncs;
    r.event_restarts = e.restarts;
    r.event_next_seq = e.next_seq;
    const events::TierMapStats m = s.tier_map->stats();
    r.map_keys = m.entries;
    r.map_evictions = m.capacity_evictions;
  }
  {
    std::lock_guard<std::mutex> lock(s.load_mu);
    r.in_flight = s.in_flight;
    r.reported_waiting = s.reported_waiting;
  }
  return r;
}

const RouterConfig& Router::config() const { return state_->config; }

}  // namespace kvpool
