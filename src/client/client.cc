#include "kvpool/client.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include <google/protobuf/arena.h>

#include "client/client_state.h"
#include "common/host_id.h"

namespace kvpool {

namespace {
using Stub = rpc::MasterService::Stub;
constexpr size_t kLeaseCacheEntries = 65536;

// A value never below SteadyMs() at the moment of the call, read from the
// tick-granular clock: ~4 ns instead of ~30 on a VM, where it is the largest
// fixed cost of a lease-cached get. The coarse clock is the monotonic clock
// as of the last tick, so adding one tick (its resolution) bounds it from
// above; a lease is then judged over, at worst, a tick early.
int64_t SteadyMsNoEarlierThanNow() {
  static const int64_t tick_ns = [] {
    timespec r{};
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &r) != 0) return int64_t{-1};
    return int64_t{r.tv_sec} * 1000000000 + r.tv_nsec;
  }();
  timespec ts{};
  if (tick_ns < 0 || ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return SteadyMs() + 1;
  const int64_t ns = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec + tick_ns;
  return ns / 1000000 + 1;
}

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
  return ClientCounters{d.shm_bytes_read.load(),
                        d.shm_bytes_written.load(),
                        d.tcp_bytes_read.load(),
                        d.tcp_bytes_written.load(),
                        d.ssd_bytes_read.load(),
                        d.local_ssd_bytes_read.load(),
                        state_->lease_cache_hits.load(),
                        state_->lease_cache_resets.load(),
                        state_->put_retries.load(),
                        state_->put_retries_on_new_leader.load()};
}

// -------------------------------------------------------------------- put

namespace {
// Puts the keys of a batch whose status in `*out` is `code` once more with
// `attempt(keys, bufs, sizes, pieces)` and writes their new statuses back;
// how many were retried.
template <typename Attempt>
size_t RetryWhere(ErrorCode code, const std::vector<std::string>& keys,
                  const std::vector<const uint8_t*>& bufs,
                  const std::vector<uint64_t>& sizes,
                  const std::vector<std::vector<ValueRange>>* pieces,
                  std::vector<Status>* out, Attempt attempt) {
  std::vector<size_t> again;
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].code() == code) again.push_back(i);
  }
  if (again.empty()) return 0;
  std::vector<std::string> k;
  std::vector<const uint8_t*> b;
  std::vector<uint64_t> s;
  std::vector<std::vector<ValueRange>> p;
  for (size_t i : again) {
    k.push_back(keys[i]);
    b.push_back(bufs[i]);
    s.push_back(sizes[i]);
    if (pieces) p.push_back((*pieces)[i]);
  }
  std::vector<Status> retried = attempt(k, b, s, pieces ? &p : nullptr);
  for (size_t j = 0; j < again.size(); ++j) (*out)[again[j]] = retried[j];
  return again.size();
}
}  // namespace

std::vector<Status> Client::PutMany(
    const std::vector<std::string>& keys,
    const std::vector<const uint8_t*>& bufs, const std::vector<uint64_t>& sizes,
    const ReplicateConfig& rc, bool upsert,
    const std::vector<std::vector<ValueRange>>* pieces) {
  OpTimer timer(&state_->op_metrics, ClientOp::kPut);
  const uint64_t leaders_before = state_->master.leader_changes();
  std::vector<Status> out =
      PutManyAvoiding(keys, bufs, sizes, rc, upsert, pieces);
  if (state_->master.leader_changes() == leaders_before) return out;
  // The leader changed during the put: what the old one granted is gone
  // with its tables (its PutEnd failed, or its PutStart never answered).
  // Once more on the new leader, so a failover costs no put.
  const size_t n = RetryWhere(
      ErrorCode::RPC_FAIL, keys, bufs, sizes, pieces, &out,
      [&](const auto& k, const auto& b, const auto& s, const auto* p) {
        return PutManyAvoiding(k, b, s, rc, upsert, p);
      });
  state_->put_retries_on_new_leader.fetch_add(n, std::memory_order_relaxed);
  return out;
}

