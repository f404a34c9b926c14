// Identity on the control plane (docs/security.md): who may call which
// kvpool-master RPC.
//
// One cluster secret (a file of hex, mode 0600) is the root of every key:
//   role key   = HMAC(secret, "kvpool/role/" + role)    node, router, admin
//   tenant key = HMAC(secret, "kvpool/tenant/" + tenant)
// The master, nodes and routers read the secret itself; a client reads a
// credential file holding its role, principal and derived key, so a tenant
// never learns the secret or another tenant's key.
//
// Every call carries a fresh token (in the request's auth_token field, or
// in the gRPC metadata key kMetadataKey; see kBodyTokenHeader):
//   v1:<role>:<principal>:<issued_unix_ms>:<hex mac>
//   mac = HMAC(key, "v1|<role>|<principal>|<issued_unix_ms>|<method>")
// where <method> is the full gRPC method name
// ("/kvpool.rpc.MasterService/PutStart"): a token captured on one RPC does
// not open another. Without TLS an eavesdropper can still replay it to the
// same RPC until it is kDefaultMaxClockSkewMs old; TLS closes that.
#ifndef KVPOOL_COMMON_AUTH_H_
#define KVPOOL_COMMON_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kvpool/status.h"

namespace kvpool::auth {

enum class Role : uint8_t { kNode, kRouter, kAdmin, kTenant };
inline constexpr int kNumRoles = 4;

// "node", "router", "admin", "tenant".
const char* RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

inline constexpr char kMetadataKey[] = "kvpool-auth";
// Where the token travels. gRPC's handling of a custom header costs some
// 6 us per call on both sides together, a request field next to nothing, so
// a call carries its token in the request's auth_token field once the
// master has said that it reads it there: a master that does answers every
// call whose token came in the metadata with the header kBodyTokenHeader.
// Before that answer, and for masters that predate it, the token rides in
// the metadata under kMetadataKey.
inline constexpr char kBodyTokenHeader[] = "kvpool-auth-in-body";
// How a master's refusal of a call without any token begins: what a client
// that put its token in the request hears from a master that predates
// auth_token, and takes as the cue to go back to the metadata.
inline constexpr char kMissingCredential[] = "missing kvpool-auth credential";
inline constexpr int64_t kDefaultMaxClockSkewMs = 5 * 60 * 1000;
inline constexpr size_t kMinSecretBytes = 32;
// Bounds the work a token costs the master before its MAC is checked.
inline constexpr size_t kMaxPrincipalSize = 256;

// Wall-clock milliseconds since the Unix epoch: tokens are compared across
// hosts, so a monotonic clock will not do.
int64_t UnixNowMs();

// INVALID_PARAMS unless `path` is a regular file that only its owner may
// read or write (mode & 077 == 0): it holds a key.
Status CheckPrivateFile(const std::string& path);
// Writes `content` to `path` with mode 0600, through a temporary file and a
// rename so that no reader sees it half written or with a wider mode.
Status WritePrivateFile(const std::string& path, std::string_view content);

// The contents of a small file (a PEM certificate or key, at most 1 MiB).
Result<std::string> ReadSmallFile(const std::string& path);

// Principals travel in gRPC metadata and in the signed text: printable
// ASCII without spaces, 1..kMaxPrincipalSize bytes.
Status ValidatePrincipal(std::string_view principal);

class ClusterSecret {
 public:
  // Empty; usable only once assigned from Load, FromHex or Generate.
  ClusterSecret() = default;

  // Reads the secret file: hex (surrounding whitespace ignored) of at least
  // kMinSecretBytes, in a file CheckPrivateFile accepts.
  static Result<ClusterSecret> Load(const std::string& path);
  static Result<ClusterSecret> FromHex(std::string_view text);
  static ClusterSecret Generate();  // kMinSecretBytes from the CSPRNG

  std::string ToHex() const;
  // Raw bytes of the key of `role` (node, router or admin).
  std::string RoleKey(Role role) const;
  std::string TenantKey(std::string_view tenant) const;

 private:
  explicit ClusterSecret(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// What a peer presents: a role, a principal (the tenant for kTenant; a name
// for the logs otherwise, e.g. the node id) and the key of that identity.
struct Credential {
  Role role = Role::kTenant;
  std::string principal;
  std::string key;  // raw bytes

  // The kMetadataKey value for one call of `method` issued at `issued_ms`.
  std::string Token(std::string_view method, int64_t issued_ms) const;
};

// The credential of (role, principal) derived from the secret; for kTenant
// the principal is the tenant name. INVALID_PARAMS for a bad principal.
Result<Credential> MakeCredential(const ClusterSecret& secret, Role role,
                                  std::string_view principal);

// The credential file: "role=...\nprincipal=...\nkey=<hex>\n".
std::string FormatCredentialFile(const Credential& c);
Result<Credential> ParseCredentialFile(std::string_view text);

// Reads what a peer was given at `path`: a credential file, or the cluster
// secret file itself, which makes the peer `secret_role` named
// `secret_principal` (a client with the secret is an admin; a node uses its
// node id).
Result<Credential> LoadCredential(const std::string& path, Role secret_role,
                                  std::string_view secret_principal);

// A token split into its fields; `principal` points into the token.
struct ParsedToken {
  Role role = Role::kTenant;
  std::string_view principal;
  int64_t issued_ms = 0;
  std::string mac;  // raw bytes, crypto::kHmacSize of them
};

// ILLEGAL_CLIENT, saying what is wrong, unless `token` has the v1 shape.
Status ParseToken(std::string_view token, ParsedToken* out);

// Checks tokens against the keys of one cluster secret. Thread-safe.
class TokenVerifier {
 public:
  TokenVerifier(const ClusterSecret& secret, int64_t max_clock_skew_ms);

  // True iff the MAC is the one the key of the token's identity gives for
  // `method`; the comparison takes the same time whatever the bytes.
  bool MacMatches(const ParsedToken& token, std::string_view method) const;
  // ILLEGAL_CLIENT unless |now_ms - issued_ms| <= the allowed skew.
  Status CheckFreshness(int64_t issued_ms, int64_t now_ms) const;
  // The three checks in a row: shape, MAC, freshness.
  Status Verify(std::string_view token, std::string_view method, int64_t now_ms,
                ParsedToken* out) const;

 private:
  ClusterSecret secret_;
  std::string role_keys_[kNumRoles];  // the tenant slot stays empty
  int64_t max_clock_skew_ms_;
};

}  // namespace kvpool::auth

#endif  // KVPOOL_COMMON_AUTH_H_
