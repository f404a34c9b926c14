// The router-prefetch pieces of the master that sit beside the decision
// flow: the two-phase (read-only, then read-write) trigger and its TOCTOU
// case, the PREFETCH_BUFFER segment (strict landing, its own watermark,
// reservations, soft partition for puts, its own eviction), the pull
// queue, the reaper for router tasks, and the fate of a prefetch that
// landed after its get. Driven with a FakeClock.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "master/master_service.h"

namespace kvpool {
namespace {

using PS = MasterService::PrefetchStatus;

constexpr uint64_t kMain = 100 * 1024;
constexpr uint64_t kBlock = 4096;

class PrefetchBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_prefetch_trigger = true;
    config_.prefetch_trigger_lease_ttl_ms = 5000;
    Make(/*buffer=*/8 * kBlock);
  }
  void Make(uint64_t buffer, bool pulls = false) {
    svc_ = std::make_unique<MasterService>(config_, &clock_);
    SegmentInfo info;
    info.node_id = "holder";
    info.capacity = kMain;
    info.data_endpoint = "127.0.0.1:1";
    auto main = svc_->MountSegment(info, /*ssd_enabled=*/true, pulls);
    ASSERT_TRUE(main.ok());
    main_id_ = main.value();
    buffer_id_ = 0;
    if (buffer > 0) {
      info.kind = SegmentKind::kPrefetchBuffer;
      info.capacity = buffer;
      auto b = svc_->MountSegment(info, true, pulls);
      ASSERT_TRUE(b.ok());
      buffer_id_ = b.value();
    }
  }
  void Disk(const std::vector<std::string>& keys) {
    std::vector<DiskObjectIn> objs;
    for (const auto& k : keys) objs.push_back({"default", k, kBlock});
    for (ErrorCode c : svc_->RegisterDiskObjects("holder", objs))
      ASSERT_EQ(c, ErrorCode::OK);
  }
  PS One(const std::string& key) {
    return svc_->BatchPrefetchToMemory("", {key}).value()[0];
  }
  // Every queued promotion (the heartbeat carries a few per beat).
  std::vector<PromotionTaskMsg> Promotions() {
    std::vector<PromotionTaskMsg> all;
    for (;;) {
      NodeTasks t;
      EXPECT_TRUE(svc_->Heartbeat("holder", 0, 0, &t).ok());
      if (t.promotions.empty()) return all;
      for (auto& p : t.promotions) all.push_back(std::move(p));
    }
  }
  // Runs the holder's side of the chain for one task; returns the segment
  // the replica landed in (0 if AllocStart refused).
  uint32_t Land(const PromotionTaskMsg& t, bool success = true) {
    auto r = svc_->PromotionAllocStart("holder", "", t.key, t.size, t.task_id);
    if (!r.ok()) {
      svc_->NotifyPromotion("holder", "", t.key, t.task_id, false)
          .IgnoreError();
      return 0;
    }
    EXPECT_TRUE(
        svc_->NotifyPromotion("holder", "", t.key, t.task_id, success).ok());
    return r.value().segment->id;
  }
  Status Put(const std::string& key, uint64_t size, bool hard_pin = false) {
    PutOptions opts;
    opts.hard_pin = hard_pin;  // eviction cannot make room by dropping it
    auto r = svc_->PutStart("", key, size, opts);
    if (!r.ok()) return r.status();
    return svc_->PutEnd("", key);
  }
  uint64_t Counter(const std::string& name, const std::string& labels = "") {
    return svc_->metrics().CounterValue(name, labels);
  }
  void ExpectInvariant() {
    auto c = svc_->promotion_counters();
    EXPECT_EQ(c.admitted,
              c.completed + c.failed + c.cancelled + c.expired + c.in_flight);
  }

  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
  uint32_t main_id_ = 0, buffer_id_ = 0;
};