std::vector<Status> Client::PutManyAvoiding(
    const std::vector<std::string>& keys,
    const std::vector<const uint8_t*>& bufs, const std::vector<uint64_t>& sizes,
    const ReplicateConfig& rc, bool upsert,
    const std::vector<std::vector<ValueRange>>* pieces) {
  std::vector<std::string> unreachable;
  std::vector<Status> out =
      PutManyOnce(keys, bufs, sizes, rc, upsert, {}, &unreachable, pieces);
  if (unreachable.empty()) return out;
  // A node that refuses or drops the data connection (crashed, not yet
  // declared dead) must not fail the put when the pool has other room:
  // retry those keys once, placed elsewhere. The master avoids the node for
  // every put until it heartbeats again.
  const size_t n = RetryWhere(
      ErrorCode::TRANSFER_FAIL, keys, bufs, sizes, pieces, &out,
      [&](const auto& k, const auto& b, const auto& s, const auto* p) {
        std::vector<std::string> still;
        return PutManyOnce(k, b, s, rc, upsert, unreachable, &still, p);
      });
  state_->put_retries.fetch_add(n, std::memory_order_relaxed);
  return out;
}

std::vector<Status> Client::PutManyOnce(
    const std::vector<std::string>& keys,
    const std::vector<const uint8_t*>& bufs, const std::vector<uint64_t>& sizes,
    const ReplicateConfig& rc, bool upsert,
    const std::vector<std::string>& excluded,
    std::vector<std::string>* unreachable,
    const std::vector<std::vector<ValueRange>>* pieces) {
  const size_t n = keys.size();
  if (upsert) ForgetCached(keys);
  std::vector<Status> out(n);
  if (bufs.size() != n || sizes.size() != n ||
      (pieces != nullptr && pieces->size() != n)) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS,
                     "keys, buffers and sizes differ in length"));
    return out;
  }
  if (n == 0) return out;
  // Each key's pieces, in the data plane's form (kept until the writes end).
  std::vector<std::vector<ValuePiece>> gathered(pieces ? n : 0);
  for (size_t i = 0; i < gathered.size(); ++i) {
    for (const auto& r : (*pieces)[i]) {
      gathered[i].push_back(
          ValuePiece{r.value_offset, static_cast<uint8_t*>(r.buf), r.length});
    }
  }
  rpc::BatchPutStartRequest start;
  rpc::ReplicateConfig prc = ToProto(rc);
  for (size_t i = 0; i < n; ++i) {
    auto* item = start.add_items();
    item->set_tenant(state_->config.tenant);
    item->set_key(keys[i]);
    item->set_size(sizes[i]);
    *item->mutable_config() = prc;
    item->set_upsert(upsert);
    for (const auto& e : excluded) item->add_excluded_nodes(e);
  }
  rpc::BatchPutStartResponse started;
  if (Status s = state_->master.Call(&Stub::BatchPutStart, start, &started);
      !s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  if (started.items_size() != static_cast<int>(n)) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::RPC_FAIL, "short PutStart reply"));
    return out;
  }
  std::vector<TransferItem> items;
  std::vector<size_t> owner;
  for (size_t i = 0; i < n; ++i) {
    const auto& r = started.items(static_cast<int>(i));
    ErrorCode code = ErrorCodeFromInt(r.error_code());
    if (code == ErrorCode::OBJECT_ALREADY_EXISTS && !upsert) {
      out[i] =
          Status::OK();  // as in Mooncake: an existing key is not overwritten
      continue;
    }
    if (code != ErrorCode::OK) {
      out[i] = Status(code, r.error_message().empty()
                                ? std::string("PutStart refused")
                                : "PutStart refused: " + r.error_message());
      continue;
    }
    for (const auto& rep : r.replicas()) {
      items.push_back(TransferItem{.loc = &rep.memory(),
                                   .buf = const_cast<uint8_t*>(bufs[i]),
                                   .length = sizes[i]});
      if (pieces) items.back().pieces = gathered[i];
      owner.push_back(i);
    }
  }
  state_->data.Write(items);
  std::vector<bool> ok(n, false);
  for (size_t i = 0; i < n; ++i) {
    ok[i] = started.items(static_cast<int>(i)).error_code() == 0;
  }
  for (size_t j = 0; j < items.size(); ++j) {
    if (items[j].result == ErrorCode::TRANSFER_FAIL) {
      const std::string& node = items[j].loc->node_id();
      if (std::find(unreachable->begin(), unreachable->end(), node) ==
          unreachable->end())
        unreachable->push_back(node);
    }
    if (items[j].result != ErrorCode::OK && ok[owner[j]]) {
      ok[owner[j]] = false;
      out[owner[j]] = Status(items[j].result, "writing the value failed");
    }
  }
  rpc::BatchKeyRequest end, revoke;
  end.set_tenant(state_->config.tenant);
  revoke.set_tenant(state_->config.tenant);
  std::vector<size_t> end_idx, revoke_idx;
  for (size_t i = 0; i < n; ++i) {
    if (started.items(static_cast<int>(i)).error_code() != 0) continue;
    if (ok[i]) {
      end.add_keys(keys[i]);
      end_idx.push_back(i);
    } else {
      revoke.add_keys(keys[i]);
      revoke_idx.push_back(i);
    }
  }
  if (!end_idx.empty()) {
    rpc::BatchKeyStatus ended;
    Status s = state_->master.Call(&Stub::BatchPutEnd, end, &ended);
    for (size_t j = 0; j < end_idx.size(); ++j) {
      if (!s.ok()) {
        out[end_idx[j]] = s;
      } else if (static_cast<int>(j) < ended.error_codes_size() &&
                 ended.error_codes(j) != 0) {
        out[end_idx[j]] =
            Status(ErrorCodeFromInt(ended.error_codes(j)), "PutEnd refused");
      }
    }
  }
  if (!revoke_idx.empty()) {
    rpc::BatchKeyStatus revoked;
    // Best effort: if this fails, the master reclaims the put after its
    // put timeouts, and readers never saw it.
    state_->master.Call(&Stub::BatchPutRevoke, revoke, &revoked).IgnoreError();
  }
  return out;
}

