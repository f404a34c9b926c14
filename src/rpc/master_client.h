// A gRPC connection to kvpool-master with deadlines. Every call returns
// RPC_FAIL (with gRPC's message) when the master cannot be reached, so
// callers never block forever on a dead master, ILLEGAL_CLIENT when it
// refuses the caller's credential, and INVALID_PARAMS for a request over
// the master's bounds (rpc/request_limits.h; a batch over the item limit is
// refused before it is sent). Thread-safe.
#ifndef KVPOOL_RPC_MASTER_CLIENT_H_
#define KVPOOL_RPC_MASTER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/auth.h"
#include "ha/etcd_client.h"
#include "kvpool.grpc.pb.h"
#include "kvpool/status.h"
#include "rpc/request_limits.h"

namespace kvpool {

// How a MasterClient proves who it is and protects its channel
// (docs/security.md). Read from files once, by LoadMasterSecurity, so that
// constructing a MasterClient does no I/O and cannot fail.
struct MasterSecurity {
  // Set: every call carries a kvpool-auth token minted from it.
  std::optional<auth::Credential> credential;
  bool tls = false;
  std::string tls_root_certs;  // PEM of the CA that signed the master's cert
  // PEM of a client certificate and its key, for a master that requires one.
  std::string tls_cert_chain;
  std::string tls_private_key;
};

struct MasterSecurityFiles {
  // A credential file (kvpool credential), or the cluster secret file,
  // which makes the caller secret_role named secret_principal. Empty: none.
  std::string credential_file;
  auth::Role secret_role = auth::Role::kAdmin;
  std::string secret_principal = "admin";
  std::string tls_ca_file;    // set: TLS, the master verified against it
  std::string tls_cert_file;  // with tls_key_file: a client certificate
  std::string tls_key_file;
};

// INVALID_PARAMS or a file error naming the file that is wrong.
Result<MasterSecurity> LoadMasterSecurity(const MasterSecurityFiles& files);

inline constexpr char kPermissionDenied[] = ": permission denied: ";
// True for what a call returns when the master accepted the credential but
// not the call (PERMISSION_DENIED): the master is up and knows the caller.
inline bool IsPermissionDenied(const Status& s) {
  return s.code() == ErrorCode::ILLEGAL_CLIENT &&
         s.message().find(kPermissionDenied) != std::string::npos;
}

// Every RPC of rpc::MasterService, for the names tokens are signed for.
// master_client_test checks it against the service's descriptor.
#define KVPOOL_MASTER_RPCS(X) \
  X(MountSegment)             \
  X(UnmountSegment)           \
  X(Heartbeat)                \
  X(PullPromotionTasks)       \
  X(PutStart)                 \
  X(BatchPutStart)            \
  X(PutEnd)                   \
  X(BatchPutEnd)              \
  X(PutRevoke)                \
  X(BatchPutRevoke)           \
  X(GetReplicaList)           \
  X(BatchGetReplicaList)      \
  X(ExistKey)                 \
  X(BatchExistKey)            \
  X(Remove)                   \
  X(RemoveAll)                \
  X(BatchQueryReadOnly)       \
  X(GetClusterStats)          \
  X(NotifyOffload)            \
  X(RegisterDiskObjects)      \
  X(RegisterMemoryObjects)    \
  X(RemoveDiskReplicas)       \
  X(PromotionAllocStart)      \
  X(NotifyPromotion)          \
  X(BatchPromotionAllocStart) \
  X(BatchPromotionNotify)     \
  X(RegisterPrefetchTask)     \
  X(BatchPrefetchToMemory)    \
  X(BatchRemove)              \
  X(MountExtraSegment)        \
  X(ClientPing)

// The full gRPC name ("/kvpool.rpc.MasterService/PutStart") of a stub
// method, or nullptr for one missing from KVPOOL_MASTER_RPCS.
template <typename Method>
const char* MasterMethodName(Method m) {
#define KVPOOL_MATCH_RPC(name)                                               \
  if constexpr (std::is_same_v<Method,                                       \
                               decltype(&rpc::MasterService::Stub::name)>) { \
    if (m == &rpc::MasterService::Stub::name)                                \
      return "/kvpool.rpc.MasterService/" #name;                             \
  }
  KVPOOL_MASTER_RPCS(KVPOOL_MATCH_RPC)
#undef KVPOOL_MATCH_RPC
  return nullptr;
}

class MasterClient {
 public:
  // `address` names one master ("host:port") or, for a cluster with
  // standby masters (docs/ha.md), etcd: "etcd://h1:2379;h2:2379" or
  // "etcd://h1:2379,h2:2379/<cluster_id>" (cluster "kvpool" when left out).
  // Then the leader is read from etcd at the first call and followed across
  // failovers. An address that does not parse fails every call with
  // INVALID_PARAMS: construction does no I/O and cannot fail.
  MasterClient(const std::string& address, int timeout_ms,
               MasterSecurity security = {});
  ~MasterClient();

