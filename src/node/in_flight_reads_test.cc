#include "node/in_flight_reads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kvpool {
namespace {

using std::chrono::milliseconds;

TEST(InFlightReads, AGetJoinsTheReadInFlightAndGetsItsBytes) {
  InFlightReads r(true, milliseconds(10000));
  std::vector<uint8_t> dest(4096, 0);
  EXPECT_EQ(r.Enroll("t", "k", 1, dest.data(), dest.size()), nullptr);
  r.Begin("t", "k");
  EXPECT_TRUE(r.Reading("t", "k"));
  EXPECT_FALSE(r.Reading("u", "k"));  // tenants are apart
  EXPECT_EQ(r.Enroll("u", "k", 1, dest.data(), dest.size()), nullptr);
  auto w = r.Enroll("t", "k", 1, dest.data(), dest.size());
  ASSERT_NE(w, nullptr);
  std::vector<uint8_t> value(4096, 9);
  // The read ends on another thread while the get waits.
  std::thread reader([&] { r.End("t", "k", 1, value); });
  EXPECT_TRUE(r.Await(w));
  reader.join();
  EXPECT_EQ(dest, value);
  EXPECT_FALSE(r.Reading("t", "k"));
  EXPECT_EQ(r.stats().joined, 1u);
  EXPECT_EQ(r.stats().missed, 0u);
}

TEST(InFlightReads, ADifferentValueOrAFailedReadIsNotCopied) {
  InFlightReads r(true, milliseconds(10000));
  std::vector<uint8_t> value(4096, 9);
  struct Case {
    uint64_t get_version, get_length, read_version;
    bool read_ok;
  };
  for (const Case& c : {Case{1, 4096, 2, true}, Case{1, 8192, 1, true},
                        Case{1, 4096, 1, false}}) {
    std::vector<uint8_t> dest(c.get_length, 0);
    r.Begin("t", "k");
    auto w = r.Enroll("t", "k", c.get_version, dest.data(), dest.size());
    ASSERT_NE(w, nullptr);
    r.End("t", "k", c.read_version,
          c.read_ok ? std::span<const uint8_t>(value)
                    : std::span<const uint8_t>());
    EXPECT_FALSE(r.Await(w));  // at once: the read has answered it
    EXPECT_EQ(dest, std::vector<uint8_t>(c.get_length, 0));
  }
  EXPECT_EQ(r.stats().joined, 0u);
  EXPECT_EQ(r.stats().missed, 3u);
  EXPECT_EQ(r.stats().timeouts, 0u);
}

// A get that waited its time leaves; the read that ends later writes
// nowhere (its buffer may be gone).
TEST(InFlightReads, AGetThatGaveUpIsNeverWrittenInto) {
  InFlightReads r(true, milliseconds(20));
  auto dest = std::make_unique<std::vector<uint8_t>>(4096, 0);
  r.Begin("t", "k");
  auto w = r.Enroll("t", "k", 1, dest->data(), dest->size());
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(r.Await(w));
  EXPECT_EQ(r.stats().timeouts, 1u);
  dest.reset();  // under ASan, a late copy would be a use after free
  std::vector<uint8_t> value(4096, 9);
  EXPECT_EQ(r.End("t", "k", 1, value), 0u);  // filled nobody
  EXPECT_FALSE(r.Reading("t", "k"));
}

TEST(InFlightReads, EveryGetOfTheKeyIsServedByOneRead) {
  InFlightReads r(true, milliseconds(10000));
  r.Begin("t", "k");
  constexpr int kGets = 4;
  std::vector<std::vector<uint8_t>> dests(kGets, std::vector<uint8_t>(64, 0));
  std::vector<std::shared_ptr<InFlightReads::Waiter>> waiters;
  for (auto& d : dests) waiters.push_back(r.Enroll("t", "k", 5, d.data(), 64));
  std::atomic<int> served{0};
  std::vector<std::thread> gets;
  for (int i = 0; i < kGets; ++i)
    gets.emplace_back([&, i] { served += r.Await(waiters[i]) ? 1 : 0; });
  std::vector<uint8_t> value(64, 3);
  EXPECT_EQ(r.End("t", "k", 5, value), size_t{kGets});
  for (auto& g : gets) g.join();
  EXPECT_EQ(served.load(), kGets);
  for (const auto& d : dests) EXPECT_EQ(d, value);
}

TEST(InFlightReads, OffDoesNothing) {
  InFlightReads r(false, milliseconds(10000));
  std::vector<uint8_t> dest(64, 0);
  r.Begin("t", "k");
  EXPECT_FALSE(r.Reading("t", "k"));
  EXPECT_EQ(r.Enroll("t", "k", 1, dest.data(), dest.size()), nullptr);
  EXPECT_EQ(r.End("t", "k", 1, dest), 0u);
}

}  // namespace
}  // namespace kvpool