Status Client::Put(std::string_view key, std::string_view value,
                   const ReplicateConfig& rc) {
  return PutMany({std::string(key)},
                 {reinterpret_cast<const uint8_t*>(value.data())},
                 {value.size()}, rc, false)[0];
}

Status Client::Upsert(std::string_view key, std::string_view value,
                      const ReplicateConfig& rc) {
  return PutMany({std::string(key)},
                 {reinterpret_cast<const uint8_t*>(value.data())},
                 {value.size()}, rc, true)[0];
}

std::vector<Status> Client::BatchPut(
    const std::vector<std::string>& keys,
    const std::vector<std::string_view>& values, const ReplicateConfig& rc) {
  std::vector<const uint8_t*> bufs;
  std::vector<uint64_t> sizes;
  for (const auto& v : values) {
    bufs.push_back(reinterpret_cast<const uint8_t*>(v.data()));
    sizes.push_back(v.size());
  }
  return PutMany(keys, bufs, sizes, rc, false);
}

Status Client::RegisterBuffer(void* buf, uint64_t size) {
  if (buf == nullptr || size == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "buffer must be non-null with size > 0");
  }
  std::unique_lock lock(state_->buf_mu);
  auto a = reinterpret_cast<uintptr_t>(buf);
  for (const auto& [base, len] : state_->buffers) {
    if (a < base + len && base < a + size) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "buffer overlaps a registered buffer");
    }
  }
  state_->buffers.emplace_back(a, size);
  state_->buffers_generation.store(
      g_buffer_generation.fetch_add(1, std::memory_order_relaxed),
      std::memory_order_release);
  return Status::OK();
}

Status Client::UnregisterBuffer(void* buf) {
  std::unique_lock lock(state_->buf_mu);
  auto a = reinterpret_cast<uintptr_t>(buf);
  auto it = std::find_if(state_->buffers.begin(), state_->buffers.end(),
                         [&](const auto& b) { return b.first == a; });
  if (it == state_->buffers.end()) {
    return Status(ErrorCode::INVALID_PARAMS, "buffer was not registered");
  }
  state_->buffers.erase(it);
  state_->buffers_generation.store(
      g_buffer_generation.fetch_add(1, std::memory_order_relaxed),
      std::memory_order_release);
  return Status::OK();
}

Status Client::PutFrom(std::string_view key, const void* buf, uint64_t size,
                       const ReplicateConfig& rc) {
  return BatchPutFrom({std::string(key)}, {buf}, {size}, rc)[0];
}