TEST_F(PrefetchBufferTest, TocTouMemoryReplicaAppearsBetweenPhases) {
  Disk({"k"});
  // Between the read-only and the read-write phase, a prefetch-on-exist
  // promotion of the same key lands.
  svc_->SetPrefetchPhaseHookForTest([&] {
    auto reg = svc_->RegisterPrefetchTask("holder", "", {"k"});
    ASSERT_EQ(reg[0].code, ErrorCode::OK);
    ASSERT_TRUE(
        svc_->PromotionAllocStart("holder", "", "k", kBlock, reg[0].task_id)
            .ok());
    ASSERT_TRUE(
        svc_->NotifyPromotion("holder", "", "k", reg[0].task_id, true).ok());
  });
  EXPECT_EQ(One("k"), PS::kInMemory);
  EXPECT_EQ(Counter("kvpool_master_prefetch_toctou_total"), 1u);
  // The lease was granted in the read-write phase; no second task exists.
  EXPECT_GT(svc_->QueryReadOnly("", "k").lease_remaining_ms, 4000);
  EXPECT_TRUE(Promotions().empty());
  EXPECT_EQ(svc_->promotion_counters().in_flight, 0u);
  ExpectInvariant();
}

TEST_F(PrefetchBufferTest, RemovedBetweenPhasesIsNotFound) {
  Disk({"k"});
  svc_->SetPrefetchPhaseHookForTest(
      [&] { ASSERT_TRUE(svc_->Remove("", "k", true).ok()); });
  EXPECT_EQ(One("k"), PS::kNotFound);
  EXPECT_EQ(svc_->promotion_counters().admitted, 0u);
}

TEST_F(PrefetchBufferTest, RouterPromotionLandsOnlyInTheBuffer) {
  Disk({"a", "b"});
  ASSERT_TRUE(Put("main-value", 10 * 1024).ok());
  const uint64_t main_used = svc_->segments().Usage(SegmentKind::kMain).used;
  EXPECT_EQ(One("a"), PS::kQueued);
  auto tasks = Promotions();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(Land(tasks[0]), buffer_id_);
  // The main cache did not move; the buffer holds the block.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, main_used);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).used, kBlock);
  // A promote-on-hit style path (prefetch-on-exist) still lands in main.
  auto reg = svc_->RegisterPrefetchTask("holder", "", {"b"});
  ASSERT_EQ(reg[0].code, ErrorCode::OK);
  auto r = svc_->PromotionAllocStart("holder", "", "b", kBlock, reg[0].task_id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().segment->id, main_id_);
  EXPECT_TRUE(
      svc_->NotifyPromotion("holder", "", "b", reg[0].task_id, true).ok());
  ExpectInvariant();
}

TEST_F(PrefetchBufferTest, FullBufferThrottlesCountingQueuedWork) {
  // 8 blocks of buffer, high watermark 0.9: 7 blocks fit.
  std::vector<std::string> keys;
  for (int i = 0; i < 9; ++i) keys.push_back("k" + std::to_string(i));
  Disk(keys);
  auto st = svc_->BatchPrefetchToMemory("", keys).value();
  int queued = 0, throttled = 0;
  for (PS s : st) {
    queued += s == PS::kQueued;
    throttled += s == PS::kThrottledWatermark;
  }
  // Nothing has landed yet: the reservations alone fill the buffer.
  EXPECT_EQ(queued, 7);
  EXPECT_EQ(throttled, 2);
  EXPECT_EQ(Counter("kvpool_master_prefetch_buffer_full_total"), 2u);
  // The main cache is empty, so its watermark is not what throttled.
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, 0u);
  ExpectInvariant();
}

TEST_F(PrefetchBufferTest, StrictBufferNeverFallsBackToMain) {
  Disk({"a"});
  EXPECT_EQ(One("a"), PS::kQueued);
  auto tasks = Promotions();
  ASSERT_EQ(tasks.size(), 1u);
  // Puts overflow into the buffer (soft partition) and fill it before the
  // promotion allocates.
  ASSERT_TRUE(Put("fill-main", kMain, /*hard_pin=*/true).ok());
  ASSERT_TRUE(Put("fill-buffer", 8 * kBlock).ok());
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 1u);
  EXPECT_EQ(Land(tasks[0]), 0u);  // NO_AVAILABLE_HANDLE, not main
  EXPECT_EQ(Counter("kvpool_master_prefetch_buffer_full_total"), 1u);
  EXPECT_EQ(svc_->promotion_counters().in_flight, 0u);
  ExpectInvariant();
}

