#include "common/crypto.h"

#include <gtest/gtest.h>

namespace kvpool::crypto {
namespace {

TEST(CryptoTest, HmacMatchesRfc4231Case2) {
  // RFC 4231, test case 2.
  Mac m = HmacSha256("Jefe", "what do ya want for nothing?");
  std::string got(reinterpret_cast<const char*>(m.data()), m.size());
  EXPECT_EQ(ToHex(got),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, ConstantTimeEqualTellsBytesApart) {
  EXPECT_TRUE(ConstantTimeEqual("abcd", "abcd", 4));
  EXPECT_FALSE(ConstantTimeEqual("abcd", "abce", 4));
}

TEST(CryptoTest, RandomBytesDiffer) {
  EXPECT_EQ(RandomBytes(32).size(), 32u);
  EXPECT_NE(RandomBytes(32), RandomBytes(32));
}

TEST(CryptoTest, HexRoundTripsAndRejectsBadDigits) {
  std::string raw = RandomBytes(17), back;
  ASSERT_TRUE(FromHex(ToHex(raw), &back));
  EXPECT_EQ(back, raw);
  EXPECT_FALSE(FromHex("abc", &back));
  EXPECT_FALSE(FromHex("zz", &back));
  ASSERT_TRUE(FromHex("A0ff", &back));
  EXPECT_EQ(back, std::string("\xa0\xff", 2));
}

}  // namespace
}  // namespace kvpool::crypto
