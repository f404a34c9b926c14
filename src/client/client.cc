// kvpool::Client (see kvpool/client.h): creation, counters, and the calls
// that only ask the master (exist, size, remove, tier lookup, stats). Puts
// are in client_put.cc, gets in client_get.cc, sessions in
// client_sessions.cc; Client::State (client_state.h) is what they share.
#include "kvpool/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <google/protobuf/arena.h>

#include "client/client_state.h"
#include "common/host_id.h"

namespace kvpool {

namespace {
using Stub = rpc::MasterService::Stub;
}  // namespace

std::atomic<uint64_t> g_buffer_generation{1};

rpc::ReplicateConfig ToProto(const ReplicateConfig& rc) {
  rpc::ReplicateConfig out;
  out.set_replica_num(rc.replica_num < 1 ? 1 : rc.replica_num);
  out.set_preferred_segment(rc.preferred_segment);
  out.set_with_soft_pin(rc.with_soft_pin);
  out.set_soft_pin_ttl_ms(rc.soft_pin_ttl_ms);
  for (const auto& s : rc.preferred_segments) out.add_preferred_segments(s);
  out.set_with_hard_pin(rc.with_hard_pin);
  return out;
}

std::string TierInfo::BestTier() const {
  bool disk = false;
  for (const auto& r : replicas) {
    if (!r.complete) continue;
    if (r.kind == ReplicaInfo::Kind::kMemory) return "memory";
    disk = true;
  }
  return disk ? "local_disk" : "processing";
}

TcpDataClientOptions TcpOptions(const ClientConfig& c) {
  TcpDataClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(c.data_connect_timeout_ms);
  o.io_timeout = std::chrono::milliseconds(c.data_io_timeout_ms);
  o.tls_ca_file = c.data_tls_ca_file;
  // The HELLO is part of connecting: never longer than the connect limit.
  o.handshake_timeout = std::min(o.handshake_timeout, o.connect_timeout);
  return o;
}

namespace {

Result<MasterSecurityFiles> SecurityFiles(const ClientConfig& c) {
  MasterSecurityFiles f;
  f.credential_file = c.credential_file;
  auto role = auth::ParseRole(c.secret_role);
  if (!role || *role == auth::Role::kTenant) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "secret_role must be admin, router or node");
  }
  f.secret_role = *role;
  f.secret_principal = c.secret_role;
  f.tls_ca_file = c.tls_ca_file;
  f.tls_cert_file = c.tls_cert_file;
  f.tls_key_file = c.tls_key_file;
  return f;
}
}  // namespace

Result<std::unique_ptr<Client>> Client::Create(const ClientConfig& config) {
  if (config.master_server_address.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "master_server_address is required");
  }
  if (config.rpc_timeout_ms <= 0)
    return Status(ErrorCode::INVALID_PARAMS, "rpc_timeout_ms must be > 0");
  if (config.data_connect_timeout_ms <= 0 || config.data_io_timeout_ms <= 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "data_connect_timeout_ms and data_io_timeout_ms must be > 0");
  }
  auto files = SecurityFiles(config);
  if (!files.ok()) return files.status();
  auto security = LoadMasterSecurity(files.value());
  if (!security.ok()) return security.status();
  return std::unique_ptr<Client>(
      new Client(std::make_unique<State>(config, std::move(security.value()))));
}

Client::Client(std::unique_ptr<State> state) : state_(std::move(state)) {}
Client::~Client() = default;

const ClientConfig& Client::config() const { return state_->config; }

PrefetchStats Client::prefetch_stats() const {
  return state_->prefetcher ? state_->prefetcher->stats() : PrefetchStats{};
}

bool Client::WaitPrefetchIdle(int64_t timeout_ms) {
  return !state_->prefetcher ||
         state_->prefetcher->WaitIdle(std::chrono::milliseconds(timeout_ms));
}

std::string Client::MetricsText() const {
  return state_->metrics.RenderPrometheus();
}

ClientCounters Client::counters() const {
  auto& d = state_->data;
  return ClientCounters{
      d.shm_bytes_read.load(),         d.shm_bytes_written.load(),
      d.tcp_bytes_read.load(),         d.tcp_bytes_written.load(),
      d.ssd_bytes_read.load(),         d.local_ssd_bytes_read.load(),
      state_->lease_cache_hits.load(), state_->lease_cache_resets.load(),
      state_->put_retries.load(),      state_->put_retries_on_new_leader.load(),
      d.shm_writes_owner_gone.load()};
}

