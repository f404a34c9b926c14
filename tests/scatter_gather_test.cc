// Multi-buffer puts and gets, ranged reads and put/get sessions of
// kvpool::Client on a LocalCluster: over shared memory and TCP, from DRAM
// and from a holder's SSD (which reads whole values, so the ranges are
// copied out of a staged value).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ssd_fixture.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::SsdFixture;
using kvpool::testing::WaitUntil;

class ScatterGatherTest : public SsdFixture,
                          public ::testing::WithParamInterface<TransportMode> {
};

// Splits [0, n) of `base` into slices of the given lengths.
std::vector<ConstSlice> Slices(const char* base,
                               const std::vector<uint64_t>& lens) {
  std::vector<ConstSlice> out;
  uint64_t at = 0;
  for (uint64_t l : lens) {
    out.push_back({base + at, l});
    at += l;
  }
  return out;
}

TEST_P(ScatterGatherTest, PartsRangesAndSessionsRoundTrip) {
  Start();
  auto c = NewClient(GetParam());
  const std::string a = RandomBytes(300000, 1), b = RandomBytes(5000, 2);
  std::string src = a + b, dst(src.size(), '\0');
  ASSERT_TRUE(c->RegisterBuffer(src.data(), src.size()).ok());
  ASSERT_TRUE(c->RegisterBuffer(dst.data(), dst.size()).ok());

  // One value from three buffers, one from one.
  auto put = c->BatchPutFromParts({"sg-a", "sg-b"},
                                  {Slices(src.data(), {1000, 200000, 99000}),
                                   Slices(src.data() + a.size(), {5000})});
  ASSERT_TRUE(put[0].ok()) << put[0].ToString();
  ASSERT_TRUE(put[1].ok()) << put[1].ToString();
  EXPECT_EQ(c->Get("sg-a").value(), a);
  EXPECT_EQ(c->Get("sg-b").value(), b);

  // Read back scattered differently; too little room is INVALID_PARAMS.
  auto got = c->BatchGetIntoParts(
      {"sg-a", "sg-b", "sg-missing"},
      {Slices(dst.data(), {7, 299993}),
       Slices(dst.data() + a.size(), {2000, 3000}), Slices(dst.data(), {10})});
  ASSERT_TRUE(got[0].ok() && got[1].ok());
  EXPECT_EQ(got[0].value(), a.size());
  EXPECT_EQ(got[1].value(), b.size());
  EXPECT_EQ(got[2].code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(dst.substr(0, a.size()), a);
  EXPECT_EQ(
      c->BatchGetIntoParts({"sg-a"}, {Slices(dst.data(), {299999})})[0].code(),
      ErrorCode::INVALID_PARAMS);

  // Ranges: only those bytes move; one outside the value fails the key, or
  // alone when the caller asks for per-range answers.
  std::string r1(16, '.'), r2(16, '.');
  ASSERT_TRUE(c->RegisterBuffer(r1.data(), r1.size()).ok());
  ASSERT_TRUE(c->RegisterBuffer(r2.data(), r2.size()).ok());
  auto ranged = c->BatchGetRanges({"sg-a"}, {{ValueRange{299990, r1.data(), 10},
                                              ValueRange{3, r2.data(), 4}}});
  ASSERT_TRUE(ranged[0].ok());
  EXPECT_EQ(ranged[0].value(), 14u);
  EXPECT_EQ(r1.substr(0, 10), a.substr(299990, 10));
  EXPECT_EQ(r2.substr(0, 4), a.substr(3, 4));
  EXPECT_EQ(r2.substr(4), std::string(12, '.'));
  EXPECT_EQ(
      c->BatchGetRanges({"sg-b"}, {{ValueRange{4999, r1.data(), 2}}})[0].code(),
      ErrorCode::INVALID_PARAMS);
  std::vector<std::vector<bool>> outside;
  auto partly = c->BatchGetRanges(
      {"sg-b"}, {{ValueRange{4999, r1.data(), 2}, ValueRange{0, r2.data(), 1}}},
      &outside);
  ASSERT_TRUE(partly[0].ok());
  EXPECT_EQ(partly[0].value(), 1u);
  EXPECT_EQ(outside[0], (std::vector<bool>{true, false}));

  // A put session: reserve, write two ranges out of order, publish.
  ASSERT_TRUE(c->BatchPutSessionStart({"sg-s"}, {8000})[0].ok());
  EXPECT_NE(Tier(*c, "sg-s"), "memory");  // not readable before the end
  auto w = c->BatchPutSessionWrite(
      {"sg-s"}, {{ValueRange{4000, src.data() + 4000, 4000}}});
  ASSERT_TRUE(w[0].ok()) << w[0].status().ToString();
  w = c->BatchPutSessionWrite({"sg-s"}, {{ValueRange{0, src.data(), 4000}}});
  ASSERT_TRUE(w[0].ok());
  EXPECT_EQ(
      c->BatchPutSessionWrite({"sg-s"}, {{ValueRange{7999, src.data(), 2}}})[0]
          .code(),
      ErrorCode::INVALID_PARAMS);
  ASSERT_TRUE(c->BatchPutSessionEnd({"sg-s"})[0].ok());
  EXPECT_EQ(c->Get("sg-s").value(), src.substr(0, 8000));
  EXPECT_EQ(c->BatchPutSessionEnd({"sg-s"})[0].code(),
            ErrorCode::OBJECT_NOT_FOUND);

  // A get session: reads under one lease, LEASE_EXPIRED once it ends (the
  // fixture's lease is 500 ms).
  ASSERT_TRUE(c->BatchGetSessionStart({"sg-a"})[0].ok());
  auto s1 = c->BatchGetSessionRead({"sg-a"}, {{ValueRange{0, r1.data(), 8}}});
  ASSERT_TRUE(s1[0].ok());
  EXPECT_EQ(r1.substr(0, 8), a.substr(0, 8));
  EXPECT_TRUE(WaitUntil(
      [&] {
        return c->BatchGetSessionRead({"sg-a"},
                                      {{ValueRange{0, r1.data(), 8}}})[0]
                   .code() == ErrorCode::LEASE_EXPIRED;
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(c->BatchGetSessionEnd({"sg-a"}).ok());
  EXPECT_EQ(c->BatchGetSessionRead({"sg-a"}, {{ValueRange{0, r1.data(), 8}}})[0]
                .code(),
            ErrorCode::OBJECT_NOT_FOUND);
}

TEST_P(ScatterGatherTest, SsdOnlyValuesAreStagedThenScattered) {
  Start();
  auto c = NewClient(GetParam());
  auto keys = MakeSsdOnly(*c, 2);
  ASSERT_EQ(Tier(*c, keys[0]), "local_disk");
  const std::string want = RandomBytes(kValue, 1);  // as MakeSsdOnly put it
  std::string dst(kValue, '\0'), r(64, '.');
  ASSERT_TRUE(c->RegisterBuffer(dst.data(), dst.size()).ok());
  ASSERT_TRUE(c->RegisterBuffer(r.data(), r.size()).ok());
  ASSERT_EQ(Tier(*c, keys[0]), "local_disk");
  auto got = c->BatchGetIntoParts(
      {keys[0]}, {Slices(dst.data(), {12345, kValue - 12345})});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(dst, RandomBytes(kValue, 0));
  ASSERT_EQ(Tier(*c, keys[1]), "local_disk");
  auto ranged =
      c->BatchGetRanges({keys[1]}, {{ValueRange{kValue - 64, r.data(), 64}}});
  ASSERT_TRUE(ranged[0].ok());
  EXPECT_EQ(r, want.substr(kValue - 64));
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ScatterGatherTest,
                         ::testing::Values(TransportMode::kShm,
                                           TransportMode::kTcp),
                         [](const auto& info) {
                           return info.param == TransportMode::kShm ? "Shm"
                                                                    : "Tcp";
                         });

}  // namespace
}  // namespace kvpool
