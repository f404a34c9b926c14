// The byte-level checker of `kvpool bench soak` (bench/soak_load.h): a soak
// that reports zero wrong reads is only worth something if the checker
// catches wrong bytes, so each kind it must catch is shown here.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/soak_load.h"

namespace kvpool::soak {
namespace {

std::vector<uint8_t> ValueOf(const std::string& key, uint64_t version) {
  const uint64_t h = KeyHash(key);
  std::vector<uint8_t> v(ValueSize(h, version));
  FillValue(h, version, v.data());
  return v;
}

TEST(SoakCheckerTest, AcceptsEveryVersionsOwnBytesAndSaysWhichVersion) {
  for (uint64_t version : {1, 2, 77, 1000000}) {
    const auto v = ValueOf("soak/c0/k0001", version);
    EXPECT_GE(v.size(), kMinValueBytes);
    EXPECT_LE(v.size(), kMaxValueBytes);
    uint64_t got = 0;
    EXPECT_EQ(CheckValue(KeyHash("soak/c0/k0001"), v.data(), v.size(), &got),
              "");
    EXPECT_EQ(got, version);
  }
}

TEST(SoakCheckerTest, CatchesCorruptTornForeignAndShortValues) {
  const uint64_t h = KeyHash("soak/c1/k0002");
  uint64_t got = 0;
  auto v = ValueOf("soak/c1/k0002", 5);
  v.back() ^= 1;  // the last byte of a partial last word
  EXPECT_NE(CheckValue(h, v.data(), v.size(), &got), "");

  // Version 5's header, then version 6's bytes from the middle on (a read
  // racing an upsert into the same memory). Same size needed: find a pair.
  uint64_t a = 1, b = 2;
  while (ValueSize(h, a) > ValueSize(h, b)) ++b;
  auto torn = ValueOf("soak/c1/k0002", a);
  const auto other = ValueOf("soak/c1/k0002", b);
  std::memcpy(torn.data() + torn.size() / 2, other.data() + torn.size() / 2,
              torn.size() - torn.size() / 2);
  EXPECT_NE(CheckValue(h, torn.data(), torn.size(), &got).find("torn"),
            std::string::npos);

  const auto foreign = ValueOf("soak/c2/k0002", 5);
  EXPECT_NE(
      CheckValue(h, foreign.data(), foreign.size(), &got).find("another key"),
      std::string::npos);

  const auto whole = ValueOf("soak/c1/k0002", 5);
  EXPECT_NE(CheckValue(h, whole.data(), whole.size() - 1, &got), "");
  EXPECT_NE(CheckValue(h, whole.data(), 16, &got), "");
  std::vector<uint8_t> zeros(whole.size(), 0);
  EXPECT_NE(
      CheckValue(h, zeros.data(), zeros.size(), &got).find("not a soak value"),
      std::string::npos);
}

}  // namespace
}  // namespace kvpool::soak
