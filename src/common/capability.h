// Data-plane capabilities: the master's signed permission to touch one range
// of a segment (READ, WRITE) or one key on a node's SSD (SSD_READ,
// PREFETCH) until a deadline. The master and the node share a key that the
// master draws at random when the node mounts its main segment; clients
// carry the signed token from the master's reply to the node without
// reading it. A node that has a key serves nothing without a valid token, so
// knowing a node's address and id is not enough to read or write its memory.
//
// Token (kTokenSize bytes, little-endian):
//    0 u64 expiry_ms   wall-clock ms (the master's clock) past which it is void
//   8 u64 generation  WRITE range tokens: the grant's write generation,
//                      greater than that of every earlier write grant of
//                      the master (0 from a master before generations);
//                      0 in every other token
//   16 u32 ops         the kOp* bits it allows
//   20 u32 reserved    0
//   24 mac[16]         HMAC-SHA256(key, domain | subject | the fields above),
//                      truncated to 128 bits
// The subject is (segment id, offset, length) of the granted range, or
// (tenant, key) of the granted SSD value; the domain string keeps a range
// token from ever verifying as a key token.
#ifndef KVPOOL_COMMON_CAPABILITY_H_
#define KVPOOL_COMMON_CAPABILITY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kvpool/status.h"

namespace kvpool::cap {

inline constexpr size_t kTokenSize = 40;
inline constexpr size_t kMacSize = 16;
inline constexpr size_t kKeySize = 32;  // bytes of a capability key

inline constexpr uint32_t kOpRead = 1;
inline constexpr uint32_t kOpWrite = 2;
inline constexpr uint32_t kOpSsdRead = 4;
inline constexpr uint32_t kOpPrefetch = 8;

// A key with its HMAC state prepared once; Sign/Verify are thread-safe.
class Key {
 public:
  explicit Key(std::string raw);
  ~Key();
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  const std::string& raw() const { return raw_; }

  // A token for [offset, offset+length) of `segment_id`.
  std::string SignRange(uint64_t segment_id, uint64_t offset, uint64_t length,
                        uint32_t ops, int64_t expiry_ms,
                        uint64_t generation) const;
  // A token for the value of (tenant, key) on this node's SSD. An empty
  // tenant is signed as "default", as the master names it.
  std::string SignKey(std::string_view tenant, std::string_view key,
                      uint32_t ops, int64_t expiry_ms,
                      uint64_t generation) const;

  // OK if `token` (kTokenSize bytes) grants `op` on the range and has not
  // expired at `now_ms` + `skew_ms` of grace; ILLEGAL_CLIENT for a forged,
  // altered or wrong-op token, LEASE_EXPIRED for an expired one.
  ErrorCode VerifyRange(const uint8_t* token, uint64_t segment_id,
                        uint64_t offset, uint64_t length, uint32_t op,
                        int64_t now_ms, int64_t skew_ms) const;
  ErrorCode VerifyKey(const uint8_t* token, std::string_view tenant,
                      std::string_view key, uint32_t op, int64_t now_ms,
                      int64_t skew_ms) const;

 private:
  struct Hmac;
  void Mac(std::string_view domain, std::string_view subject,
           const uint8_t* fields, uint8_t* out) const;
  ErrorCode Verify(std::string_view domain, std::string_view subject,
                   const uint8_t* token, uint32_t op, int64_t now_ms,
                   int64_t skew_ms) const;
  std::string raw_;
  std::unique_ptr<Hmac> hmac_;
};

// Wall-clock ms, the clock tokens' expiries are in.
int64_t WallNowMs();

// The generation field of `token` (kTokenSize bytes). Only meaningful once
// the token has verified.
uint64_t TokenGeneration(const uint8_t* token);

}  // namespace kvpool::cap

#endif  // KVPOOL_COMMON_CAPABILITY_H_
