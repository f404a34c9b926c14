#include "node/segment_populator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "tests/population_gate.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using testing::MappedRssBytes;

std::shared_ptr<const ShmSegment> Fresh(uint64_t size) {
  static std::atomic<int> n{0};
  auto s =
      ShmSegment::Create("kvpool_populator_test_" + std::to_string(::getpid()) +
                             "_" + std::to_string(n.fetch_add(1)),
                         size, "/dev/shm", /*populate=*/false);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::shared_ptr<const ShmSegment>(std::move(s.value()))
                : nullptr;
}

using testing::PopulationGate;

TEST(SegmentPopulatorTest, MapsEveryPageOfEverySegment) {
  auto a = Fresh(6ull << 20);
  auto b = Fresh(3ull << 20);  // not a multiple of the chunk
  ASSERT_TRUE(a && b);
  EXPECT_EQ(MappedRssBytes(a->path()), 0u);
  auto p = SegmentPopulator::Launch({a, nullptr, b});
  ASSERT_TRUE(p->WaitDone(30000));
  EXPECT_TRUE(p->done());
  EXPECT_EQ(p->populated_bytes(), (9ull << 20));
  EXPECT_EQ(p->total_bytes(), (9ull << 20));
  EXPECT_EQ(MappedRssBytes(a->path()), a->size());
  EXPECT_EQ(MappedRssBytes(b->path()), b->size());
}

// Writes while population is held halfway: into the populated half and into
// the half not reached yet. Both read back, and population, once let go,
// changes none of them.
TEST(SegmentPopulatorTest, CopiesDuringPopulationKeepTheirBytes) {
  constexpr uint64_t kSize = 8ull << 20;
  auto seg = Fresh(kSize);
  ASSERT_TRUE(seg);
  PopulationGate gate(kSize / 2);
  auto p = SegmentPopulator::Launch(
      {seg}, [&gate](uint64_t done) { gate.Arrive(done); });
  // A failed assertion must not leave the populator's Stop waiting at it.
  struct OpenOnExit {
    PopulationGate* gate;
    ~OpenOnExit() { gate->Open(); }
  } open_on_exit{&gate};
  gate.AwaitHeld();
  EXPECT_FALSE(p->done());
  EXPECT_EQ(p->populated_bytes(), kSize / 2);
  EXPECT_EQ(MappedRssBytes(seg->path()), kSize / 2);
  const std::string early = testing::RandomBytes(1 << 20, 1);
  const std::string late = testing::RandomBytes(1 << 20, 2);
  std::memcpy(seg->data() + 4096 + 1, early.data(), early.size());
  std::memcpy(seg->data() + kSize - late.size() - 3, late.data(), late.size());
  gate.Open();
  ASSERT_TRUE(p->WaitDone(30000));
  EXPECT_EQ(MappedRssBytes(seg->path()), kSize);
  EXPECT_EQ(std::memcmp(seg->data() + 4096 + 1, early.data(), early.size()), 0);
  EXPECT_EQ(std::memcmp(seg->data() + kSize - late.size() - 3, late.data(),
                        late.size()),
            0);
}

// Pages of [p, p + len) present in this process's page tables
// (/proc/self/pagemap, bit 63).
uint64_t PresentPages(const uint8_t* p, uint64_t len) {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return 0;
  uint64_t present = 0;
  for (uint64_t off = 0; off < len; off += page) {
    const uint64_t vpn = (reinterpret_cast<uintptr_t>(p) + off) / page;
    uint64_t entry = 0;
    if (std::fseek(f, long(vpn * sizeof(entry)), SEEK_SET) != 0 ||
        std::fread(&entry, sizeof(entry), 1, f) != 1)
      break;
    present += (entry >> 63) & 1;
  }
  std::fclose(f);
  return present;
}

// The allocator fills a fresh segment from its start, and a put that faults
// on a page being populated waits for the populator: population runs from
// the end, so the two meet once, in the middle.
TEST(SegmentPopulatorTest, PopulatesFromTheEndDown) {
  constexpr uint64_t kSize = 8ull << 20;
  auto seg = Fresh(kSize);
  ASSERT_TRUE(seg);
  PopulationGate gate(kSize / 2);
  auto p = SegmentPopulator::Launch(
      {seg}, [&gate](uint64_t done) { gate.Arrive(done); });
  struct OpenOnExit {
    PopulationGate* gate;
    ~OpenOnExit() { gate->Open(); }
  } open_on_exit{&gate};
  gate.AwaitHeld();
  const uint64_t half_pages = kSize / 2 / uint64_t(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(PresentPages(seg->data(), kSize / 2), 0u);
  EXPECT_EQ(PresentPages(seg->data() + kSize / 2, kSize / 2), half_pages);
  gate.Open();
  ASSERT_TRUE(p->WaitDone(30000));
  EXPECT_EQ(PresentPages(seg->data(), kSize), 2 * half_pages);
}

TEST(SegmentPopulatorTest, StopEndsPopulationEarly) {
  auto seg = Fresh(8ull << 20);
  ASSERT_TRUE(seg);
  PopulationGate gate(2ull << 20);
  auto p = SegmentPopulator::Launch(
      {seg}, [&gate](uint64_t done) { gate.Arrive(done); });
  // A failed assertion must not leave the populator's Stop waiting at it.
  struct OpenOnExit {
    PopulationGate* gate;
    ~OpenOnExit() { gate->Open(); }
  } open_on_exit{&gate};
  gate.AwaitHeld();
  std::thread stopper([&] { p->Stop(); });
  // Let go only once the stop is asked for, so population cannot finish.
  EXPECT_TRUE(testing::WaitUntil([&] { return p->stopping(); },
                                 std::chrono::seconds(10)));
  gate.Open();
  stopper.join();
  EXPECT_FALSE(p->WaitDone(0));
  EXPECT_LT(p->populated_bytes(), seg->size());
}

}  // namespace
}  // namespace kvpool