std::vector<Status> Client::BatchPutFrom(const std::vector<std::string>& keys,
                                         const std::vector<const void*>& bufs,
                                         const std::vector<uint64_t>& sizes,
                                         const ReplicateConfig& rc) {
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) {
    return std::vector<Status>(
        keys.size(), Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
  }
  std::vector<Status> out(keys.size());
  std::vector<std::string> k2;
  std::vector<const uint8_t*> b2;
  std::vector<uint64_t> s2;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!state_->Registered(bufs[i], sizes[i])) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "buffer is not inside a registered buffer");
      continue;
    }
    k2.push_back(keys[i]);
    b2.push_back(static_cast<const uint8_t*>(bufs[i]));
    s2.push_back(sizes[i]);
    idx.push_back(i);
  }
  auto r = PutMany(k2, b2, s2, rc, false);
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = r[j];
  return out;
}

std::vector<Status> Client::BatchPutFromParts(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ConstSlice>>& parts,
    const ReplicateConfig& rc, bool upsert) {
  return PutParts(keys, parts, rc, upsert, true);
}

std::vector<Status> Client::BatchPutParts(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ConstSlice>>& parts,
    const ReplicateConfig& rc, bool upsert) {
  return PutParts(keys, parts, rc, upsert, false);
}

std::vector<Status> Client::PutParts(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ConstSlice>>& parts,
    const ReplicateConfig& rc, bool upsert, bool require_registered) {
  if (parts.size() != keys.size()) {
    return std::vector<Status>(
        keys.size(), Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
  }
  std::vector<Status> out(keys.size());
  std::vector<std::string> k2;
  std::vector<const uint8_t*> b2;
  std::vector<uint64_t> s2;
  std::vector<std::vector<ValueRange>> p2;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ValueRange> pieces;
    uint64_t total = 0;
    bool valid = true;
    for (const auto& part : parts[i]) {
      if (part.size == 0) continue;
      if (part.data == nullptr ||
          (require_registered && !state_->Registered(part.data, part.size))) {
        valid = false;
        break;
      }
      pieces.push_back(
          ValueRange{total, const_cast<void*>(part.data), part.size});
      total += part.size;
    }
    if (!valid) {
      out[i] =
          Status(ErrorCode::INVALID_PARAMS,
                 require_registered ? "a part is not inside a registered buffer"
                                    : "a part has no buffer");
      continue;
    }
    k2.push_back(keys[i]);
    b2.push_back(pieces.empty() ? nullptr
                                : static_cast<const uint8_t*>(pieces[0].buf));
    s2.push_back(total);
    p2.push_back(std::move(pieces));
    idx.push_back(i);
  }
  auto r = PutMany(k2, b2, s2, rc, upsert, &p2);
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = r[j];
  return out;
}

// -------------------------------------------------------------------- get

void RunReads(DataPlane& data, const std::string& tenant,
              std::vector<ReadJob>& jobs, SsdPrefetcher* prefetcher) {
  bool kicked = false;
  bool progress = true;
  while (progress) {
    progress = false;
    std::vector<TransferItem> items;  // MEMORY replicas
    std::vector<size_t> item_owner;
    std::vector<KeyReadOp> disk;  // LOCAL_DISK replicas: SSD_READ at the holder
    std::vector<std::pair<std::string, std::string>>
        disk_peer;  // (endpoint, node id)
    std::vector<size_t> disk_owner;
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto& j = jobs[i];
      if (j.result.ok() || j.reply == nullptr) continue;
      if (j.next_replica >= j.reply->replicas_size()) continue;
      const auto& rep = j.reply->replicas(j.next_replica++);
      j.staged = false;
      if (rep.kind() == rpc::MEMORY) {
        items.push_back(TransferItem{
            .loc = &rep.memory(), .buf = j.dest, .length = j.reply->size()});
        items.back().pieces = j.pieces;
        item_owner.push_back(i);
      } else {
        uint8_t* dest = j.dest;
        if (!j.pieces.empty()) {
          j.owned.resize(j.reply->size());
          dest = reinterpret_cast<uint8_t*>(j.owned.data());
          j.staged = true;
        }
        disk.push_back(KeyReadOp{tenant, std::string(j.key), j.reply->size(),
                                 dest, ErrorCode::OK, rep.disk_capability()});
        disk_peer.emplace_back(rep.disk_data_endpoint(), rep.disk_node_id());
        disk_owner.push_back(i);
      }
    }
    if (items.empty() && disk.empty()) break;
    if (prefetcher && !disk.empty() && !kicked) {
      // Demand-side kick: the strongest hotness signal there is. One
      // trigger per get, bypassing only the client-side backoff; the read
      // below goes to SSD at once and never waits for the promotion.
      kicked = true;
      std::vector<std::string> disk_keys;
      for (const auto& op : disk) disk_keys.push_back(op.key);
      prefetcher->TriggerPrefetch(disk_keys, /*ignore_cooldown=*/true);
    }
    if (!items.empty()) data.Read(items);
    if (!disk.empty()) data.ReadKeys(disk, disk_peer);
    auto settle = [&](size_t owner, ErrorCode code) {
      auto& j = jobs[owner];
      if (code == ErrorCode::OK) {
        if (j.pieces.empty()) {
          j.result = j.reply->size();
        } else {
          if (j.staged) {
            for (const auto& piece : j.pieces) {
              std::memcpy(piece.buf, j.owned.data() + piece.value_offset,
                          piece.length);
            }
          }
          j.result = j.piece_bytes;
        }
      } else {
        j.result = Status(code, "reading the value failed");
        progress = true;  // try the next replica
      }
    };
    for (size_t k = 0; k < items.size(); ++k)
      settle(item_owner[k], items[k].result);
    for (size_t k = 0; k < disk.size(); ++k)
      settle(disk_owner[k], disk[k].result);
  }
  // Past the lease, the master may have reused the range: the bytes cannot
  // be trusted (Mooncake's LEASE_EXPIRED).
  const int64_t now = SteadyMs();
  for (auto& j : jobs) {
    if (j.result.ok() && j.reply && now > j.lease_deadline_ms) {
      j.result = Status(ErrorCode::LEASE_EXPIRED,
                        "lease expired before the copy completed");
    }
  }
}

