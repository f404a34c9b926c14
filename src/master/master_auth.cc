#include "master/master_auth.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "common/crypto.h"

namespace kvpool {

namespace {

using auth::Role;

constexpr uint8_t Bit(Role r) { return uint8_t(1u << static_cast<int>(r)); }
constexpr uint8_t kNode = Bit(Role::kNode);
constexpr uint8_t kRouter = Bit(Role::kRouter);
constexpr uint8_t kAdmin = Bit(Role::kAdmin);
constexpr uint8_t kTenant = Bit(Role::kTenant);  // its own tenant only

struct MethodRule {
  RpcMethod method;
  const char* name;
  uint8_t roles;
  // The batch RPC whose handler calls this one's handler per item: the
  // token of that call, verified once there, also covers the items.
  RpcMethod batch_parent;
};

#define KVPOOL_RPC(m) RpcMethod::k##m, "/kvpool.rpc.MasterService/" #m
constexpr RpcMethod kNone = RpcMethod::kNumMethods;
// What each role may call. Nodes share one key, so any node may act for
// any node id (docs/security.md, limits). The router calls the tier lookup
// and the prefetch trigger (src/router); a node's SSD tier registers
// prefetch tasks for the keys it holds.
constexpr MethodRule kRules[] = {
    {KVPOOL_RPC(MountSegment), kNode | kAdmin, kNone},
    {KVPOOL_RPC(UnmountSegment), kNode | kAdmin, kNone},
    {KVPOOL_RPC(Heartbeat), kNode | kAdmin, kNone},
    {KVPOOL_RPC(PullPromotionTasks), kNode | kAdmin, kNone},
    {KVPOOL_RPC(PutStart), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(BatchPutStart), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(PutEnd), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(BatchPutEnd), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(PutRevoke), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(BatchPutRevoke), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(GetReplicaList), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(BatchGetReplicaList), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(ExistKey), kTenant | kAdmin, RpcMethod::kBatchExistKey},
    {KVPOOL_RPC(BatchExistKey), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(Remove), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(RemoveAll), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(BatchQueryReadOnly), kTenant | kAdmin | kRouter, kNone},
    {KVPOOL_RPC(GetClusterStats), kAdmin | kRouter | kNode, kNone},
    {KVPOOL_RPC(NotifyOffload), kNode | kAdmin, kNone},
    {KVPOOL_RPC(RegisterDiskObjects), kNode | kAdmin, kNone},
    {KVPOOL_RPC(RegisterMemoryObjects), kNode | kAdmin, kNone},
    {KVPOOL_RPC(RemoveDiskReplicas), kNode | kAdmin, kNone},
    {KVPOOL_RPC(PromotionAllocStart), kNode | kAdmin,
     RpcMethod::kBatchPromotionAllocStart},
    {KVPOOL_RPC(NotifyPromotion), kNode | kAdmin,
     RpcMethod::kBatchPromotionNotify},
    {KVPOOL_RPC(BatchPromotionAllocStart), kNode | kAdmin, kNone},
    {KVPOOL_RPC(BatchPromotionNotify), kNode | kAdmin, kNone},
    {KVPOOL_RPC(RegisterPrefetchTask), kTenant | kAdmin | kNode, kNone},
    {KVPOOL_RPC(BatchPrefetchToMemory), kTenant | kAdmin | kRouter, kNone},
    {KVPOOL_RPC(BatchRemove), kTenant | kAdmin, kNone},
    {KVPOOL_RPC(MountExtraSegment), kNode | kAdmin, kNone},
    {KVPOOL_RPC(ClientPing), kTenant | kAdmin, kNone},
};
#undef KVPOOL_RPC

constexpr bool RulesInEnumOrder() {
  if (std::size(kRules) != static_cast<size_t>(RpcMethod::kNumMethods))
    return false;
  for (size_t i = 0; i < std::size(kRules); ++i) {
    if (kRules[i].method != static_cast<RpcMethod>(i)) return false;
  }
  return true;
}
static_assert(RulesInEnumOrder(), "kRules must list every RpcMethod in order");

const MethodRule& Rule(RpcMethod m) { return kRules[static_cast<size_t>(m)]; }

// The short name for messages: "PutStart".
std::string_view ShortName(RpcMethod m) {
  std::string_view n = Rule(m).name;
  return n.substr(n.rfind('/') + 1);
}

std::string_view OrDefault(std::string_view tenant) {
  // The master files an empty tenant under "default" (master_service.h).
  return tenant.empty() ? std::string_view("default") : tenant;
}

}  // namespace

const char* RpcMethodName(RpcMethod m) { return Rule(m).name; }

bool RoleMayCall(Role role, RpcMethod m) {
  return (Rule(m).roles & Bit(role)) != 0;
}

Result<std::unique_ptr<RpcAuthorizer>> RpcAuthorizer::Create(
    const MasterConfig& config, MetricsRegistry* metrics) {
  if (config.cluster_secret_file.empty())
    return std::unique_ptr<RpcAuthorizer>();
  auto secret = auth::ClusterSecret::Load(config.cluster_secret_file);
  if (!secret.ok()) return secret.status();
  return std::make_unique<RpcAuthorizer>(
      secret.value(), config.auth_max_clock_skew_ms, metrics);
}

RpcAuthorizer::RpcAuthorizer(const auth::ClusterSecret& secret,
                             int64_t max_clock_skew_ms,
                             MetricsRegistry* metrics)
    : verifier_(secret, max_clock_skew_ms),
      cache_(max_clock_skew_ms, kTokenCacheCapacity),
      refused_unauthenticated_(&metrics->GetCounter(
          "kvpool_master_auth_refused_total", "reason=\"unauthenticated\"",
          "RPCs refused: no valid credential, or a credential acting outside "
          "its rights")),
      refused_permission_(&metrics->GetCounter(
          "kvpool_master_auth_refused_total", "reason=\"permission_denied\"")),
      cache_hits_(&metrics->GetCounter(
          "kvpool_master_auth_token_cache_total", "result=\"hit\"",
          "RPC tokens found already verified (hit) or verified with two "
          "HMACs (miss)")),
      cache_misses_(&metrics->GetCounter("kvpool_master_auth_token_cache_total",
                                         "result=\"miss\"")),
      in_request_(&metrics->GetCounter(
          "kvpool_master_auth_token_carrier_total", "carrier=\"request\"",
          "RPC tokens read from the request's auth_token field (request) or "
          "from the gRPC metadata (metadata: older clients, and each "
          "client's first call)")),
      in_metadata_(&metrics->GetCounter(
          "kvpool_master_auth_token_carrier_total", "carrier=\"metadata\"")) {}

VerifiedTokenCache::VerifiedTokenCache(int64_t max_age_ms, size_t capacity)
    : max_age_ms_(max_age_ms),
      per_shard_(std::max<size_t>(1, capacity / kShards)) {}

VerifiedTokenCache::Shard& VerifiedTokenCache::ShardFor(
    std::string_view token) const {
  return shards_[std::hash<std::string_view>()(token) % kShards];
}

bool VerifiedTokenCache::Find(std::string_view token, Entry* out) const {
  Shard& shard = ShardFor(token);
  MutexLock lock(&shard.mu);
  auto it = shard.tokens.find(std::string(token));
  if (it == shard.tokens.end()) return false;
  *out = it->second;
  return true;
}

void VerifiedTokenCache::Remember(std::string_view token, const Entry& entry,
                                  int64_t now_ms) {
  Shard& shard = ShardFor(token);
  MutexLock lock(&shard.mu);
  if (shard.tokens.size() >= per_shard_) {
    std::erase_if(shard.tokens, [&](const auto& e) {
      return now_ms - e.second.issued_ms > max_age_ms_;
    });
    if (shard.tokens.size() >= per_shard_) shard.tokens.clear();
  }
  shard.tokens.emplace(std::string(token), entry);
}

size_t VerifiedTokenCache::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    n += shard.tokens.size();
  }
  return n;
}

