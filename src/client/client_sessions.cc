// Put and get sessions of kvpool::Client (see kvpool/client.h): the
// master's two-phase put and its read lease, held open across several
// ranged writes or reads.
#include <algorithm>

#include "client/client_state.h"

namespace kvpool {

namespace {
using Stub = rpc::MasterService::Stub;

// Open sessions one client keeps, each kind: a caller that never ends them
// gets NO_AVAILABLE_HANDLE rather than unbounded memory.
constexpr size_t kMaxSessions = 65536;

Status TooManySessions() {
  return Status(ErrorCode::NO_AVAILABLE_HANDLE,
                "too many open sessions; end some first");
}

Status NoSession() {
  return Status(ErrorCode::OBJECT_NOT_FOUND, "no open session for the key");
}

// The data plane's pieces for `ranges` inside a value of `size` bytes;
// false if one lies outside it or outside registered memory.
bool ToPieces(Client::State& state, const std::vector<ValueRange>& ranges,
              uint64_t size, std::vector<ValuePiece>* pieces, uint64_t* bytes) {
  for (const auto& r : ranges) {
    if (r.value_offset > size || r.length > size - r.value_offset) return false;
    if (r.length == 0) continue;
    if (r.buf == nullptr || !state.Registered(r.buf, r.length)) return false;
    pieces->push_back(
        ValuePiece{r.value_offset, static_cast<uint8_t*>(r.buf), r.length});
    *bytes += r.length;
  }
  return true;
}

// Ends (`end`) or revokes the sessions of `keys` at the master.
std::vector<Status> FinishPuts(Client::State& state,
                               const std::vector<std::string>& keys, bool end) {
  std::vector<Status> out(keys.size());
  rpc::BatchKeyRequest req;
  req.set_tenant(state.config.tenant);
  std::vector<size_t> idx;
  {
    MutexLock lock(&state.session_mu);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (state.put_sessions.erase(keys[i]) == 0) {
        out[i] = NoSession();
        continue;
      }
      req.add_keys(keys[i]);
      idx.push_back(i);
    }
  }
  if (idx.empty()) return out;
  rpc::BatchKeyStatus resp;
  Status s = state.master.Call(end ? &Stub::BatchPutEnd : &Stub::BatchPutRevoke,
                               req, &resp);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (!s.ok()) {
      out[idx[j]] = s;
    } else if (static_cast<int>(j) < resp.error_codes_size() &&
               resp.error_codes(static_cast<int>(j)) != 0) {
      out[idx[j]] = Status(ErrorCodeFromInt(resp.error_codes(j)),
                           end ? "PutEnd refused" : "PutRevoke refused");
    }
  }
  return out;
}
}  // namespace

std::vector<Status> Client::BatchPutSessionStart(
    const std::vector<std::string>& keys, const std::vector<uint64_t>& sizes,
    const ReplicateConfig& rc, bool upsert) {
  const size_t n = keys.size();
  std::vector<Status> out(n);
  if (sizes.size() != n) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
    return out;
  }
  if (n == 0) return out;
  if (upsert) ForgetCached(keys);
  // The sessions it opens keep the pinger going once this returns.
  State::PutInFlight in_flight(state_.get());
  rpc::BatchPutStartRequest start;
  start.set_client_id(state_->pinger.id());
  rpc::ReplicateConfig prc = ToProto(rc);
  std::vector<size_t> idx;
  {
    MutexLock lock(&state_->session_mu);
    for (size_t i = 0; i < n; ++i) {
      if (state_->put_sessions.size() + idx.size() >= kMaxSessions) {
        out[i] = TooManySessions();
        continue;
      }
      if (state_->put_sessions.count(keys[i]) ||
          std::find(keys.begin(), keys.begin() + i, keys[i]) !=
              keys.begin() + i) {
        out[i] = Status(ErrorCode::INVALID_PARAMS,
                        "a put session is already open for the key");
        continue;
      }
      auto* item = start.add_items();
      item->set_tenant(state_->config.tenant);
      item->set_key(keys[i]);
      item->set_size(sizes[i]);
      *item->mutable_config() = prc;
      item->set_upsert(upsert);
      idx.push_back(i);
    }
  }
  if (idx.empty()) return out;
  rpc::BatchPutStartResponse started;
  Status s = state_->master.Call(&Stub::BatchPutStart, start, &started);
  if (s.ok() && started.items_size() != static_cast<int>(idx.size())) {
    s = Status(ErrorCode::RPC_FAIL, "short PutStart reply");
  }
  MutexLock lock(&state_->session_mu);
  for (size_t j = 0; j < idx.size(); ++j) {
    const size_t i = idx[j];
    if (!s.ok()) {
      out[i] = s;
      continue;
    }
    auto& r = *started.mutable_items(static_cast<int>(j));
    if (r.error_code() != 0) {
      // Unlike a plain put, an existing key is an error here: the caller
      // would otherwise write into nothing.
      out[i] = Status(ErrorCodeFromInt(r.error_code()),
                      r.error_message().empty()
                          ? std::string("PutStart refused")
                          : "PutStart refused: " + r.error_message());
      continue;
    }
    State::PutSession ps;
    ps.start = std::make_shared<rpc::PutStartResponse>(std::move(r));
    ps.size = sizes[i];
    state_->put_sessions[keys[i]] = std::move(ps);
  }
  return out;
}