// Replica lists for `keys`, one master RPC for all of them; with the lease
// cache on, a key whose lease this client still holds is answered from the
// cache (the master keeps that memory for the lease, whatever happens to the
// key meanwhile).
Client::Replies Client::FetchReplies(
    const std::vector<std::string_view>& keys) {
  Replies out;
  out.items.resize(keys.size());
  out.lease_deadline_ms.resize(keys.size(), 0);
  const int64_t now = SteadyMs();
  rpc::BatchKeyRequest req;
  req.set_tenant(state_->config.tenant);
  std::vector<size_t> asked;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (state_->config.lease_cache) {
      std::lock_guard<std::mutex> lock(state_->cache_mu);
      auto it = state_->cache.find(keys[i]);
      // A margin keeps a copy that starts now well inside the lease.
      if (it != state_->cache.end() &&
          now + it->second.margin_ms < it->second.deadline_ms) {
        out.items[i] = it->second.reply;
        out.lease_deadline_ms[i] = it->second.deadline_ms;
        ++state_->lease_cache_hits;
        continue;
      }
    }
    req.add_keys(std::string(keys[i]));
    asked.push_back(i);
  }
  if (asked.empty()) return out;
  rpc::BatchGetReplicaListResponse resp;
  out.status = state_->master.Call(&Stub::BatchGetReplicaList, req, &resp);
  if (!out.status.ok()) return out;
  if (resp.items_size() != static_cast<int>(asked.size())) {
    out.status = Status(ErrorCode::RPC_FAIL, "short BatchGetReplicaList reply");
    return out;
  }
  if (state_->config.lease_cache) {
    // Leases cached from another master (a restart, a failover) are only as
    // good as that master's memory of them: drop them all.
    std::lock_guard<std::mutex> lock(state_->cache_mu);
    if (now >= state_->next_cache_sweep_ms) {
      std::erase_if(state_->cache,
                    [&](const auto& e) { return e.second.deadline_ms <= now; });
      state_->next_cache_sweep_ms = now + 5000;
    }
    const uint64_t inc = resp.master_incarnation();
    if (inc != 0 && inc != state_->master_incarnation) {
      if (state_->master_incarnation != 0) {
        state_->cache.clear();
        ++state_->lease_cache_resets;
      }
      state_->master_incarnation = inc;
    }
  }
  for (size_t j = 0; j < asked.size(); ++j) {
    size_t i = asked[j];
    auto reply = std::make_shared<rpc::GetReplicaListResponse>(
        std::move(*resp.mutable_items(static_cast<int>(j))));
    // The lease counts from before the request was sent.
    out.lease_deadline_ms[i] = now + int64_t(reply->lease_ttl_ms());
    bool memory = false;
    for (const auto& r : reply->replicas()) memory |= r.kind() == rpc::MEMORY;
    if (state_->config.lease_cache && reply->error_code() == 0 && memory) {
      std::lock_guard<std::mutex> lock(state_->cache_mu);
      if (state_->cache.size() >= kLeaseCacheEntries) state_->cache.clear();
      state_->cache[std::string(keys[i])] =
          State::CachedReply{reply, out.lease_deadline_ms[i],
                             std::max<int64_t>(1, reply->lease_ttl_ms() / 5)};
    }
    out.items[i] = std::move(reply);
  }
  return out;
}

