// A gRPC connection to kvpool-master with deadlines. Every call returns
// RPC_FAIL (with gRPC's message) when the master cannot be reached, so
// callers never block forever on a dead master, and ILLEGAL_CLIENT when it
// refuses the caller's credential. Thread-safe.
#ifndef KVPOOL_CLIENT_MASTER_CLIENT_H_
#define KVPOOL_CLIENT_MASTER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/auth.h"
#include "kvpool.grpc.pb.h"
#include "kvpool/status.h"

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
  X(MountExtraSegment)

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
  MasterClient(const std::string& address, int timeout_ms,
               MasterSecurity security = {});

  // Calls `method` of the stub, e.g.
  //   Call(&rpc::MasterService::Stub::PutEnd, req, &resp)
  // A gRPC UNIMPLEMENTED (an older master without this RPC) maps to
  // UNAVAILABLE_IN_CURRENT_STATUS so callers can degrade quietly.
  template <typename Req, typename Resp>
  Status Call(grpc::Status (rpc::MasterService::Stub::*method)(
                  grpc::ClientContext*, const Req&, Resp*),
              const Req& req, Resp* resp) const {
    grpc::ClientContext ctx;
    grpc::Status s = Invoke(&ctx, method, req, resp);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // The channel still held a connection to a master that has gone (a
      // restart): the first call on it fails at once. Once more, waiting
      // for the new connection, so a restart costs callers no failed call;
      // at most a second, so a master that is down still fails fast.
      grpc::ClientContext again;
      again.set_wait_for_ready(true);
      s = Invoke(&again, method, req, resp, std::min(timeout_ms_, 1000));
    }
    return ToStatus(s);
  }
  // The same with a caller-owned context (so another thread may TryCancel
  // it, e.g. to end a long-poll heartbeat at shutdown); no second try.
  template <typename Req, typename Resp>
  Status CallWith(grpc::ClientContext* ctx,
                  grpc::Status (rpc::MasterService::Stub::*method)(
                      grpc::ClientContext*, const Req&, Resp*),
                  const Req& req, Resp* resp) const {
    return ToStatus(Invoke(ctx, method, req, resp));
  }

  const std::string& address() const { return address_; }

 private:
  template <typename Req, typename Resp>
  grpc::Status Invoke(grpc::ClientContext* ctx,
                      grpc::Status (rpc::MasterService::Stub::*method)(
                          grpc::ClientContext*, const Req&, Resp*),
                      const Req& req, Resp* resp, int timeout_ms = -1) const {
    ctx->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(timeout_ms < 0 ? timeout_ms_ : timeout_ms));
    if (credential_) {
      const char* name = MasterMethodName(method);
      if (name == nullptr) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "RPC missing from KVPOOL_MASTER_RPCS");
      }
      ctx->AddMetadata(auth::kMetadataKey, TokenFor(name));
    }
    return (stub_.get()->*method)(ctx, req, resp);
  }
  Status ToStatus(const grpc::Status& s) const {
    if (s.ok()) return Status::OK();
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                    "master lacks RPC: " + s.error_message());
    }
    // Not RPC_FAIL: the master is up and answered; retrying will not help.
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Status(ErrorCode::ILLEGAL_CLIENT,
                    "master " + address_ +
                        " refused the credential: " + s.error_message());
    }
    if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return Status(
          ErrorCode::ILLEGAL_CLIENT,
          "master " + address_ + kPermissionDenied + s.error_message());
    }
    return Status(ErrorCode::RPC_FAIL,
                  "master " + address_ + ": " + s.error_message());
  }
  std::string address_;
  int timeout_ms_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::MasterService::Stub> stub_;
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

#endif  // KVPOOL_CLIENT_MASTER_CLIENT_H_