TEST_F(PrefetchBufferTest, NonStrictBufferFallsBackToMain) {
  config_.prefetch_strict_buffer = false;
  Make(8 * kBlock);
  Disk({"a"});
  EXPECT_EQ(One("a"), PS::kQueued);
  auto tasks = Promotions();
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(Put("fill-main", 80 * 1024, /*hard_pin=*/true).ok());
  (void)Put("fill-main2", 20 * 1024, /*hard_pin=*/true);  // main full
  ASSERT_TRUE(Put("fill-buffer", 8 * kBlock).ok());
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).used,
            8 * kBlock);
  // Buffer full, not strict: the promotion lands in main if main has room.
  (void)svc_->Remove("", "fill-main2", true);
  EXPECT_EQ(Land(tasks[0]), main_id_);
}

TEST_F(PrefetchBufferTest, HolderWithoutBufferLandsInMain) {
  Make(/*buffer=*/0);
  Disk({"a"});
  EXPECT_EQ(One("a"), PS::kQueued);
  auto tasks = Promotions();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(Land(tasks[0]), main_id_);
}

TEST_F(PrefetchBufferTest, MainWatermarkExcludesTheBuffer) {
  // Main 89% full: below its high watermark even though the buffer is full
  // too; a combined reading would be above it.
  ASSERT_TRUE(Put("main", 89 * 1024, /*hard_pin=*/true).ok());
  ASSERT_TRUE(Put("overflow", 8 * kBlock).ok());  // lands in the buffer
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).used,
            8 * kBlock);
  EXPECT_LT(svc_->segments().Usage(SegmentKind::kMain).ratio(),
            config_.eviction_high_watermark_ratio);
  Make(8 * kBlock);  // fresh: main alone at its watermark
  ASSERT_TRUE(Put("main", 95 * 1024).ok());
  Disk({"a"});
  EXPECT_EQ(One("a"), PS::kThrottledWatermark);
}

TEST_F(PrefetchBufferTest, BufferIsEvictedOnItsOwnWatermark) {
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) keys.push_back("k" + std::to_string(i));
  Disk(keys);
  auto statuses = svc_->BatchPrefetchToMemory("", keys).value();
  for (PS s : statuses) ASSERT_EQ(s, PS::kQueued);
  for (const auto& t : Promotions()) ASSERT_EQ(Land(t), buffer_id_);
  // Under its lease nothing leaves.
  EXPECT_EQ(svc_->EvictBytes(8 * kBlock, SegmentKind::kPrefetchBuffer), 0u);
  clock_.Advance(6000);
  // Past the lease, puts overflow and push the buffer over its own
  // watermark: it drains below it, and the main cache is untouched.
  ASSERT_TRUE(Put("pinned-main", kMain, /*hard_pin=*/true).ok());
  ASSERT_TRUE(Put("overflow", kBlock).ok());
  EXPECT_EQ(Counter("kvpool_master_put_buffer_overflow_total"), 1u);
  const uint64_t main_used = svc_->segments().Usage(SegmentKind::kMain).used;
  EXPECT_GE(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).ratio(),
            config_.eviction_high_watermark_ratio);
  EXPECT_GT(svc_->EvictIfNeeded(), 0u);
  EXPECT_LT(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).ratio(),
            config_.eviction_high_watermark_ratio);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, main_used);
  EXPECT_GE(
      Counter("kvpool_master_prefetch_fate_total", "fate=\"evicted_unread\""),
      1u);
}

