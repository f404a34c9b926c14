// Issue #41, hole 3: the puts of a client that died are released after
// client_ttl, not put_start_release_timeout_sec; a live client, however
// slow, keeps its reservation.
#include "master/client_liveness.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "master/master_service.h"

namespace kvpool {
namespace {

constexpr ClientId kA{1, 1}, kB{2, 2}, kC{3, 3};

TEST(ClientLivenessTest, TracksBoundedAndForgetsOnlyTheDead) {
  FakeClock clock;
  ClientLiveness live(&clock, 250, 1000, 2);
  EXPECT_FALSE(live.Touch(ClientId{}));  // no id: not tracked
  EXPECT_TRUE(live.Touch(kA));
  EXPECT_TRUE(live.Touch(kB));
  EXPECT_FALSE(live.Touch(kC));  // full
  EXPECT_EQ(live.size(), 2u);
  for (int i = 0; i < 6; ++i) {
    clock.Advance(200);
    live.Tick();
    if (i == 3) {
      EXPECT_TRUE(live.Touch(kB));
    }
  }
  EXPECT_TRUE(live.Dead(kA));
  EXPECT_FALSE(live.Dead(kB));
  EXPECT_FALSE(live.Dead(kC));  // never tracked: not dead
  EXPECT_TRUE(live.AnyDead());
  EXPECT_EQ(live.ForgetDeadAt(live.Now()), 1u);
  EXPECT_FALSE(live.Dead(kA));
  EXPECT_TRUE(live.Touch(kC));  // room again
}

TEST(ClientLivenessTest, IdIsSixteenBytesOrNone) {
  EXPECT_TRUE(ClientId::FromBytes("short").empty());
  const std::string b(16, '\x01');
  EXPECT_FALSE(ClientId::FromBytes(b).empty());
  EXPECT_EQ(ClientId::FromBytes(b), ClientId::FromBytes(b));
}

class DeadClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.client_ttl = 2;
    svc_ = std::make_unique<MasterService>(config_, &clock_);
    SegmentInfo info;
    info.node_id = "a";
    info.capacity = kSegment;
    info.data_endpoint = "a:1";
    ASSERT_TRUE(svc_->MountSegment(info).ok());
  }
  Status Start(const std::string& key, uint64_t size, ClientId client,
               bool upsert = false) {
    PutOptions opts;
    opts.client = client;
    opts.upsert = upsert;
    return svc_->PutStart("", key, size, opts).status();
  }
  // The master running for `ms`, its node heartbeating, and the clients in
  // `alive` pinging every 500 ms.
  void Run(int64_t ms, std::initializer_list<ClientId> alive) {
    for (int64_t t = 100; t <= ms; t += 100) {
      clock_.Advance(100);
      ASSERT_TRUE(svc_->Heartbeat("a").ok());
      if (t % 500 == 0) {
        for (const ClientId& c : alive) ASSERT_TRUE(svc_->ClientPing(c).ok());
      }
      svc_->Housekeep();
    }
  }
  uint64_t Used() const {
    return svc_->segments().Usage(SegmentKind::kMain).used;
  }
  uint64_t Released() {
    return svc_->metrics()
        .GetCounter("kvpool_master_puts_released_dead_client_total")
        .Value();
  }

  static constexpr uint64_t kSegment = 1 << 20;
  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
};

// A fills the pool with a put and an upsert and dies; C is slow but pings.
// After client_ttl A's puts are released (the upsert's old value stays),
// and once no late write of them can land B's put fits; C's reservation
// holds throughout and its PutEnd succeeds.
TEST_F(DeadClientTest, ADeadClientsPutsAreReleasedAndALiveOnesAreKept) {
  PutOptions pinned;
  pinned.hard_pin = true;
  ASSERT_TRUE(svc_->PutStart("", "u", 64 << 10, pinned).ok());
  ASSERT_TRUE(svc_->PutEnd("", "u").ok());
  ASSERT_TRUE(Start("c0", 128 << 10, kC).ok());
  ASSERT_TRUE(Start("u", 256 << 10, kA, /*upsert=*/true).ok());
  ASSERT_TRUE(Start("a0", kSegment - (448 << 10), kA).ok());
  ASSERT_EQ(Used(), kSegment);
  EXPECT_EQ(Start("b0", 512 << 10, kB).code(), ErrorCode::NO_AVAILABLE_HANDLE);

  // Well within the ttl nothing goes, also for A.
  Run(config_.client_ttl * 1000 - 500, {kC});
  EXPECT_EQ(Released(), 0u);
  EXPECT_EQ(Used(), kSegment);

  // Past it (and the once-a-second reclaim pass), A's puts are gone ...
  Run(1600, {kC});
  EXPECT_EQ(Released(), 2u);
  EXPECT_EQ(svc_->PutEnd("", "a0").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->PutEnd("", "u").code(), ErrorCode::OBJECT_NOT_FOUND);
  auto u = svc_->GetReplicaList("", "u");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->size, 64u << 10);  // the old value, untouched

  // ... and their ranges are reused once their write tokens have expired
  // (write_capability_ttl_ms after the puts started, and a second).
  EXPECT_EQ(Used(), kSegment);
  Run(config_.write_capability_ttl_ms + 1000 - 3100 + 200, {kC});
  EXPECT_EQ(Used(), (64u + 128u) << 10);
  ASSERT_TRUE(Start("b0", 512 << 10, kB).ok());
  ASSERT_TRUE(svc_->PutEnd("", "b0").ok());
  ASSERT_TRUE(svc_->PutEnd("", "c0").ok());
  EXPECT_TRUE(svc_->GetReplicaList("", "c0").ok());
  EXPECT_EQ(Released(), 2u);
}

// The master's own pause is no client's silence; a client heard of for
// the first time (this master restarted) is alive; a put without a client
// keeps the release timeout.
TEST_F(DeadClientTest, APausedMasterOrAnUnknownClientReleasesNothing) {
  ASSERT_TRUE(Start("a0", 256 << 10, kA).ok());
  ASSERT_TRUE(Start("n0", 256 << 10, ClientId{}).ok());
  Run(1000, {kA});
  clock_.Advance(config_.client_ttl * 1000 + 5000);  // the pause
  ASSERT_TRUE(svc_->Heartbeat("a").ok());
  svc_->Housekeep();
  Run(1000, {});
  EXPECT_EQ(Released(), 0u);
  EXPECT_EQ(Used(), 512u << 10);
  // A ping is all a restarted master hears of a client: it keeps its puts.
  ASSERT_TRUE(Start("c0", 256 << 10, kC).ok());
  Run(config_.client_ttl * 1000 + 1500, {kC});
  EXPECT_EQ(Released(), 1u);  // a0: A stayed silent after the pause
  ASSERT_TRUE(svc_->PutEnd("", "c0").ok());
  EXPECT_EQ(svc_->PutEnd("", "n0").code(), ErrorCode::OK);
  EXPECT_EQ(svc_->ClientPing(ClientId{}).code(), ErrorCode::INVALID_PARAMS);
}

}  // namespace
}  // namespace kvpool
