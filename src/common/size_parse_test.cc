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

}  // namespace kvpool