TEST_F(PrefetchBufferTest, PullingNodeGetsPromotionsOnlyByPull) {
  Make(8 * kBlock, /*pulls=*/true);
  Disk({"a", "b", "c"});
  auto statuses = svc_->BatchPrefetchToMemory("", {"a", "b", "c"}).value();
  for (PS s : statuses) ASSERT_EQ(s, PS::kQueued);
  EXPECT_TRUE(Promotions().empty());  // the heartbeat carries none
  std::vector<PromotionTaskMsg> got;
  ASSERT_TRUE(svc_->PullPromotionTasks("holder", 2, &got).ok());
  EXPECT_EQ(got.size(), 2u);  // the per-pull cap
  ASSERT_TRUE(svc_->PullPromotionTasks("holder", 2, &got).ok());
  EXPECT_EQ(got.size(), 3u);
  for (const auto& t : got) EXPECT_EQ(t.source, TriggerSource::kRouter);
  std::vector<PromotionTaskMsg> none;
  EXPECT_EQ(svc_->PullPromotionTasks("stranger", 2, &none).code(),
            ErrorCode::CLIENT_NOT_FOUND);
}

TEST_F(PrefetchBufferTest, ReaperReleasesRouterTasksNobodyPulls) {
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) keys.push_back("k" + std::to_string(i));
  Disk(keys);
  Disk({"late"});
  auto statuses = svc_->BatchPrefetchToMemory("", keys).value();
  for (PS s : statuses) ASSERT_EQ(s, PS::kQueued);
  EXPECT_EQ(One("late"), PS::kThrottledWatermark);  // buffer reserved
  // The holder never pulls: after promotion_task_ttl_sec the reaper frees
  // the entries, the quota and the buffer reservation.
  // (It keeps heartbeating, so it is alive, just not pulling.)
  for (int64_t t = 0; t <= config_.promotion_task_ttl_sec * 1000 + 2000;
       t += 5000) {
    clock_.Advance(5000);
    ASSERT_TRUE(svc_->Heartbeat("holder", 0, 0, nullptr).ok());
    svc_->Housekeep();
  }
  auto c = svc_->promotion_counters();
  EXPECT_EQ(c.expired, 7u);
  EXPECT_EQ(c.in_flight, 0u);
  EXPECT_EQ(One("late"), PS::kQueued);
  ExpectInvariant();
}

TEST_F(PrefetchBufferTest, GetBeforeLandingCountsLandedAfterGet) {
  Disk({"a"});
  EXPECT_EQ(One("a"), PS::kQueued);
  auto tasks = Promotions();
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());  // reads the SSD copy
  EXPECT_EQ(Land(tasks[0]), buffer_id_);
  EXPECT_EQ(
      Counter("kvpool_master_prefetch_fate_total", "fate=\"landed_after_get\""),
      1u);
  // Not also counted as read from DRAM by a later get.
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());
  EXPECT_EQ(
      Counter("kvpool_master_prefetch_fate_total", "fate=\"read_from_dram\""),
      0u);
  EXPECT_EQ(Counter("kvpool_master_promotion_outcome_total",
                    "source=\"router\",result=\"landed\""),
            1u);
}

TEST_F(PrefetchBufferTest, SharedInFlightCapHoldsUnderConcurrentTriggers) {
  // Check-then-increment across shards let several triggers take the last
  // slot at once; the slot is now reserved atomically.
  config_.promotion_queue_limit = 16;
  Make(/*buffer=*/0);
  std::vector<std::vector<std::string>> per_thread(8);
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < 64; ++i)
      per_thread[t].push_back("t" + std::to_string(t) + "-" +
                              std::to_string(i));
    Disk(per_thread[t]);
  }
  std::atomic<uint64_t> queued{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (const auto& k : per_thread[t]) {
        auto r = svc_->BatchPrefetchToMemory("", {k});
        if (r.ok() && r.value()[0] == PS::kQueued) ++queued;
      }
    });
  }
  for (auto& th : threads) th.join();
  auto c = svc_->promotion_counters();
  EXPECT_EQ(queued.load(), 16u);
  EXPECT_EQ(c.in_flight, 16u);
  EXPECT_EQ(c.admitted, 16u);
  ExpectInvariant();
}

// ---- buffer recycling (prefetch_consumed_lease_ms) ----

