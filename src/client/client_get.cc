// Gets of kvpool::Client (see kvpool/client.h): replica lists from the
// master or the lease cache, and the reads of whole values, pieces and
// ranges into the caller's memory or into strings.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "client/client_state.h"

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
      // below goes to SSD at once and never waits for the promotion, which
      // is for the next get.
      kicked = true;
      std::vector<std::string> disk_keys;
      for (const auto& op : disk) disk_keys.push_back(op.key);
      prefetcher->TriggerPrefetch(disk_keys, PrefetchTrigger::kGetKick);
    }
    // Each group's copies are stamped when that group ends: a batch's DRAM
    // blocks are not judged by how long its SSD reads took.
    if (!items.empty()) {
      data.Read(items);
      const int64_t done = SteadyMs();
      for (size_t owner : item_owner) jobs[owner].copied_ms = done;
    }
    if (!disk.empty()) {
      data.ReadKeys(disk, disk_peer);
      const int64_t done = SteadyMs();
      for (size_t owner : disk_owner) jobs[owner].copied_ms = done;
    }
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
  // be trusted (Mooncake's LEASE_EXPIRED). Judged per value, by when the
  // transfer that carried it ended.
  for (auto& j : jobs) {
    const int64_t copied = j.copied_ms != 0 ? j.copied_ms : SteadyMs();
    if (j.result.ok() && j.reply && copied > j.lease_deadline_ms) {
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
      MutexLock lock(&state_->cache_mu);
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
    MutexLock lock(&state_->cache_mu);
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
      MutexLock lock(&state_->cache_mu);
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
  MutexLock lock(&state_->cache_mu);
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
    MutexLock lock(&state_->cache_mu);
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
    MutexLock lock(&state_->cache_mu);
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

}  // namespace kvpool