  // Calls `method` of the stub, e.g.
  //   Call(&rpc::MasterService::Stub::PutEnd, req, &resp)
  // A gRPC UNIMPLEMENTED (an older master without this RPC) maps to
  // UNAVAILABLE_IN_CURRENT_STATUS so callers can degrade quietly.
  template <typename Req, typename Resp>
  Status Call(grpc::Status (rpc::MasterService::Stub::*method)(
                  grpc::ClientContext*, const Req&, Resp*),
              const Req& req, Resp* resp) const {
    if (Status s = CheckBatch(req); !s.ok()) return s;
    auto conn = Connection();
    if (!conn.ok()) return conn.status();
    std::shared_ptr<const Conn> c = std::move(conn.value());
    grpc::ClientContext ctx;
    grpc::Status s = Invoke(*c, &ctx, method, req, resp);
    if (etcd_) {
      s = FailOver(c, s, method, req, resp);
      return ToStatus(s, *c);
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return ToStatus(s, *c);
    // The channel still held a connection to a master that has gone (a
    // restart): the first call on it fails at once. Once more, waiting for
    // the new connection, so a restart costs callers no failed call; at
    // most a second, so a master that is down still fails fast.
    return ToStatus(InvokeAgain(*c, method, req, resp, 1000), *c);
  }
  // The same with a caller-owned context (so another thread may TryCancel
  // it, e.g. to end a long-poll heartbeat at shutdown) and, optionally, its
  // own deadline; no second try, but under HA an unreachable leader makes
  // the next call go to its successor.
  template <typename Req, typename Resp>
  Status CallWith(grpc::ClientContext* ctx,
                  grpc::Status (rpc::MasterService::Stub::*method)(
                      grpc::ClientContext*, const Req&, Resp*),
                  const Req& req, Resp* resp, int timeout_ms = -1) const {
    if (Status s = CheckBatch(req); !s.ok()) return s;
    auto conn = Connection();
    if (!conn.ok()) return conn.status();
    grpc::Status s = Invoke(*conn.value(), ctx, method, req, resp, timeout_ms);
    if (etcd_ && LeaderMayBeGone(s)) {
      (void)FollowLeader(conn.value(), std::min(timeout_ms_, 1000));
    }
    return ToStatus(s, *conn.value());
  }

  // Whether the leader is found in etcd (an etcd:// address).
  bool follows_leader() const { return etcd_ != nullptr; }

  // The master calls go to now ("host:port"; empty before the first call
  // under HA).
  std::string address() const;

  // Fencing (docs/ha.md). Replies to nodes carry the epoch of the leader
  // that sent them: false for one older than an epoch already seen (from
  // etcd or a reply) — a stale leader's, to be ignored; the next call then
  // asks etcd who leads. 0 (a master without HA) is always accepted.
  bool AcceptEpoch(uint64_t epoch) const;
  // The newest epoch seen, for requests to carry (known_epoch).
  uint64_t known_epoch() const {
    return known_epoch_.load(std::memory_order_acquire);
  }
  // How many times calls moved to another leader.
  uint64_t leader_changes() const {
    return leader_changes_.load(std::memory_order_relaxed);
  }

 private:
  struct Conn {
    std::string address;
    uint64_t epoch = 0;  // 0 without HA
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<rpc::MasterService::Stub> stub;
    // Whether this master reads the token from the request (it said so with
    // auth::kBodyTokenHeader); false until then and for older masters.
    mutable std::atomic<bool> token_in_body{false};
  };
  std::shared_ptr<const Conn> Dial(const std::string& address,
                                   uint64_t epoch) const;
  // The connection to use: the fixed one, or under HA the current leader's
  // (asking etcd when there is none yet).
  Result<std::shared_ptr<const Conn>> Connection() const;
  // Under HA: the leader etcd names now if it is not `stale`'s master;
  // waits up to `wait_ms` for one to appear. Returns `stale` when there is
  // no other (it may be null).
  std::shared_ptr<const Conn> FollowLeader(std::shared_ptr<const Conn> stale,
                                           int wait_ms) const;

  template <typename Req, typename Resp>
  grpc::Status Invoke(const Conn& c, grpc::ClientContext* ctx,
                      grpc::Status (rpc::MasterService::Stub::*method)(
                          grpc::ClientContext*, const Req&, Resp*),
                      const Req& req, Resp* resp, int timeout_ms = -1) const {
    ctx->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(timeout_ms < 0 ? timeout_ms_ : timeout_ms));
    grpc::ClientContext again;  // for a master that ignored auth_token
    if (credential_) {
      const char* name = MasterMethodName(method);
      if (name == nullptr) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "RPC missing from KVPOOL_MASTER_RPCS");
      }
      if (c.token_in_body.load(std::memory_order_relaxed)) {
        Req signed_req(req);
        signed_req.set_auth_token(TokenFor(name));
        grpc::Status s = (c.stub.get()->*method)(ctx, signed_req, resp);
        if (!IgnoredTokenInBody(s)) {
          return etcd_ && s.ok() ? CheckEpoch(*ctx) : s;
        }
        // The master at this address no longer reads auth_token (an older
        // version started in its place): back to the metadata, and the
        // call once more, which it refused before doing anything.
        c.token_in_body.store(false, std::memory_order_relaxed);
        again.set_deadline(ctx->deadline());
        ctx = &again;
      }
      ctx->AddMetadata(auth::kMetadataKey, TokenFor(name));
    }
    grpc::Status s = (c.stub.get()->*method)(ctx, req, resp);
    if (credential_ && s.ok() && SaysTokenInBody(*ctx))
      c.token_in_body.store(true, std::memory_order_relaxed);
    if (etcd_ && s.ok()) return CheckEpoch(*ctx);
    return s;
  }
  // The master's reply says it reads the token from the request.
  static bool SaysTokenInBody(const grpc::ClientContext& ctx);
  // A refusal that means the master did not look at auth_token.
  static bool IgnoredTokenInBody(const grpc::Status& s);
  // Under HA: UNAVAILABLE for a reply whose kvpool-epoch header is older
  // than an epoch already seen (a deposed leader's), so it is never used.
  grpc::Status CheckEpoch(const grpc::ClientContext& ctx) const;
  template <typename Req, typename Resp>
  grpc::Status InvokeAgain(const Conn& c,
                           grpc::Status (rpc::MasterService::Stub::*method)(
                               grpc::ClientContext*, const Req&, Resp*),
                           const Req& req, Resp* resp, int wait_ms) const {
    grpc::ClientContext again;
    again.set_wait_for_ready(true);
    return Invoke(c, &again, method, req, resp, std::min(timeout_ms_, wait_ms));
  }
  static bool LeaderMayBeGone(const grpc::Status& s) {
    // UNAVAILABLE: refused, reset, or a standby's answer; DEADLINE_EXCEEDED:
    // a leader that answers nothing (frozen, cut off), and what a
    // wait-for-ready call to a dead one ends with.
    return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }
  // Under HA, after the first attempt on `c` ended in `s`: when the leader
  // may be gone, the call goes to the leader etcd names (waiting, within the
  // call's timeout, for one of another epoch). `c` becomes the connection
  // the final answer came from.
  template <typename Req, typename Resp>
  grpc::Status FailOver(std::shared_ptr<const Conn>& c, grpc::Status s,
                        grpc::Status (rpc::MasterService::Stub::*method)(
                            grpc::ClientContext*, const Req&, Resp*),
                        const Req& req, Resp* resp) const {
    if (!LeaderMayBeGone(s)) return s;
    const bool timed_out =
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    auto next = FollowLeader(c, /*wait_ms=*/0);
    if (next == c) {
      // A call that timed out has used its time; one refused at once gets
      // a short second try on the same leader (a connection reset while
      // the leader lives), then waits for etcd to name a successor.
      if (timed_out) return s;
      s = InvokeAgain(*c, method, req, resp, 250);
      if (!LeaderMayBeGone(s)) return s;
      next = FollowLeader(c, timeout_ms_);
      if (next == c) return s;
    }
    c = next;
    return InvokeAgain(*c, method, req, resp, 1000);
  }
  // A batch the master would refuse (rpc/request_limits.h), refused here
  // without sending it.
  template <typename Req>
  static Status CheckBatch(const Req& req) {
    const int items = BatchItems(req);
    if (items <= kMaxBatchItems) return Status::OK();
    return Status(ErrorCode::INVALID_PARAMS,
                  "a batch of " + std::to_string(items) +
                      " items is larger than the master's limit of " +
                      std::to_string(kMaxBatchItems) + " per call");
  }
  Status ToStatus(const grpc::Status& s, const Conn& c) const {
    if (s.ok()) return Status::OK();
    // The master refused the request as it is (a batch over its limit), or
    // gRPC did: a message over a size limit (the master's max receive, with
    // the limit in the message; or this channel's): sending it again will
    // not help.
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "master " + c.address + ": " + s.error_message());
    }
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
        s.error_message().find("larger than max") != std::string::npos) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "master " + c.address +
                        ": over a message size limit: " + s.error_message());
    }
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                    "master lacks RPC: " + s.error_message());
    }
    // Not RPC_FAIL: the master is up and answered; retrying will not help.
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Status(ErrorCode::ILLEGAL_CLIENT,
                    "master " + c.address +
                        " refused the credential: " + s.error_message());
    }
    if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return Status(
          ErrorCode::ILLEGAL_CLIENT,
          "master " + c.address + kPermissionDenied + s.error_message());
    }
    return Status(ErrorCode::RPC_FAIL,
                  "master " + c.address + ": " + s.error_message());
  }
  int timeout_ms_;
  grpc::ChannelArguments args_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  // One master: set at construction, never changes.
  std::shared_ptr<const Conn> fixed_;
  Status address_error_;  // the address did not parse: every call fails
  // HA: etcd, the leader's key, and the current leader's connection.
  std::unique_ptr<ha::EtcdClient> etcd_;
  std::string leader_key_;
  std::string etcd_list_;  // for messages
  mutable std::mutex conn_mu_;
  mutable std::shared_ptr<const Conn> current_;  // guarded by conn_mu_
  mutable std::mutex follow_mu_;  // one thread asks etcd at a time
  mutable std::atomic<uint64_t> known_epoch_{0};
  mutable std::atomic<uint64_t> leader_changes_{0};
  // The token for `method`, minted again once a second. A header value new
  // at every call cost some 35 us per RPC here (HTTP/2 header compression
  // cannot index it), a repeated one next to nothing; the master accepts a
  // token for auth_max_clock_skew_ms anyway.
  std::string TokenFor(const char* method) const;
  std::shared_ptr<const auth::Credential> credential_;  // null: none
  mutable std::mutex token_mu_;
  mutable std::unordered_map<const char*, std::pair<int64_t, std::string>>
      tokens_;  // by method name: (issued ms, token)
};

}  // namespace kvpool

#endif  // KVPOOL_RPC_MASTER_CLIENT_H_
