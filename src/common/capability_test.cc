#include "common/capability.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

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

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A token's MAC is HMAC-SHA256 (OpenSSL's HMAC, through crypto::HmacSha256)
// of domain || subject || the token's 24 field bytes, cut to kMacSize: the
// wire format nodes and masters of other versions compute, for keys of the
// usual size and for keys longer than SHA-256's block.
TEST(CapabilityTest, MacsAreHmacSha256OfDomainSubjectAndFields) {
  for (size_t key_size : {kKeySize, size_t{100}}) {
    const std::string raw = crypto::RandomBytes(key_size);
    Key key(raw);
    for (uint64_t i = 0; i < 16; ++i) {
      const std::string t =
          key.SignRange(i, i * 4096, 1 << 20, kOpRead | kOpWrite, 77, i);
      ASSERT_EQ(t.size(), kTokenSize);
      const std::string subject = Le64(i) + Le64(i * 4096) + Le64(1 << 20);
      crypto::Mac want = crypto::HmacSha256(
          raw, "kvpool-cap-range-v1" + subject + t.substr(0, 24));
      EXPECT_EQ(t.substr(24),
                std::string(want.begin(), want.begin() + kMacSize))
          << key_size << " " << i;
    }
    const std::string t = key.SignKey("", "some-key", kOpSsdRead, 77, 0);
    const std::string subject =
        std::string("\x07\0\0\0\x08\0\0\0", 8) + "default" + "some-key";
    crypto::Mac want = crypto::HmacSha256(
        raw, "kvpool-cap-key-v1" + subject + t.substr(0, 24));
    EXPECT_EQ(t.substr(24), std::string(want.begin(), want.begin() + kMacSize))
        << key_size;
  }
}

// A Key is shared by every thread of a master or node: concurrent MACs
// agree with one another.
TEST(CapabilityTest, ConcurrentMacsAgree) {
  Key key(crypto::RandomBytes(kKeySize));
  std::vector<std::string> expected;
  for (uint64_t i = 0; i < 64; ++i)
    expected.push_back(key.SignRange(i, i * 4096, 1 << 20, kOpRead, 5, i));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 500; ++round) {
        const uint64_t i = (round * 7 + t) % expected.size();
        if (key.SignRange(i, i * 4096, 1 << 20, kOpRead, 5, i) != expected[i])
          mismatches.fetch_add(1);
        if (key.VerifyRange(Bytes(expected[i]), i, i * 4096, 1 << 20, kOpRead,
                            5, 0) != ErrorCode::OK)
          mismatches.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
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
