#include "common/size_parse.h"

#include <gtest/gtest.h>

namespace kvpool {

TEST(SizeParse, AcceptsSuffixes) {
  EXPECT_EQ(ParseSize("4096").value(), 4096u);
  EXPECT_EQ(ParseSize("64MiB").value(), 64u << 20);
  EXPECT_EQ(ParseSize("64mb").value(), 64u << 20);
  EXPECT_EQ(ParseSize("1GiB").value(), 1u << 30);
  EXPECT_EQ(ParseSize("512K").value(), 512u << 10);
}

TEST(SizeParse, RejectsGarbage) {
  EXPECT_EQ(ParseSize("").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseSize("MiB").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseSize("12XB").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseSize("-5").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseSize("99999999999TiB").code(), ErrorCode::INVALID_PARAMS);
}

TEST(SizeParse, FormatsRoundTrip) {
  EXPECT_EQ(FormatSize(64u << 20), "64MiB");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ(ParseSize(FormatSize(3u << 30)).value(), 3u << 30);
}

// Found by fuzz_size_parse: values of 20 digits (1e19 and up) that are no
// multiple of 1 KiB were formatted but refused ("size too large"), and so
// were sizes written with more than 19 digits of leading zeros.
TEST(SizeParse, TwentyDigitValuesRoundTrip) {
  EXPECT_EQ(FormatSize(UINT64_MAX), "18446744073709551615");
  EXPECT_EQ(ParseSize(FormatSize(UINT64_MAX)).value(), UINT64_MAX);
  EXPECT_EQ(ParseSize("10000000000000000001").value(), 10000000000000000001u);
  EXPECT_EQ(ParseSize("000000000000000000004096").value(), 4096u);
  EXPECT_EQ(ParseSize("18446744073709551616").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseSize("99999999999999999999999").code(),
            ErrorCode::INVALID_PARAMS);
}

}  // namespace kvpool