grpc::Status RpcAuthorizer::Unauthenticated(std::string msg) const {
  refused_unauthenticated_->Inc();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::move(msg));
}

grpc::Status RpcAuthorizer::Deny(std::string msg) const {
  refused_permission_->Inc();
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, std::move(msg));
}

grpc::Status RpcAuthorizer::TokenOf(const grpc::ServerContextBase& ctx,
                                    std::string_view body_token,
                                    std::string_view* token) const {
  // A token in the request is used as it is, without a look at the metadata:
  // building the metadata map is part of what the request field saves. A
  // token in the metadata as well is then simply not read; the request's
  // must verify on its own.
  const bool reads_body = reads_body_token_.load(std::memory_order_relaxed);
  if (reads_body && !body_token.empty()) {
    in_request_->Inc();
    *token = body_token;
    return grpc::Status::OK;
  }
  const auto& md = ctx.client_metadata();
  auto [first, last] = md.equal_range(auth::kMetadataKey);
  if (first == last) {
    return Unauthenticated(
        fmt::format("{}: this master requires one (see docs/security.md)",
                    auth::kMissingCredential));
  }
  if (std::next(first) != last)
    return Unauthenticated("more than one kvpool-auth credential");
  *token = std::string_view(first->second.data(), first->second.size());
  in_metadata_->Inc();
  if (reads_body) {
    // Tell the client that its next calls may carry the token in the
    // request (auth::kBodyTokenHeader). Handlers run before any reply is
    // sent, so the initial metadata is still open.
    const_cast<grpc::ServerContextBase&>(ctx).AddInitialMetadata(
        auth::kBodyTokenHeader, "1");
  }
  return grpc::Status::OK;
}

