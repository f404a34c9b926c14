#include "common/capability.h"

// The SHA256_* functions: see Key::Hmac.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvpool::cap {

namespace {

constexpr std::string_view kRangeDomain = "kvpool-cap-range-v1";
constexpr std::string_view kKeyDomain = "kvpool-cap-key-v1";
constexpr size_t kFieldsSize = 24;  // expiry, generation, ops, reserved

void PutLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}
uint32_t GetLe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "kvpool: OpenSSL %s failed\n", what);
  std::abort();
}

// On the stack: a range is signed or checked on every get and frame.
struct RangeSubject {
  RangeSubject(uint64_t segment_id, uint64_t offset, uint64_t length) {
    PutLe64(bytes, segment_id);
    PutLe64(bytes + 8, offset);
    PutLe64(bytes + 16, length);
  }
  operator std::string_view() const {
    return {reinterpret_cast<const char*>(bytes), sizeof(bytes)};
  }
  uint8_t bytes[24];
};

// Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
std::string KeySubject(std::string_view tenant, std::string_view key) {
  if (tenant.empty()) tenant = "default";
  std::string s(8, '\0');
  auto* p = reinterpret_cast<uint8_t*>(s.data());
  PutLe32(p, static_cast<uint32_t>(tenant.size()));
  PutLe32(p + 4, static_cast<uint32_t>(key.size()));
  s.append(tenant);
  s.append(key);
  return s;
}

}  // namespace

// HMAC-SHA256 (RFC 2104) from the SHA-256 states after the key's inner and
// outer pads, computed once per key: each MAC copies the two states and
// hashes the message and the inner digest. One MAC per replica a get is
// granted (and one per TCP frame a node checks) is what capabilities cost
// on the hot path. OpenSSL's EVP_MAC spent ~5 us on a MAC on the master's
// cold caches (a context copy and the provider layers' dispatch, measured
// by evicting 16 MiB between MACs), these low-level SHA-256 calls ~0.7 us;
// warm, 0.5 against 0.2 us. The result is OpenSSL's HMAC's, byte for byte
// (capability_test compares them). The SHA256_* functions are deprecated
// in OpenSSL 3.0 in favour of EVP, and still part of its API.
struct Key::Hmac {
  SHA256_CTX inner;  // after (key ^ ipad)
  SHA256_CTX outer;  // after (key ^ opad)
};

Key::Key(std::string raw) : raw_(std::move(raw)), hmac_(new Hmac) {
  unsigned char block[SHA256_CBLOCK] = {0};
  if (raw_.size() > sizeof(block)) {
    SHA256(reinterpret_cast<const unsigned char*>(raw_.data()), raw_.size(),
           block);
  } else {
    std::memcpy(block, raw_.data(), raw_.size());
  }
  unsigned char pad[SHA256_CBLOCK];
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = block[i] ^ 0x36;
  if (SHA256_Init(&hmac_->inner) != 1 ||
      SHA256_Update(&hmac_->inner, pad, sizeof(pad)) != 1) {
    Die("SHA256 (inner pad)");
  }
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = block[i] ^ 0x5c;
  if (SHA256_Init(&hmac_->outer) != 1 ||
      SHA256_Update(&hmac_->outer, pad, sizeof(pad)) != 1) {
    Die("SHA256 (outer pad)");
  }
  OPENSSL_cleanse(block, sizeof(block));
  OPENSSL_cleanse(pad, sizeof(pad));
}

Key::~Key() {
  if (hmac_) OPENSSL_cleanse(hmac_.get(), sizeof(Hmac));
}

void Key::Mac(std::string_view domain, std::string_view subject,
              const uint8_t* fields, uint8_t* out) const {
  SHA256_CTX ctx = hmac_->inner;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  if (SHA256_Update(&ctx, domain.data(), domain.size()) != 1 ||
      SHA256_Update(&ctx, subject.data(), subject.size()) != 1 ||
      SHA256_Update(&ctx, fields, kFieldsSize) != 1 ||
      SHA256_Final(digest, &ctx) != 1) {
    Die("HMAC (inner)");
  }
  ctx = hmac_->outer;
  if (SHA256_Update(&ctx, digest, sizeof(digest)) != 1 ||
      SHA256_Final(digest, &ctx) != 1) {
    Die("HMAC (outer)");
  }
  static_assert(kMacSize <= SHA256_DIGEST_LENGTH);
  std::memcpy(out, digest, kMacSize);
}

namespace {
std::string Token(uint32_t ops, int64_t expiry_ms, uint64_t generation) {
  std::string t(kTokenSize, '\0');
  auto* p = reinterpret_cast<uint8_t*>(t.data());
  PutLe64(p, static_cast<uint64_t>(expiry_ms));
  PutLe64(p + 8, generation);
  PutLe32(p + 16, ops);
  PutLe32(p + 20, 0);
  return t;
}
}  // namespace

std::string Key::SignRange(uint64_t segment_id, uint64_t offset,
                           uint64_t length, uint32_t ops, int64_t expiry_ms,
                           uint64_t generation) const {
  std::string t = Token(ops, expiry_ms, generation);
  auto* p = reinterpret_cast<uint8_t*>(t.data());
  Mac(kRangeDomain, RangeSubject(segment_id, offset, length), p,
      p + kFieldsSize);
  return t;
}

std::string Key::SignKey(std::string_view tenant, std::string_view key,
                         uint32_t ops, int64_t expiry_ms,
                         uint64_t generation) const {
  std::string t = Token(ops, expiry_ms, generation);
  auto* p = reinterpret_cast<uint8_t*>(t.data());
  Mac(kKeyDomain, KeySubject(tenant, key), p, p + kFieldsSize);
  return t;
}

ErrorCode Key::Verify(std::string_view domain, std::string_view subject,
                      const uint8_t* token, uint32_t op, int64_t now_ms,
                      int64_t skew_ms) const {
  uint8_t mac[kMacSize];
  Mac(domain, subject, token, mac);
  if (CRYPTO_memcmp(mac, token + kFieldsSize, kMacSize) != 0) {
    return ErrorCode::ILLEGAL_CLIENT;
  }
  // Only a genuine token's fields are worth reading.
  if ((GetLe32(token + 16) & op) != op || op == 0) {
    return ErrorCode::ILLEGAL_CLIENT;
  }
  const auto expiry = static_cast<int64_t>(GetLe64(token));
  if (now_ms > expiry + skew_ms) return ErrorCode::LEASE_EXPIRED;
  return ErrorCode::OK;
}

ErrorCode Key::VerifyRange(const uint8_t* token, uint64_t segment_id,
                           uint64_t offset, uint64_t length, uint32_t op,
                           int64_t now_ms, int64_t skew_ms) const {
  return Verify(kRangeDomain, RangeSubject(segment_id, offset, length), token,
                op, now_ms, skew_ms);
}

ErrorCode Key::VerifyKey(const uint8_t* token, std::string_view tenant,
                         std::string_view key, uint32_t op, int64_t now_ms,
                         int64_t skew_ms) const {
  return Verify(kKeyDomain, KeySubject(tenant, key), token, op, now_ms,
                skew_ms);
}

int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t TokenGeneration(const uint8_t* token) { return GetLe64(token + 8); }

}  // namespace kvpool::cap
