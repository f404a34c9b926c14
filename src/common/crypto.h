// The few cryptographic primitives kvpool needs, over OpenSSL: HMAC-SHA256,
// a comparison that takes the same time whatever the bytes, and random keys.
// Used by the data-plane capabilities (transport) and the RPC credentials
// (common/auth.h). Keys and MACs are raw bytes in std::string.
#ifndef KVPOOL_COMMON_CRYPTO_H_
#define KVPOOL_COMMON_CRYPTO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvpool::crypto {

inline constexpr size_t kHmacSize = 32;  // SHA-256
using Mac = std::array<uint8_t, kHmacSize>;

// HMAC-SHA256 of `data` under `key` (any length).
Mac HmacSha256(std::string_view key, std::string_view data);

// True iff a and b are equal; the time taken depends only on the lengths.
bool ConstantTimeEqual(const void* a, const void* b, size_t n);

// `n` bytes from OpenSSL's CSPRNG. Aborts if the generator fails: a key that
// is not random must never be used.
std::string RandomBytes(size_t n);

std::string ToHex(std::string_view bytes);
// Decodes lower- or upper-case hex; false on odd length or a non-hex digit.
bool FromHex(std::string_view hex, std::string* out);

}  // namespace kvpool::crypto

#endif  // KVPOOL_COMMON_CRYPTO_H_