void Client::ForgetCached(const std::vector<std::string>& keys) {
  if (!state_->config.lease_cache) return;
  std::lock_guard<std::mutex> lock(state_->cache_mu);
  for (const auto& k : keys) state_->cache.erase(k);
}

std::vector<Result<uint64_t>> Client::ReadInto(
    const std::vector<std::string_view>& keys, const std::vector<void*>& bufs,
    const std::vector<uint64_t>& sizes, bool require_registered) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  const size_t n = keys.size();
  std::vector<Result<uint64_t>> out(n, ErrorCode::INTERNAL_ERROR);
  if (bufs.size() != n || sizes.size() != n) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
    return out;
  }
  std::vector<std::string_view> asked_keys;
  std::vector<size_t> asked;
  for (size_t i = 0; i < n; ++i) {
    if (bufs[i] == nullptr) {
      out[i] = Status(ErrorCode::INVALID_PARAMS, "null buffer");
    } else if (require_registered && !state_->Registered(bufs[i], sizes[i])) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "buffer is not inside a registered buffer");
    } else if (std::optional<Result<uint64_t>> hit =
                   state_->config.lease_cache
                       ? CachedShmRead(keys[i], bufs[i], sizes[i])
                       : std::nullopt) {
      out[i] = std::move(*hit);  // lease-cached, same host: no master
    } else {
      asked_keys.push_back(keys[i]);
      asked.push_back(i);
    }
  }
  if (asked.empty()) return out;
  Replies replies = FetchReplies(asked_keys);
  if (!replies.status.ok()) {
    for (size_t i : asked) out[i] = replies.status;
    return out;
  }
  std::vector<ReadJob> jobs(asked.size());
  for (size_t j = 0; j < asked.size(); ++j) {
    const auto& r = *replies.items[j];
    size_t i = asked[j];
    if (r.error_code() != 0) {
      jobs[j].result = Status(ErrorCodeFromInt(r.error_code()));
      continue;
    }
    if (r.size() > sizes[i]) {
      jobs[j].result =
          Status(ErrorCode::BUFFER_OVERFLOW,
                 "value of " + std::to_string(r.size()) + " bytes, buffer of " +
                     std::to_string(sizes[i]));
      continue;
    }
    jobs[j].reply = &r;
    jobs[j].lease_deadline_ms = replies.lease_deadline_ms[j];
    jobs[j].key = keys[i];
    jobs[j].dest = static_cast<uint8_t*>(bufs[i]);
    jobs[j].result = Status(ErrorCode::OBJECT_NOT_FOUND, "no readable replica");
  }
  RunReads(state_->data, state_->config.tenant, jobs, state_->prefetcher.get());
  for (size_t j = 0; j < asked.size(); ++j) out[asked[j]] = jobs[j].result;
  return out;
}