class BufferRecycleTest : public PrefetchBufferTest {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.enable_prefetch_trigger = true;
    config_.prefetch_trigger_lease_ttl_ms = 5000;
    config_.prefetch_consumed_lease_ms = 200;
    Make(/*buffer=*/8 * kBlock);
  }
  // Triggers and lands each key once, in the buffer.
  void Prefetch(const std::vector<std::string>& keys) {
    Disk(keys);
    auto st = svc_->BatchPrefetchToMemory("", keys);
    ASSERT_TRUE(st.ok());
    for (PS s : st.value()) ASSERT_EQ(s, PS::kQueued);
    for (const auto& t : Promotions()) ASSERT_EQ(Land(t), buffer_id_);
  }
  bool InDram(const std::string& key) {
    for (const auto& d : svc_->QueryReadOnly("", key).replicas)
      if (d.kind == ReplicaKind::kMemory) return true;
    return false;
  }
  uint64_t BufferUsed() {
    return svc_->segments().Usage(SegmentKind::kPrefetchBuffer).used;
  }
};

TEST_F(BufferRecycleTest, ConsumedBlockLeavesTheBufferAfterTheShortLease) {
  Prefetch({"a", "b"});
  auto g = svc_->GetReplicaList("", "a");  // a's get: the trigger is consumed
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->lease_ttl_ms, 200);  // the reply promises only the short lease
  EXPECT_EQ(Counter("kvpool_master_prefetch_buffer_recycled_total"), 1u);
  clock_.Advance(300);  // past a's reader lease; b's trigger lease runs on
  EXPECT_EQ(svc_->EvictBytes(2 * kBlock, SegmentKind::kPrefetchBuffer), kBlock);
  EXPECT_EQ(BufferUsed(), kBlock);
  // a is SSD-only again; b, still awaited, stayed.
  EXPECT_FALSE(InDram("a"));
  EXPECT_TRUE(InDram("b"));
  EXPECT_GT(svc_->QueryReadOnly("", "b").lease_remaining_ms, 4000);
  ExpectInvariant();
}

TEST_F(BufferRecycleTest, OffKeepsTheTriggerLeaseAsTheRfcHasIt) {
  config_.prefetch_consumed_lease_ms = 0;
  Make(8 * kBlock);
  Prefetch({"a"});
  auto g = svc_->GetReplicaList("", "a");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->lease_ttl_ms, 1000);
  clock_.Advance(300);
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), 0u);
  EXPECT_EQ(Counter("kvpool_master_prefetch_buffer_recycled_total"), 0u);
}

TEST_F(BufferRecycleTest, ConsumedBlockIsReclaimedBeforeUnconsumedOnes) {
  // With the knob off too: the order alone. Both leases end, then a is
  // read (so LRU alone would pick b, the older access).
  config_.prefetch_consumed_lease_ms = 0;
  Make(8 * kBlock);
  Prefetch({"b"});
  clock_.Advance(10);
  Prefetch({"a"});
  clock_.Advance(6000);  // trigger leases over: b and a are unread
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());  // a consumed
  clock_.Advance(1100);                             // a's reader lease over
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), kBlock);
  EXPECT_FALSE(InDram("a"));
  EXPECT_EQ(BufferUsed(), kBlock);  // b, unread, is the one left
  EXPECT_EQ(
      Counter("kvpool_master_prefetch_fate_total", "fate=\"evicted_unread\""),
      0u);
}

TEST_F(BufferRecycleTest, SharedBlockStaysUntilItsLastAnnouncedGet) {
  Disk({"a"});
  ASSERT_EQ(One("a"), PS::kQueued);  // request 1
  ASSERT_EQ(One("a"), PS::kQueued);  // request 2, same prefix (idempotent)
  for (const auto& t : Promotions()) ASSERT_EQ(Land(t), buffer_id_);
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());  // request 1's get
  clock_.Advance(300);
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), 0u);
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());  // request 2's get
  clock_.Advance(300);
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), kBlock);
}

TEST_F(BufferRecycleTest, ReaderLeasesAreNeverShortened) {
  Prefetch({"a"});
  // A reader (exist with lease) was promised the default lease before the
  // consuming get; dropping the trigger's lease must not cut it.
  ASSERT_EQ(svc_->ExistKey("", "a", /*grant_lease=*/true), ErrorCode::OK);
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());
  clock_.Advance(300);
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), 0u);
  clock_.Advance(800);  // past the exist's lease
  EXPECT_EQ(svc_->EvictBytes(kBlock, SegmentKind::kPrefetchBuffer), kBlock);
}