std::vector<Result<uint64_t>> Client::BatchPutSessionWrite(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ValueRange>>& ranges) {
  const size_t n = keys.size();
  std::vector<Result<uint64_t>> out(n, ErrorCode::INTERNAL_ERROR);
  if (ranges.size() != n) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
    return out;
  }
  std::vector<std::shared_ptr<rpc::PutStartResponse>> held(n);
  std::vector<std::vector<ValuePiece>> pieces(n);
  std::vector<uint64_t> bytes(n, 0);
  std::vector<TransferItem> items;
  std::vector<size_t> owner;
  for (size_t i = 0; i < n; ++i) {
    uint64_t size = 0;
    {
      MutexLock lock(&state_->session_mu);
      auto it = state_->put_sessions.find(keys[i]);
      if (it == state_->put_sessions.end()) {
        out[i] = NoSession();
        continue;
      }
      held[i] = it->second.start;
      size = it->second.size;
    }
    if (!ToPieces(*state_, ranges[i], size, &pieces[i], &bytes[i])) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "a range lies outside the value or registered memory");
      continue;
    }
    out[i] = bytes[i];
    if (pieces[i].empty()) continue;
    for (const auto& rep : held[i]->replicas()) {
      TransferItem t{.loc = &rep.memory(), .length = size};
      t.pieces = pieces[i];
      items.push_back(t);
      owner.push_back(i);
    }
  }
  state_->data.Write(items);
  for (size_t j = 0; j < items.size(); ++j) {
    if (items[j].result != ErrorCode::OK && out[owner[j]].ok()) {
      out[owner[j]] = Status(items[j].result, "writing the ranges failed");
    }
  }
  return out;
}

std::vector<Status> Client::BatchPutSessionEnd(
    const std::vector<std::string>& keys) {
  return FinishPuts(*state_, keys, /*end=*/true);
}

std::vector<Status> Client::BatchPutSessionRevoke(
    const std::vector<std::string>& keys) {
  return FinishPuts(*state_, keys, /*end=*/false);
}

std::vector<Status> Client::BatchGetSessionStart(
    const std::vector<std::string>& keys) {
  std::vector<Status> out(keys.size());
  if (keys.empty()) return out;
  Replies replies =
      FetchReplies(std::vector<std::string_view>(keys.begin(), keys.end()));
  if (!replies.status.ok()) {
    std::fill(out.begin(), out.end(), replies.status);
    return out;
  }
  MutexLock lock(&state_->session_mu);
  if (state_->get_sessions.size() + keys.size() > kMaxSessions) {
    const int64_t now = SteadyMs();
    std::erase_if(state_->get_sessions, [&](const auto& e) {
      return e.second.lease_deadline_ms < now;
    });
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto& r = replies.items[i];
    if (state_->get_sessions.size() >= kMaxSessions &&
        !state_->get_sessions.count(keys[i])) {
      out[i] = TooManySessions();
      continue;
    }
    if (r->error_code() != 0) {
      out[i] = Status(ErrorCodeFromInt(r->error_code()));
      state_->get_sessions.erase(keys[i]);
      continue;
    }
    state_->get_sessions[keys[i]] =
        State::GetSession{r, replies.lease_deadline_ms[i]};
  }
  return out;
}

std::vector<Result<uint64_t>> Client::BatchGetSessionRead(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<ValueRange>>& ranges) {
  const size_t n = keys.size();
  std::vector<Result<uint64_t>> out(n, ErrorCode::INTERNAL_ERROR);
  if (ranges.size() != n) {
    std::fill(out.begin(), out.end(),
              Status(ErrorCode::INVALID_PARAMS, "length mismatch"));
    return out;
  }
  const int64_t now = SteadyMs();
  std::vector<std::shared_ptr<const rpc::GetReplicaListResponse>> held(n);
  std::vector<ReadJob> jobs;
  std::vector<size_t> owner;
  for (size_t i = 0; i < n; ++i) {
    State::GetSession gs;
    {
      MutexLock lock(&state_->session_mu);
      auto it = state_->get_sessions.find(keys[i]);
      if (it == state_->get_sessions.end()) {
        out[i] = NoSession();
        continue;
      }
      gs = it->second;
    }
    if (now > gs.lease_deadline_ms) {
      out[i] = Status(ErrorCode::LEASE_EXPIRED,
                      "the session's lease ended; start a new one");
      continue;
    }
    held[i] = gs.reply;
    ReadJob job;
    if (!ToPieces(*state_, ranges[i], gs.reply->size(), &job.pieces,
                  &job.piece_bytes)) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "a range lies outside the value or registered memory");
      continue;
    }
    if (job.pieces.empty()) {
      out[i] = uint64_t{0};
      continue;
    }
    job.key = keys[i];
    job.reply = held[i].get();
    job.lease_deadline_ms = gs.lease_deadline_ms;
    job.dest = job.pieces[0].buf;
    job.result = Status(ErrorCode::OBJECT_NOT_FOUND, "no readable replica");
    jobs.push_back(std::move(job));
    owner.push_back(i);
  }
  RunReads(state_->data, state_->config.tenant, jobs, state_->prefetcher.get());
  for (size_t j = 0; j < jobs.size(); ++j) out[owner[j]] = jobs[j].result;
  return out;
}

Status Client::BatchGetSessionEnd(const std::vector<std::string>& keys) {
  MutexLock lock(&state_->session_mu);
  for (const auto& k : keys) state_->get_sessions.erase(k);
  return Status::OK();
}

}  // namespace kvpool
