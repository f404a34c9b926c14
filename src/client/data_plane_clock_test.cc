// The data plane's cache of shared-memory mappings (what a cached lease
// reads through) expires by the injected Clock: checked with a FakeClock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "client/data_plane.h"
#include "common/clock.h"
#include "common/host_id.h"

namespace kvpool {
namespace {

constexpr uint64_t kSize = 1 << 20;
constexpr int64_t kIdle = DataPlane::kIdleUnmapMs;

class DataPlaneClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s =
        ShmSegment::Create("kvpool-dpclock-" + std::to_string(getpid()), kSize);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    seg_ = std::move(s.value());
    loc_.set_segment_id(1);
    loc_.set_offset(4096);
    loc_.set_length(100);
    loc_.set_node_id("a");
    loc_.set_host_id(LocalHostId());
    loc_.set_shm_path(seg_->path());
    loc_.set_data_endpoint("127.0.0.1:1");
    loc_.set_segment_size(kSize);
  }
  // Maps the segment (or reuses its mapping) and lets go of the hold, as a
  // finished copy does.
  void Touch(DataPlane* dp) {
    std::shared_ptr<const ShmSegment> hold;
    ASSERT_NE(dp->ResolveShm(loc_, 100, &hold), nullptr);
  }
  std::unique_ptr<ShmSegment> seg_;
  rpc::MemoryLocation loc_;
};

TEST_F(DataPlaneClockTest, AMappingExpiresAfterTheIdleTimeOnTheClock) {
  FakeClock clock;
  DataPlane dp(TransportMode::kShm, {}, &clock);
  Touch(&dp);
  EXPECT_EQ(dp.mapped_segments(), 1u);
  clock.Advance(kIdle - 1);
  dp.DropIdleMappings(kIdle);
  EXPECT_EQ(dp.mapped_segments(), 1u) << "dropped before the idle time";
  clock.Advance(1);
  dp.DropIdleMappings(kIdle);
  EXPECT_EQ(dp.mapped_segments(), 0u) << "kept past the idle time";
}

TEST_F(DataPlaneClockTest, UseRenewsAMapping) {
  FakeClock clock;
  DataPlane dp(TransportMode::kShm, {}, &clock);
  Touch(&dp);
  clock.Advance(kIdle - 10);
  Touch(&dp);  // a reply named it again: idle from now
  clock.Advance(20);
  dp.DropIdleMappings(kIdle);
  EXPECT_EQ(dp.mapped_segments(), 1u);
  clock.Advance(kIdle);
  dp.DropIdleMappings(kIdle);
  EXPECT_EQ(dp.mapped_segments(), 0u);
}

TEST_F(DataPlaneClockTest, TransfersSweepIdleMappingsByThemselves) {
  FakeClock clock;
  DataPlane dp(TransportMode::kShm, {}, &clock);
  std::string buf(100, '\0');
  auto read = [&] {
    std::vector<TransferItem> items = {
        {.loc = &loc_,
         .buf = reinterpret_cast<uint8_t*>(buf.data()),
         .length = 100}};
    dp.Read(items);
    ASSERT_EQ(items[0].result, ErrorCode::OK);
  };
  read();  // maps it; the first sweep has run, the next is due in 5 s
  EXPECT_EQ(dp.mapped_segments(), 1u);
  // An unrelated segment's mapping, then no use of it for the idle time.
  rpc::MemoryLocation other = loc_;
  auto s = ShmSegment::Create(
      "kvpool-dpclock-" + std::to_string(getpid()) + "-b", kSize);
  ASSERT_TRUE(s.ok());
  other.set_shm_path(s.value()->path());
  other.set_segment_id(2);
  std::shared_ptr<const ShmSegment> hold;
  ASSERT_NE(dp.ResolveShm(other, 100, &hold), nullptr);
  hold.reset();
  EXPECT_EQ(dp.mapped_segments(), 2u);
  clock.Advance(kIdle - 1);
  read();  // a sweep is due, but nothing has been idle long enough
  EXPECT_EQ(dp.mapped_segments(), 2u);
  clock.Advance(kIdle);
  // The sweep drops both (loc_ was last used kIdle ago), then the read maps
  // loc_ again; `other` stays unmapped.
  read();
  EXPECT_EQ(dp.mapped_segments(), 1u);
}

}  // namespace
}  // namespace kvpool