TEST_F(BufferRecycleTest, MainCacheReplicasKeepTheDefaultLease) {
  ASSERT_TRUE(Put("m", kBlock).ok());
  auto g = svc_->GetReplicaList("", "m");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->lease_ttl_ms, 1000);
}

// ---- deadline-aware prefetch ----

class PrefetchDeadlineTest : public PrefetchBufferTest {
 protected:
  void SetUp() override {
    PrefetchBufferTest::SetUp();
    Make(/*buffer=*/8 * kBlock, /*pulls=*/true);
  }
  std::vector<PS> Trigger(const std::vector<std::string>& keys,
                          int64_t deadline_in_ms) {
    auto r = svc_->BatchPrefetchToMemory("", keys, deadline_in_ms);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : std::vector<PS>();
  }
  std::vector<PromotionTaskMsg> Pull(size_t max = 32) {
    std::vector<PromotionTaskMsg> got;
    EXPECT_TRUE(svc_->PullPromotionTasks("holder", max, &got).ok());
    return got;
  }
  uint64_t Expired(const char* where) {
    return Counter("kvpool_master_promotion_deadline_expired_total",
                   std::string("where=\"") + where + "\"");
  }
};

TEST_F(PrefetchDeadlineTest, HoldersGetEarliestDeadlineFirst) {
  Disk({"none", "late", "early", "mid"});
  Trigger({"none"}, 0);  // no deadline: after every task that has one
  Trigger({"late"}, 5000);
  Trigger({"early"}, 1000);
  Trigger({"mid"}, 3000);
  auto got = Pull();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].key, "early");
  EXPECT_EQ(got[1].key, "mid");
  EXPECT_EQ(got[2].key, "late");
  EXPECT_EQ(got[3].key, "none");
  // The holder is told the time left, on no shared clock.
  EXPECT_EQ(got[0].deadline_in_ms, 1000);
  EXPECT_EQ(got[3].deadline_in_ms, 0);
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, TaskPastItsDeadlineIsDroppedAndReleased) {
  // 7 blocks fit the buffer: 7 tasks with a short deadline fill it.
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) keys.push_back("k" + std::to_string(i));
  Disk(keys);
  Disk({"late", "after"});
  for (PS s : Trigger(keys, 100)) ASSERT_EQ(s, PS::kQueued);
  EXPECT_EQ(Trigger({"late"}, 0)[0], PS::kThrottledWatermark);  // full
  clock_.Advance(150);
  EXPECT_TRUE(Pull().empty());  // every task expired before its read
  auto c = svc_->promotion_counters();
  EXPECT_EQ(c.expired, 7u);
  EXPECT_EQ(c.in_flight, 0u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(Expired("master"), 7u);
  EXPECT_EQ(Counter("kvpool_master_prefetch_fate_total", "fate=\"expired\""),
            7u);
  // The trigger's lease is gone (only readers' leases would remain).
  EXPECT_LE(svc_->QueryReadOnly("", "k0").lease_remaining_ms, 0);
  // The buffer reservations are back: a new trigger queues and is handed
  // out, and an expired key can be asked for again.
  EXPECT_EQ(Trigger({"late"}, 0)[0], PS::kQueued);
  EXPECT_EQ(Trigger({"k0"}, 1000)[0], PS::kQueued);
  auto got = Pull();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, "k0");
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, ExpiredTasksMakeRoomInTheSamePull) {
  Disk({"old", "fresh"});
  Trigger({"old"}, 50);
  Trigger({"fresh"}, 10000);
  clock_.Advance(100);
  auto got = Pull(/*max=*/1);
  ASSERT_EQ(got.size(), 1u);  // "old" dropped, "fresh" handed out instead
  EXPECT_EQ(got[0].key, "fresh");
  EXPECT_EQ(got[0].deadline_in_ms, 9900);
}