// ------------------------------------------------------------ exist, size

std::vector<Result<bool>> Client::BatchIsExist(
    const std::vector<std::string>& keys, const ExistOptions& opts) {
  OpTimer timer(&state_->op_metrics, ClientOp::kExist);
  std::vector<Result<bool>> out(keys.size(), ErrorCode::INTERNAL_ERROR);
  if (keys.empty()) return out;
  rpc::ExistKeyRequest req;
  req.set_tenant(state_->config.tenant);
  req.set_no_lease(!opts.grant_lease);
  for (const auto& k : keys) req.add_keys(k);
  rpc::ExistKeyResponse resp;
  if (Status s = state_->master.Call(&Stub::BatchExistKey, req, &resp);
      !s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  std::vector<std::string> existing;
  for (size_t i = 0;
       i < keys.size() && static_cast<int>(i) < resp.error_codes_size(); ++i) {
    ErrorCode c = ErrorCodeFromInt(resp.error_codes(static_cast<int>(i)));
    if (c == ErrorCode::OK) {
      out[i] = true;
      if (opts.prefetch_to_memory && state_->prefetcher)
        existing.push_back(keys[i]);
    } else if (c == ErrorCode::OBJECT_NOT_FOUND) {
      out[i] = false;
    } else {
      out[i] = Status(c);
    }
  }
  // One reservation per key and one enqueue on this thread; no RPC.
  if (!existing.empty())
    state_->prefetcher->TriggerPrefetch(existing, PrefetchTrigger::kExist);
  return out;
}

Result<bool> Client::IsExist(std::string_view key, const ExistOptions& opts) {
  return BatchIsExist({std::string(key)}, opts)[0];
}

Result<uint64_t> Client::GetSize(std::string_view key) {
  auto r = BatchGetReplicaDesc({std::string(key)});
  if (!r[0].ok()) return r[0].status();
  if (r[0]->BestTier() == "processing")
    return Status(ErrorCode::REPLICA_IS_NOT_READY);
  return r[0]->size;
}

// ----------------------------------------------------------------- remove

Status Client::Remove(std::string_view key, bool force) {
  ForgetCached({std::string(key)});
  rpc::RemoveRequest req;
  req.set_tenant(state_->config.tenant);
  req.set_key(std::string(key));
  req.set_force(force);
  rpc::KeyStatus resp;
  if (Status s = state_->master.Call(&Stub::Remove, req, &resp); !s.ok())
    return s;
  return Status(ErrorCodeFromInt(resp.error_code()));
}

std::vector<Status> Client::BatchRemove(const std::vector<std::string>& keys,
                                        bool force) {
  std::vector<Status> out(keys.size());
  if (keys.empty()) return out;
  ForgetCached(keys);
  rpc::BatchRemoveRequest req;
  req.set_tenant(state_->config.tenant);
  for (const auto& k : keys) req.add_keys(k);
  req.set_force(force);
  rpc::BatchKeyStatus resp;
  Status s = state_->master.Call(&Stub::BatchRemove, req, &resp);
  if (s.code() == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
    for (size_t i = 0; i < keys.size(); ++i) out[i] = Remove(keys[i], force);
    return out;
  }
  if (!s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  if (resp.error_codes_size() != static_cast<int>(keys.size())) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::RPC_FAIL, "short BatchRemove reply"));
    return out;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = Status(ErrorCodeFromInt(resp.error_codes(static_cast<int>(i))));
  }
  return out;
}

Result<uint64_t> Client::RemoveAll(bool force) {
  return RemoveByRegex("", force);
}

Result<uint64_t> Client::RemoveByRegex(const std::string& key_regex,
                                       bool force) {
  if (state_->config.lease_cache) {
    MutexLock lock(&state_->cache_mu);
    state_->cache.clear();
  }
  rpc::RemoveAllRequest req;
  req.set_tenant(state_->config.tenant);
  req.set_force(force);
  req.set_key_regex(key_regex);
  rpc::RemoveAllResponse resp;
  if (Status s = state_->master.Call(&Stub::RemoveAll, req, &resp); !s.ok())
    return s;
  if (resp.error_code() != 0)
    return Status(ErrorCodeFromInt(resp.error_code()));
  return resp.removed();
}

// ------------------------------------------------------------ tier lookup

