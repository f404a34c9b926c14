// Puts of kvpool::Client (see kvpool/client.h): whole values, parts and
// registered buffers, with the retry of keys whose replica holder died or
// whose master changed in the middle of the put.
#include <algorithm>

#include "client/client_state.h"
#include "common/failpoint.h"

namespace kvpool {

namespace {
using Stub = rpc::MasterService::Stub;
}  // namespace

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
  State::PutInFlight in_flight(state_.get());
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
  start.set_client_id(state_->pinger.id());
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
  KVPOOL_FAILPOINT("client.put.after_start");
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
  WriterLock lock(&state_->buf_mu);
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
  WriterLock lock(&state_->buf_mu);
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

}  // namespace kvpool