TEST_F(PrefetchDeadlineTest, ReTriggerExtendsOrClearsTheDeadline) {
  Disk({"a", "b"});
  Trigger({"a"}, 100);
  EXPECT_EQ(Trigger({"a"}, 1000)[0], PS::kQueued);  // a later request
  Trigger({"b"}, 100);
  EXPECT_EQ(Trigger({"b"}, 0)[0], PS::kQueued);  // one with no deadline
  clock_.Advance(200);
  auto got = Pull();
  ASSERT_EQ(got.size(), 2u);
  for (const auto& t : got) {
    EXPECT_EQ(t.deadline_in_ms, t.key == "a" ? 800 : 0) << t.key;
  }
  EXPECT_EQ(svc_->promotion_counters().expired, 0u);
}

TEST_F(PrefetchDeadlineTest, HolderReportsExpiryAsExpiredNotFailed) {
  Disk({"a"});
  Trigger({"a"}, 1000);
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(svc_->NotifyPromotion("holder", "", "a", got[0].task_id,
                                    /*success=*/false, /*expired=*/true)
                  .ok());
  auto c = svc_->promotion_counters();
  EXPECT_EQ(c.expired, 1u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(Expired("holder"), 1u);
  ExpectInvariant();
}

// The router triggers at routing, the engine's exist comes after. While
// the router's task is still in the master's mailbox, the exist trigger of
// its holder runs it at once as its own (so the holder keeps its gets'
// reads of the block for it) instead of being refused and leaving it to
// wait for the mailbox, or to expire there.
TEST_F(PrefetchDeadlineTest, ExistOfItsHolderRunsAQueuedRouterPromotion) {
  Disk({"a"});
  ASSERT_EQ(Trigger({"a"}, 100)[0], PS::kQueued);
  auto reg = svc_->RegisterPrefetchTask("holder", "", {"a"});
  ASSERT_EQ(reg[0].code, ErrorCode::OK);
  EXPECT_NE(reg[0].task_id, 0u);
  EXPECT_EQ(reg[0].size, kBlock);
  EXPECT_EQ(Counter("kvpool_master_prefetch_router_claimed_by_exist_total", ""),
            1u);
  // Still one task: a second exist is refused, and the mailbox copy is not
  // handed out (nor counted expired) past the router's deadline.
  EXPECT_EQ(svc_->RegisterPrefetchTask("holder", "", {"a"})[0].code,
            ErrorCode::PROMOTION_ALREADY_EXISTS);
  clock_.Advance(200);
  EXPECT_TRUE(Pull().empty());
  EXPECT_EQ(Expired("master"), 0u);
  EXPECT_EQ(svc_->promotion_counters().in_flight, 1u);
  // It lands in main DRAM, as exist promotions do, and its buffer
  // reservation is back.
  EXPECT_EQ(Land(PromotionTaskMsg{"", "a", reg[0].size, reg[0].task_id}),
            main_id_);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kPrefetchBuffer).used, 0u);
  auto c = svc_->promotion_counters();
  EXPECT_EQ(c.completed, 1u);
  EXPECT_EQ(c.expired, 0u);
  ExpectInvariant();
}

// Once handed out, the holder has the task queued: the exist trigger is
// refused, as the seed says, and the task takes no deadline any more.
TEST_F(PrefetchDeadlineTest, ExistTakesOverAHandedOutRouterPromotion) {
  Disk({"a"});
  ASSERT_EQ(Trigger({"a"}, 100)[0], PS::kQueued);
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(svc_->RegisterPrefetchTask("holder", "", {"a"})[0].code,
            ErrorCode::PROMOTION_ALREADY_EXISTS);
  EXPECT_EQ(Counter("kvpool_master_prefetch_router_taken_by_exist_total", ""),
            1u);
  EXPECT_EQ(Counter("kvpool_master_prefetch_router_claimed_by_exist_total", ""),
            0u);
  clock_.Advance(200);  // past the router's deadline: not expired
  EXPECT_EQ(Land(got[0]), main_id_);
  EXPECT_EQ(svc_->promotion_counters().completed, 1u);
  EXPECT_EQ(Expired("master"), 0u);
  ExpectInvariant();
}

