#include "common/capability.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

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

std::string RangeSubject(uint64_t segment_id, uint64_t offset,
                         uint64_t length) {
  std::string s(24, '\0');
  auto* p = reinterpret_cast<uint8_t*>(s.data());
  PutLe64(p, segment_id);
  PutLe64(p + 8, offset);
  PutLe64(p + 16, length);
  return s;
}

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

// An EVP_MAC context keyed once; each MAC works on a copy, so concurrent
// callers never share mutable state and the key schedule is not redone.
struct Key::Hmac {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;
  ~Hmac() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

Key::Key(std::string raw) : raw_(std::move(raw)), hmac_(new Hmac) {
  hmac_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!hmac_->mac) Die("EVP_MAC_fetch");
  hmac_->keyed = EVP_MAC_CTX_new(hmac_->mac);
  if (!hmac_->keyed) Die("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(hmac_->keyed,
                   reinterpret_cast<const unsigned char*>(raw_.data()),
                   raw_.size(), params) != 1) {
    Die("EVP_MAC_init");
  }
}

Key::~Key() = default;

void Key::Mac(std::string_view domain, std::string_view subject,
              const uint8_t* fields, uint8_t* out) const {
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(hmac_->keyed);
  if (!ctx) Die("EVP_MAC_CTX_dup");
  unsigned char full[EVP_MAX_MD_SIZE];
  size_t len = 0;
  if (EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(domain.data()),
                     domain.size()) != 1 ||
      EVP_MAC_update(ctx,
                     reinterpret_cast<const unsigned char*>(subject.data()),
                     subject.size()) != 1 ||
      EVP_MAC_update(ctx, fields, kFieldsSize) != 1 ||
      EVP_MAC_final(ctx, full, &len, sizeof(full)) != 1 || len < kMacSize) {
    EVP_MAC_CTX_free(ctx);
    Die("HMAC");
  }
  EVP_MAC_CTX_free(ctx);
  std::memcpy(out, full, kMacSize);
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
