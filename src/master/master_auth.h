// Who may call which kvpool-master RPC (docs/security.md): each handler of
// MasterGrpcService asks RpcAuthorizer::Check first. The token in the
// call's kvpool-auth metadata says who the caller is (common/auth.h); the
// table in master_auth.cc says what that role may do; a tenant credential
// may in addition only touch its own tenant's keys.
#ifndef KVPOOL_MASTER_MASTER_AUTH_H_
#define KVPOOL_MASTER_MASTER_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/auth.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "master/master_config.h"

namespace kvpool {

// One per RPC of rpc::MasterService.
enum class RpcMethod : uint8_t {
  kMountSegment,
  kUnmountSegment,
  kHeartbeat,
  kPullPromotionTasks,
  kPutStart,
  kBatchPutStart,
  kPutEnd,
  kBatchPutEnd,
  kPutRevoke,
  kBatchPutRevoke,
  kGetReplicaList,
  kBatchGetReplicaList,
  kExistKey,
  kBatchExistKey,
  kRemove,
  kRemoveAll,
  kBatchQueryReadOnly,
  kGetClusterStats,
  kNotifyOffload,
  kRegisterDiskObjects,
  kRegisterMemoryObjects,
  kRemoveDiskReplicas,
  kPromotionAllocStart,
  kNotifyPromotion,
  kBatchPromotionAllocStart,
  kBatchPromotionNotify,
  kRegisterPrefetchTask,
  kBatchPrefetchToMemory,
  kBatchRemove,
  kMountExtraSegment,
  kClientPing,
  kNumMethods,
};

// "/kvpool.rpc.MasterService/PutStart": what tokens are signed for.
const char* RpcMethodName(RpcMethod m);
// Whether `role` may call `m` at all (a tenant then only for its tenant).
bool RoleMayCall(auth::Role role, RpcMethod m);

// Tokens whose MAC has verified, by their exact bytes. A client mints a
// token per RPC method once a second and sends it on every call of that
// second, so nearly every call finds its token here and skips the two
// HMACs it would otherwise cost (~20 us per call on a loaded master, where
// gRPC's sync server hands calls to short-lived threads, so a per-thread
// cache missed nearly always). Holds at most `capacity` tokens: a full
// shard first drops its tokens older than `max_age_ms` (the master refuses
// them anyway), then, if that frees nothing, all of them. Thread-safe.
class VerifiedTokenCache {
 public:
  struct Entry {
    RpcMethod method;  // the RPC the token was signed for
    auth::Role role;
    uint32_t principal_offset, principal_size;  // within the token
    int64_t issued_ms;
  };
  VerifiedTokenCache(int64_t max_age_ms, size_t capacity);
  VerifiedTokenCache(const VerifiedTokenCache&) = delete;
  VerifiedTokenCache& operator=(const VerifiedTokenCache&) = delete;

  bool Find(std::string_view token, Entry* out) const;
  void Remember(std::string_view token, const Entry& entry, int64_t now_ms);
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<std::string, Entry> tokens ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(std::string_view token) const;

  const int64_t max_age_ms_;
  const size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

class RpcAuthorizer {
 public:
  // Null when config.cluster_secret_file is empty (authentication off); an
  // error when the secret file is unusable. Refusals are counted in
  // `metrics` (kvpool_master_auth_refused_total).
  static Result<std::unique_ptr<RpcAuthorizer>> Create(
      const MasterConfig& config, MetricsRegistry* metrics);
  RpcAuthorizer(const auth::ClusterSecret& secret, int64_t max_clock_skew_ms,
                MetricsRegistry* metrics);

  // OK, UNAUTHENTICATED (no token or a token that does not verify), or
  // PERMISSION_DENIED (a valid identity acting outside its rights). The
  // token is the request's auth_token, else `batch_token` (for an item of a
  // batch, the batch's), else the metadata's.
  template <typename Req>
  grpc::Status Check(const grpc::ServerContextBase& ctx, RpcMethod m,
                     const Req& req, std::string_view batch_token = {}) const {
    auth::Role role;
    std::string_view principal;
    std::string_view body_token = batch_token;
    if constexpr (requires { req.auth_token(); }) {
      if (!req.auth_token().empty()) body_token = req.auth_token();
    }
    if (grpc::Status s = Authenticate(ctx, m, body_token, &role, &principal);
        !s.ok())
      return s;
    if (role != auth::Role::kTenant) return grpc::Status::OK;
    if constexpr (requires { req.tenant(); }) {
      return CheckTenant(principal, req.tenant());
    } else if constexpr (requires { req.items(0).tenant(); }) {
      for (const auto& item : req.items()) {
        if (grpc::Status s = CheckTenant(principal, item.tenant()); !s.ok())
          return s;
      }
      return grpc::Status::OK;
    } else {
      // RoleMayCall lets no tenant reach a request without a tenant.
      return Deny("a tenant credential cannot call this RPC");
    }
  }

  // false: the master behaves as one from before auth_token (it reads the
  // metadata only and never says otherwise), for tests of mixed versions.
  void set_reads_body_token(bool reads) {
    reads_body_token_.store(reads, std::memory_order_relaxed);
  }

 private:
  // Verifies the call's token for `m` (`body_token`, the request's, when
  // set; else the metadata's) and the role's right to call it; on success
  // `principal` points into that token.
  grpc::Status Authenticate(const grpc::ServerContextBase& ctx, RpcMethod m,
                            std::string_view body_token, auth::Role* role,
                            std::string_view* principal) const;
  grpc::Status TokenOf(const grpc::ServerContextBase& ctx,
                       std::string_view body_token,
                       std::string_view* token) const;
  grpc::Status CheckTenant(std::string_view principal,
                           std::string_view tenant) const;
  grpc::Status Unauthenticated(std::string msg) const;
  grpc::Status Deny(std::string msg) const;

  // ~256 bytes a token: at most ~1 MiB.
  static constexpr size_t kTokenCacheCapacity = 4096;
  auth::TokenVerifier verifier_;
  std::atomic<bool> reads_body_token_{true};
  mutable VerifiedTokenCache cache_;
  Counter* refused_unauthenticated_;
  Counter* refused_permission_;
  Counter* cache_hits_;
  Counter* cache_misses_;
  Counter* in_request_;
  Counter* in_metadata_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_AUTH_H_
