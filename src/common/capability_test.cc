#include "common/capability.h"

#include <gtest/gtest.h>

#include "common/crypto.h"

namespace kvpool::cap {
namespace {

const uint8_t* Bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

TEST(CapabilityTest, RangeTokenGrantsExactlyWhatWasSigned) {
  Key key(crypto::RandomBytes(kKeySize));
  const int64_t now = 1'000'000;
  std::string t = key.SignRange(3, 4096, 1 << 20, kOpRead, now + 100, 7);
  ASSERT_EQ(t.size(), kTokenSize);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 3, 4096, 1 << 20, kOpRead, now, 0),
            ErrorCode::OK);
  // Another segment, offset or length, or another op: refused.
  EXPECT_EQ(key.VerifyRange(Bytes(t), 4, 4096, 1 << 20, kOpRead, now, 0),
            ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 3, 0, 1 << 20, kOpRead, now, 0),
            ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 3, 4096, 2 << 20, kOpRead, now, 0),
            ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 3, 4096, 1 << 20, kOpWrite, now, 0),
            ErrorCode::ILLEGAL_CLIENT);
}

TEST(CapabilityTest, ExpiredTokenIsRefusedAfterTheGrace) {
  Key key(crypto::RandomBytes(kKeySize));
  std::string t = key.SignRange(1, 0, 10, kOpWrite, 5000, 0);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 1, 0, 10, kOpWrite, 5000, 0),
            ErrorCode::OK);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 1, 0, 10, kOpWrite, 5001, 0),
            ErrorCode::LEASE_EXPIRED);
  EXPECT_EQ(key.VerifyRange(Bytes(t), 1, 0, 10, kOpWrite, 5400, 500),
            ErrorCode::OK);
}

TEST(CapabilityTest, TamperedOrForeignTokensAreRefused) {
  Key key(crypto::RandomBytes(kKeySize));
  Key other(crypto::RandomBytes(kKeySize));
  std::string t = key.SignRange(1, 0, 10, kOpRead, 5000, 0);
  EXPECT_EQ(other.VerifyRange(Bytes(t), 1, 0, 10, kOpRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
  // Extending the expiry or adding an op breaks the MAC.
  for (size_t byte : {size_t{0}, size_t{16}, size_t{30}}) {
    std::string bad = t;
    bad[byte] ^= 0x40;
    EXPECT_EQ(key.VerifyRange(Bytes(bad), 1, 0, 10, kOpRead, 0, 0),
              ErrorCode::ILLEGAL_CLIENT)
        << byte;
  }
  std::string zeros(kTokenSize, '\0');
  EXPECT_EQ(key.VerifyRange(Bytes(zeros), 1, 0, 10, kOpRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
}

TEST(CapabilityTest, KeyTokensBindTenantAndKeyAndNeverPassAsRanges) {
  Key key(crypto::RandomBytes(kKeySize));
  std::string t = key.SignKey("", "k1", kOpSsdRead | kOpPrefetch, 5000, 0);
  EXPECT_EQ(key.VerifyKey(Bytes(t), "default", "k1", kOpSsdRead, 0, 0),
            ErrorCode::OK);
  EXPECT_EQ(key.VerifyKey(Bytes(t), "", "k1", kOpPrefetch, 0, 0),
            ErrorCode::OK);
  EXPECT_EQ(key.VerifyKey(Bytes(t), "other", "k1", kOpSsdRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(key.VerifyKey(Bytes(t), "default", "k2", kOpSsdRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
  // ("de", "faultk1") is not ("default", "k1").
  EXPECT_EQ(key.VerifyKey(Bytes(t), "de", "faultk1", kOpSsdRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
  std::string r = key.SignRange(0, 0, 0, kOpSsdRead, 5000, 0);
  EXPECT_EQ(key.VerifyKey(Bytes(r), "", "", kOpSsdRead, 0, 0),
            ErrorCode::ILLEGAL_CLIENT);
}

}  // namespace
}  // namespace kvpool::cap