std::vector<Result<uint64_t>> Client::ReadPieces(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ValueRange>>& pieces, PieceMode mode,
    std::vector<std::vector<bool>>* outside) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  const size_t n = keys.size();
  if (outside) {
    outside->assign(pieces.size(), {});
    for (size_t i = 0; i < pieces.size(); ++i) {
      (*outside)[i].assign(pieces[i].size(), false);
    }
  }
  std::vector<Result<uint64_t>> out(n, ErrorCode::INTERNAL_ERROR);
  if (pieces.size() != n) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
    return out;
  }
  std::vector<std::string_view> asked_keys;
  std::vector<size_t> asked;
  for (size_t i = 0; i < n; ++i) {
    bool valid = true;
    for (const auto& p : pieces[i]) {
      valid &= p.buf != nullptr && state_->Registered(p.buf, p.length);
    }
    if (!valid) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "a buffer is not inside a registered buffer");
      continue;
    }
    asked_keys.push_back(keys[i]);
    asked.push_back(i);
  }
  if (asked.empty()) return out;
  Replies replies = FetchReplies(asked_keys);
  if (!replies.status.ok()) {
    for (size_t i : asked) out[i] = replies.status;
    return out;
  }
  std::vector<ReadJob> jobs(asked.size());
  for (size_t j = 0; j < asked.size(); ++j) {
    const auto& r = *replies.items[j];
    const size_t i = asked[j];
    auto& job = jobs[j];
    if (r.error_code() != 0) {
      job.result = Status(ErrorCodeFromInt(r.error_code()));
      continue;
    }
    const uint64_t size = r.size();
    bool fits = true;
    if (mode == PieceMode::kScatter) {
      // The value fills the buffers in order.
      uint64_t at = 0;
      for (const auto& p : pieces[i]) {
        if (at == size) break;
        const uint64_t len = std::min(p.length, size - at);
        if (len > 0) {
          job.pieces.push_back(
              ValuePiece{at, static_cast<uint8_t*>(p.buf), len});
        }
        at += len;
      }
      fits = at == size;
      job.piece_bytes = size;
    } else {
      for (size_t k = 0; k < pieces[i].size(); ++k) {
        const auto& p = pieces[i][k];
        if (p.value_offset > size || p.length > size - p.value_offset) {
          if (outside) {
            (*outside)[i][k] = true;
            continue;
          }
          fits = false;
          break;
        }
        if (p.length == 0) continue;
        job.pieces.push_back(
            ValuePiece{p.value_offset, static_cast<uint8_t*>(p.buf), p.length});
        job.piece_bytes += p.length;
      }
    }
    if (!fits) {
      job.result = Status(ErrorCode::INVALID_PARAMS,
                          mode == PieceMode::kScatter
                              ? "the buffers hold fewer bytes than the value"
                              : "a range lies outside the value");
      continue;
    }
    if (job.pieces.empty()) {
      job.result = job.piece_bytes;  // nothing to move (an empty value)
      continue;
    }
    job.reply = &r;
    job.lease_deadline_ms = replies.lease_deadline_ms[j];
    job.key = keys[i];
    // Never used as a destination (every job has pieces); names the first.
    job.dest = job.pieces[0].buf;
    job.result = Status(ErrorCode::OBJECT_NOT_FOUND, "no readable replica");
  }
  RunReads(state_->data, state_->config.tenant, jobs, state_->prefetcher.get());
  for (size_t j = 0; j < asked.size(); ++j) out[asked[j]] = jobs[j].result;
  return out;
}

std::vector<Result<uint64_t>> Client::BatchGetIntoParts(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ConstSlice>>& bufs) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  std::vector<std::vector<ValueRange>> pieces(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    for (const auto& b : bufs[i]) {
      pieces[i].push_back(ValueRange{0, const_cast<void*>(b.data), b.size});
    }
  }
  return ReadPieces(keys, pieces, PieceMode::kScatter);
}

std::vector<Result<uint64_t>> Client::BatchGetRanges(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ValueRange>>& ranges,
    std::vector<std::vector<bool>>* outside) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  return ReadPieces(keys, ranges, PieceMode::kRanges, outside);
}

std::vector<Result<uint64_t>> Client::BatchGetInto(
    const std::vector<std::string>& keys, const std::vector<void*>& bufs,
    const std::vector<uint64_t>& sizes) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  // Lease-cached same-host gets first, without building the general path's
  // vectors; whatever they do not answer goes the general way.
  const size_t n = keys.size();
  if (state_->config.lease_cache && n > 0 && bufs.size() == n &&
      sizes.size() == n) {
    std::vector<Result<uint64_t>> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::optional<Result<uint64_t>> hit;
      if (bufs[i] != nullptr && state_->Registered(bufs[i], sizes[i]))
        hit = CachedShmRead(keys[i], bufs[i], sizes[i]);
      if (!hit) break;
      out.push_back(std::move(*hit));
    }
    if (out.size() == n) return out;
    if (!out.empty()) {
      const size_t done = out.size();
      auto rest = ReadInto(
          std::vector<std::string_view>(keys.begin() + done, keys.end()),
          std::vector<void*>(bufs.begin() + done, bufs.end()),
          std::vector<uint64_t>(sizes.begin() + done, sizes.end()), true);
      for (auto& r : rest) out.push_back(std::move(r));
      return out;
    }
  }
  return ReadInto(std::vector<std::string_view>(keys.begin(), keys.end()), bufs,
                  sizes, true);
}