grpc::Status RpcAuthorizer::Authenticate(const grpc::ServerContextBase& ctx,
                                         RpcMethod m,
                                         std::string_view body_token,
                                         Role* role,
                                         std::string_view* principal) const {
  std::string_view token;
  if (grpc::Status s = TokenOf(ctx, body_token, &token); !s.ok()) return s;
  const int64_t now = auth::UnixNowMs();

  VerifiedTokenCache::Entry v;
  if (cache_.Find(token, &v)) {
    cache_hits_->Inc();
    // A batch handler runs its item handler inline with the same context:
    // the batch's token then also covers the item's check.
    if (v.method != m && v.method != Rule(m).batch_parent) {
      return Unauthenticated(
          fmt::format("kvpool-auth token was signed for {}, not {}",
                      ShortName(v.method), ShortName(m)));
    }
  } else {
    cache_misses_->Inc();
    auth::ParsedToken t;
    Status s = auth::ParseToken(token, &t);
    RpcMethod signed_for = m;
    if (s.ok() && !verifier_.MacMatches(t, RpcMethodName(m))) {
      // The item check of a batch whose token left the cache meanwhile.
      const RpcMethod parent = Rule(m).batch_parent;
      if (parent != kNone && verifier_.MacMatches(t, RpcMethodName(parent))) {
        signed_for = parent;
      } else {
        s = Status(ErrorCode::ILLEGAL_CLIENT,
                   "bad signature on kvpool-auth token (wrong key, or a token "
                   "minted for another RPC)");
      }
    }
    if (!s.ok()) return Unauthenticated(s.message());
    v.method = signed_for;
    v.role = t.role;
    v.principal_offset =
        static_cast<uint32_t>(t.principal.data() - token.data());
    v.principal_size = static_cast<uint32_t>(t.principal.size());
    v.issued_ms = t.issued_ms;
    cache_.Remember(token, v, now);
  }
  *role = v.role;
  *principal = token.substr(v.principal_offset, v.principal_size);
  if (Status s = verifier_.CheckFreshness(v.issued_ms, now); !s.ok())
    return Unauthenticated(s.message());
  if (!RoleMayCall(*role, m)) {
    return Deny(fmt::format("role '{}' may not call {}", RoleName(*role),
                            ShortName(m)));
  }
  return grpc::Status::OK;
}

grpc::Status RpcAuthorizer::CheckTenant(std::string_view principal,
                                        std::string_view tenant) const {
  if (OrDefault(tenant) == principal) return grpc::Status::OK;
  return Deny(fmt::format("tenant '{}' credential cannot act on tenant '{}'",
                          principal, OrDefault(tenant)));
}

}  // namespace kvpool