std::vector<Result<TierInfo>> Client::BatchGetReplicaDesc(
    const std::vector<std::string>& keys) {
  std::vector<Result<TierInfo>> out(keys.size(), ErrorCode::INTERNAL_ERROR);
  if (keys.empty()) return out;
  // Request and reply on one arena: a batch of 128 keys is otherwise some
  // 700 small heap allocations on each side of the parse.
  google::protobuf::ArenaOptions arena_opts;
  arena_opts.start_block_size = 64 << 10;
  google::protobuf::Arena arena(arena_opts);
  auto& req =
      *google::protobuf::Arena::CreateMessage<rpc::BatchKeyRequest>(&arena);
  req.set_tenant(state_->config.tenant);
  req.mutable_keys()->Reserve(static_cast<int>(keys.size()));
  for (const auto& k : keys) req.add_keys(k);
  auto& resp =
      *google::protobuf::Arena::CreateMessage<rpc::BatchQueryReadOnlyResponse>(
          &arena);
  if (Status s = state_->master.Call(&Stub::BatchQueryReadOnly, req, &resp);
      !s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  for (size_t i = 0; i < keys.size() && static_cast<int>(i) < resp.items_size();
       ++i) {
    const auto& q = resp.items(static_cast<int>(i));
    if (q.error_code() != 0) {
      out[i] = Status(ErrorCodeFromInt(q.error_code()));
      continue;
    }
    TierInfo t;
    t.size = q.size();
    t.lease_remaining_ms = q.lease_remaining_ms();
    for (const auto& r : q.replicas()) {
      ReplicaInfo ri;
      ri.kind = r.kind() == rpc::MEMORY ? ReplicaInfo::Kind::kMemory
                                        : ReplicaInfo::Kind::kLocalDisk;
      ri.complete = r.status() == rpc::COMPLETE;
      if (r.kind() == rpc::MEMORY) {
        ri.segment_id = r.memory().segment_id();
        ri.offset = r.memory().offset();
        for (const auto& seg : resp.segments()) {
          if (seg.segment_id() == ri.segment_id) {
            ri.node_id = seg.node_id();
            ri.data_endpoint = seg.data_endpoint();
            break;
          }
        }
      } else {
        ri.node_id = r.disk_node_id();
        ri.data_endpoint = r.disk_data_endpoint();
      }
      t.replicas.push_back(std::move(ri));
    }
    out[i] = std::move(t);
  }
  return out;
}

Result<std::vector<PrefetchToMemoryStatus>> Client::BatchPrefetchToMemory(
    const std::vector<std::string>& keys, int64_t deadline_in_ms) {
  if (deadline_in_ms < 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "BatchPrefetchToMemory: negative deadline");
  }
  rpc::BatchPrefetchToMemoryRequest req;
  req.set_tenant(state_->config.tenant);
  req.set_deadline_in_ms(deadline_in_ms);
  for (const auto& k : keys) req.add_keys(k);
  rpc::BatchPrefetchToMemoryResponse resp;
  if (Status s = state_->master.Call(&Stub::BatchPrefetchToMemory, req, &resp);
      !s.ok()) {
    return s;
  }
  if (resp.error_code() != 0) {
    return Status(ErrorCodeFromInt(resp.error_code()),
                  "BatchPrefetchToMemory refused");
  }
  if (resp.statuses_size() != static_cast<int>(keys.size())) {
    return Status(ErrorCode::RPC_FAIL, "short BatchPrefetchToMemory reply");
  }
  std::vector<PrefetchToMemoryStatus> out;
  out.reserve(keys.size());
  for (int st : resp.statuses())
    out.push_back(static_cast<PrefetchToMemoryStatus>(st));
  return out;
}

Result<ClusterReport> Client::Stat() {
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  if (Status s = state_->master.Call(&Stub::GetClusterStats, req, &resp);
      !s.ok())
    return s;
  ClusterReport r;
  r.objects = resp.objects();
  r.memory_replicas = resp.memory_replicas();
  r.evictions = resp.evictions();
  for (const auto& s : resp.segments()) {
    r.segments.push_back(
        SegmentReport{s.segment_id(), s.node_id(),
                      s.kind() == rpc::MAIN ? "main" : "prefetch_buffer",
                      s.capacity(), s.used(), s.data_endpoint()});
  }
  return r;
}

}  // namespace kvpool