Result<uint64_t> Client::GetInto(std::string_view key, void* buf,
                                 uint64_t size) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  if (state_->config.lease_cache && buf != nullptr) {
    if (auto hit = CachedShmRead(key, buf, size)) return std::move(*hit);
  }
  return ReadInto({key}, {buf}, {size}, false)[0];
}

// The lease-cached get of a same-host value: one map lookup and one memcpy,
// no vectors, no master. Anything unusual (no entry, lease near its end, no
// shared-memory replica, a small buffer) takes the general path.
std::optional<Result<uint64_t>> Client::CachedShmRead(std::string_view key,
                                                      void* buf,
                                                      uint64_t size) {
  const uint8_t* src = nullptr;
  std::shared_ptr<const ShmSegment> hold;
  uint64_t len = 0;
  int64_t deadline = 0, margin = 0;
  {
    std::lock_guard<std::mutex> lock(state_->cache_mu);
    auto it = state_->cache.find(key);
    if (it == state_->cache.end()) return std::nullopt;
    State::CachedReply& c = it->second;
    if (!c.resolved) {
      c.resolved = true;
      for (const auto& r : c.reply->replicas()) {
        if (r.kind() != rpc::MEMORY) continue;
        c.shm_src =
            state_->data.ResolveShm(r.memory(), c.reply->size(), &c.shm_seg);
        break;  // the best replica only, as the general path would try first
      }
    }
    if (c.shm_src == nullptr || c.reply->size() > size) return std::nullopt;
    src = c.shm_src;
    hold = c.shm_seg;  // the entry may go while we copy
    len = c.reply->size();
    deadline = c.deadline_ms;
    margin = c.margin_ms;
  }
  // One clock read, after the copy: it alone decides whether the bytes can
  // be trusted (the master keeps the range until the lease ends).
  std::memcpy(buf, src, len);
  const int64_t now = SteadyMsNoEarlierThanNow();
  if (now + margin >= deadline) {
    // Near or past the end of the lease: the next get asks the master.
    std::lock_guard<std::mutex> lock(state_->cache_mu);
    auto it = state_->cache.find(key);
    if (it != state_->cache.end() && it->second.deadline_ms == deadline)
      state_->cache.erase(it);
    if (now > deadline) return std::nullopt;  // copy again, under a new lease
  }
  state_->lease_cache_hits.fetch_add(1, std::memory_order_relaxed);
  state_->data.shm_bytes_read.fetch_add(len, std::memory_order_relaxed);
  MarkDataPath(kPathShm);
  return Result<uint64_t>(len);
}

std::vector<Result<std::string>> Client::BatchGet(
    const std::vector<std::string>& keys) {
  OpTimer timer(&state_->op_metrics, ClientOp::kGet);
  const size_t n = keys.size();
  std::vector<Result<std::string>> out(n, ErrorCode::INTERNAL_ERROR);
  if (n == 0) return out;
  Replies replies =
      FetchReplies(std::vector<std::string_view>(keys.begin(), keys.end()));
  if (!replies.status.ok()) {
    std::fill(out.begin(), out.end(), replies.status);
    return out;
  }
  std::vector<ReadJob> jobs(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& r = *replies.items[i];
    if (r.error_code() != 0) {
      jobs[i].result = Status(ErrorCodeFromInt(r.error_code()));
      continue;
    }
    jobs[i].owned.resize(r.size());
    jobs[i].dest = reinterpret_cast<uint8_t*>(jobs[i].owned.data());
    jobs[i].reply = &r;
    jobs[i].lease_deadline_ms = replies.lease_deadline_ms[i];
    jobs[i].key = keys[i];
    jobs[i].result = Status(ErrorCode::OBJECT_NOT_FOUND, "no readable replica");
  }
  RunReads(state_->data, state_->config.tenant, jobs, state_->prefetcher.get());
  for (size_t i = 0; i < n; ++i) {
    if (jobs[i].result.ok()) {
      out[i] = std::move(jobs[i].owned);
    } else {
      out[i] = jobs[i].result.status();
    }
  }
  return out;
}

Result<std::string> Client::Get(std::string_view key) {
  auto r = BatchGet({std::string(key)});
  return std::move(r[0]);
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
  if (!existing.empty()) state_->prefetcher->TriggerPrefetch(existing, false);
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
    std::lock_guard<std::mutex> lock(state_->cache_mu);
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