// A router task handed out with a deadline that a later trigger without one
// cleared: its holder drops it by the deadline it was given, and it goes to
// the mailbox again and out again (not taken for a duplicate).
TEST_F(PrefetchDeadlineTest, ARouterTaskDroppedByAClearedDeadlineComesBack) {
  Disk({"a"});
  Trigger({"a"}, 1000);
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(Trigger({"a"}, 0)[0], PS::kQueued);  // clears the deadline
  ASSERT_TRUE(svc_->NotifyPromotion("holder", "", "a", got[0].task_id,
                                    /*success=*/false, /*expired=*/true)
                  .ok());
  auto again = Pull();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task_id, got[0].task_id);
  EXPECT_EQ(again[0].deadline_in_ms, 0);
  EXPECT_NE(Land(again[0]), 0u);
  EXPECT_EQ(svc_->promotion_counters().completed, 1u);
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, ATaskDroppedByAClearedDeadlineComesBack) {
  Disk({"a"});
  Trigger({"a"}, 1000);
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].deadline_in_ms, 1000);
  // The exist path takes it over while the holder has it queued; the
  // holder then drops it by the deadline it was handed.
  EXPECT_EQ(svc_->RegisterPrefetchTask("holder", "", {"a"})[0].code,
            ErrorCode::PROMOTION_ALREADY_EXISTS);
  ASSERT_TRUE(svc_->NotifyPromotion("holder", "", "a", got[0].task_id,
                                    /*success=*/false, /*expired=*/true)
                  .ok());
  auto c = svc_->promotion_counters();
  EXPECT_EQ(c.expired, 0u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(c.in_flight, 1u);
  auto again = Pull();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task_id, got[0].task_id);
  EXPECT_EQ(again[0].deadline_in_ms, 0);
  EXPECT_EQ(Land(again[0]), main_id_);
  EXPECT_EQ(svc_->promotion_counters().completed, 1u);
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, AStagedRouterPromotionIsNotTakenOver) {
  Disk({"a"});
  Trigger({"a"}, 1000);
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  auto r =
      svc_->PromotionAllocStart("holder", "", "a", got[0].size, got[0].task_id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().segment->id, buffer_id_);  // already reading
  EXPECT_EQ(svc_->RegisterPrefetchTask("holder", "", {"a"})[0].code,
            ErrorCode::PROMOTION_ALREADY_EXISTS);
  EXPECT_EQ(Counter("kvpool_master_prefetch_router_taken_by_exist_total", ""),
            0u);
  ASSERT_TRUE(
      svc_->NotifyPromotion("holder", "", "a", got[0].task_id, true).ok());
  EXPECT_EQ(svc_->promotion_counters().completed, 1u);
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, TaskWhoseGetAlreadyReadTheSsdIsDropped) {
  Disk({"a", "shared"});
  Trigger({"a"}, 10000);
  ASSERT_TRUE(svc_->GetReplicaList("", "a").ok());  // its get came first
  // Two requests announced "shared"; only one has read it yet.
  Trigger({"shared"}, 10000);
  Trigger({"shared"}, 10000);
  ASSERT_TRUE(svc_->GetReplicaList("", "shared").ok());
  auto got = Pull();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "shared");  // still awaited by the second request
  EXPECT_EQ(Expired("master_after_get"), 1u);
  // Without a deadline (the RFC's mode) such a task still runs.
  Disk({"b"});
  Trigger({"b"}, 0);
  ASSERT_TRUE(svc_->GetReplicaList("", "b").ok());
  got = Pull();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "b");
  ExpectInvariant();
}

TEST_F(PrefetchDeadlineTest, HeartbeatDeliveryDropsExpiredToo) {
  Make(8 * kBlock, /*pulls=*/false);
  Disk({"a"});
  Trigger({"a"}, 10);
  clock_.Advance(20);
  EXPECT_TRUE(Promotions().empty());
  EXPECT_EQ(Expired("master"), 1u);
  ExpectInvariant();
}

}  // namespace
}  // namespace kvpool
