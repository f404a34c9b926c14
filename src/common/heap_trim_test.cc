// HeapTrimmer: memory freed after a burst of small allocations (what a
// parsed and refused 100 MB request leaves in a thread's malloc arena) goes
// back to the kernel at the next check; memory in use never triggers it.
#include "common/heap_trim.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kvpool {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A million strings of 100 bytes, made on a thread of their own (so in
// another malloc arena, as on a gRPC server thread), with one string in a
// thousand kept in `pins`: what outlives a request (a table entry, a
// buffer) stops glibc from giving back the heap's top once the rest is
// freed.
std::unique_ptr<std::vector<std::string>> Burst(
    std::vector<std::string>* pins) {
  std::unique_ptr<std::vector<std::string>> out;
  std::thread([&] {
    out = std::make_unique<std::vector<std::string>>();
    out->reserve(1000000);
    for (int i = 0; i < 1000000; ++i) {
      out->emplace_back(100, static_cast<char>('a' + i % 26));
      if (i % 1000 == 0) pins->emplace_back(100, 'p');
    }
  }).join();
  return out;
}

TEST(HeapTrimTest, FreedMemoryGoesBackAndMemoryInUseStays) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator stands in for glibc's malloc: "
                  "nothing for malloc_trim to give back, and a quarantine "
                  "that keeps freed memory resident on purpose";
#endif
  MetricsRegistry metrics;
  Counter& trims = metrics.GetCounter("trims");
  Counter& released = metrics.GetCounter("released");
  HeapTrimmer trimmer({32 * kMiB, std::chrono::milliseconds(1000)}, &trims,
                      &released);
  const uint64_t base = HeapTrimmer::AnonResidentBytes();
  std::vector<std::string> pins;
  pins.reserve(1000);
  auto held = Burst(&pins);
  const uint64_t full = HeapTrimmer::AnonResidentBytes();
  ASSERT_GT(full, base + 100 * kMiB);
  // In use: nothing to give back, no trim.
  EXPECT_FALSE(trimmer.CheckOnce());
  // Freed: glibc keeps it until the trim.
  std::thread([&] { held.reset(); }).join();
  const uint64_t freed = HeapTrimmer::AnonResidentBytes();
  EXPECT_TRUE(trimmer.CheckOnce());
  const uint64_t trimmed = HeapTrimmer::AnonResidentBytes();
  std::printf(
      "anon resident: %llu MiB, %llu with the burst, %llu freed, "
      "%llu trimmed\n",
      (unsigned long long)(base / kMiB), (unsigned long long)(full / kMiB),
      (unsigned long long)(freed / kMiB), (unsigned long long)(trimmed / kMiB));
  EXPECT_LT(trimmed, base + 32 * kMiB);
  EXPECT_EQ(trims.Value(), 1u);
  EXPECT_GT(released.Value(), 64 * kMiB);
  // Nothing new freed: no second trim.
  EXPECT_FALSE(trimmer.CheckOnce());
}

TEST(HeapTrimTest, ZeroThresholdNeverTrims) {
  HeapTrimmer trimmer({0, std::chrono::milliseconds(10)}, nullptr, nullptr);
  trimmer.Start();  // no thread
  std::vector<std::string> pins;
  pins.reserve(1000);
  auto held = Burst(&pins);
  held.reset();
  EXPECT_FALSE(trimmer.CheckOnce());
  trimmer.Stop();
}

}  // namespace
}  // namespace kvpool
