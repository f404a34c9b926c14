#include "master/promotion_scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace kvpool {
namespace {

constexpr uint64_t kKiB = 1024;

// The scheduler over a real object table, real segments and a real node
// registry (whose mailboxes the hooks push to), on a fake clock.
class PromotionSchedulerTest : public ::testing::Test {
 protected:
  PromotionSchedulerTest()
      : objects_(std::make_unique<ObjectStore>()),
        segments_(SegmentManager::Strategy::kFreeRatioFirst),
        tiering_(&metrics_),
        nodes_(&clock_) {
    holder_ = nodes_.Register("holder", "127.0.0.1:1", "host", true,
                              /*pulls_promotions=*/true);
    Make({});
  }

  void Make(PromotionScheduler::Options options) {
    PromotionScheduler::Hooks hooks;
    hooks.push_promotion = [this](uint32_t holder, PromotionTaskMsg task) {
      return nodes_.PushPromotion(holder, std::move(task));
    };
    hooks.tenant_name = [](uint32_t) { return std::string("t"); };
    hooks.request_buffer_room = [this](const SegmentUsage&, uint64_t reserved,
                                       uint64_t size) {
      room_asked_.push_back(reserved + size);
    };
    scheduler_ = std::make_unique<PromotionScheduler>(
        options, &clock_, segments_, metrics_, tiering_, std::move(hooks));
  }

  uint32_t Mount(const std::string& node, uint64_t capacity,
                 SegmentKind kind = SegmentKind::kMain) {
    SegmentInfo info;
    info.node_id = node;
    info.capacity = capacity;
    info.kind = kind;
    auto r = segments_.Mount(info);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : 0;
  }

  ObjectKey Key(const std::string& key) { return ObjectKey{0, key}; }
  ObjectStore::Shard& ShardOf(const std::string& key) {
    return objects_->ShardFor(Key(key));
  }

  // A COMPLETE object of `size` bytes held only on the holder's SSD.
  ObjectMeta& AddOnDisk(const std::string& key, uint64_t size = kKiB) {
    // Filled in place: GCC 12 takes a fresh local ObjectMeta's first
    // push_back for a read of uninitialized memory (absl::InlinedVector's,
    // before ReplicaList).
    ObjectMeta& m = ShardOf(key).objects()[Key(key)];
    m.size = size;
    m.replicas.push_back(Replica{0, holder_, 0, ReplicaKind::kLocalDisk,
                                 ReplicaStatus::kComplete});
    return m;
  }

  // An entry as the exist or router path admits it (slot already taken).
  bool Enqueue(const std::string& key, int64_t deadline_ms,
               uint64_t buffer_reserved = 0) {
    if (!scheduler_->TryReserveSlot()) return false;
    PromotionState st;
    st.task_id = scheduler_->NewTaskId();
    st.holder = holder_;
    st.created_ms = clock_.NowMs();
    st.source = TriggerSource::kRouter;
    st.from_prefetch = true;
    st.deadline_ms = deadline_ms;
    st.buffer_reserved = buffer_reserved;
    return scheduler_->Queue(ShardOf(key), Key(key), st,
                             PromotionTaskMsg{"t", key, kKiB, st.task_id,
                                              st.source, true, st.deadline_ms});
  }

  const PromotionState* Entry(const std::string& key) {
    auto& shard = ShardOf(key);
    auto it = shard.promotions().find(Key(key));
    return it == shard.promotions().end() ? nullptr : &it->second;
  }

  PromotionState* MutableEntry(const std::string& key) {
    auto& shard = ShardOf(key);
    auto it = shard.promotions().find(Key(key));
    return it == shard.promotions().end() ? nullptr : &it->second;
  }

  std::vector<PromotionTaskMsg> Mailbox() {
    std::vector<PromotionTaskMsg> out;
    EXPECT_TRUE(nodes_.TakePromotions("holder", 100, &out));
    return out;
  }

  uint64_t Rejected(const char* reason) {
    return metrics_.CounterValue("kvpool_master_promotion_rejected_total",
                                 std::string("reason=\"") + reason + "\"");
  }

  void ExpectBalanced() {
    PromotionCounters c = scheduler_->counters();
    EXPECT_EQ(c.admitted,
              c.completed + c.failed + c.cancelled + c.expired + c.in_flight);
  }

  FakeClock clock_;
  std::unique_ptr<ObjectStore> objects_;
  SegmentManager segments_;
  MetricsRegistry metrics_;
  TieringMetrics tiering_;
  NodeRegistry nodes_;
  uint32_t holder_ = 0;
  std::unique_ptr<PromotionScheduler> scheduler_;
  std::vector<uint64_t> room_asked_;
};

// The frequency gate: a key is promoted on its threshold-th hit, not before.
TEST_F(PromotionSchedulerTest, FrequencyGateRefusesColdKeys) {
  Make({.promotion_admission_threshold = 3});
  Mount("holder", 100 * kKiB);
  ObjectMeta& m = AddOnDisk("k");
  auto& shard = ShardOf("k");
  EXPECT_STREQ(scheduler_->MaybePromoteOnHit(shard, Key("k"), m), "frequency");
  EXPECT_STREQ(scheduler_->MaybePromoteOnHit(shard, Key("k"), m), "frequency");
  EXPECT_EQ(Rejected("frequency"), 2u);
  EXPECT_EQ(Entry("k"), nullptr);
  EXPECT_EQ(scheduler_->MaybePromoteOnHit(shard, Key("k"), m), nullptr);
  ASSERT_NE(Entry("k"), nullptr);
  EXPECT_EQ(Entry("k")->source, TriggerSource::kOnHit);
  EXPECT_EQ(scheduler_->counters().admitted, 1u);
  EXPECT_EQ(scheduler_->in_flight(), 1u);
  auto tasks = Mailbox();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].key, "k");
  EXPECT_EQ(tasks[0].tenant, "t");
  EXPECT_EQ(tasks[0].task_id, Entry("k")->task_id);
}

// The watermark gate: nothing is promoted into a main cache at its high
// watermark.
TEST_F(PromotionSchedulerTest, WatermarkGateRefusesWhenMainIsFull) {
  Make({.promotion_admission_threshold = 1,
        .eviction_high_watermark_ratio = 0.5});
  Mount("holder", 10 * kKiB);
  ASSERT_EQ(segments_.Allocate(5 * kKiB, 1, SegmentKind::kMain, "").size(), 1u);
  ObjectMeta& m = AddOnDisk("k");
  EXPECT_TRUE(scheduler_->OverWatermark());
  EXPECT_STREQ(scheduler_->MaybePromoteOnHit(ShardOf("k"), Key("k"), m),
               "watermark");
  EXPECT_EQ(Rejected("watermark"), 1u);
  EXPECT_EQ(scheduler_->in_flight(), 0u);
  EXPECT_TRUE(Mailbox().empty());
}

// The dedup gate: one entry per key, whichever path made it.
TEST_F(PromotionSchedulerTest, DedupGateRefusesASecondEntry) {
  Make({.promotion_admission_threshold = 1});
  Mount("holder", 100 * kKiB);
  ObjectMeta& m = AddOnDisk("k");
  ASSERT_TRUE(Enqueue("k", 0));
  EXPECT_STREQ(scheduler_->MaybePromoteOnHit(ShardOf("k"), Key("k"), m),
               "dedup");
  EXPECT_EQ(Rejected("dedup"), 1u);
  EXPECT_EQ(scheduler_->counters().admitted, 1u);
  EXPECT_EQ(Mailbox().size(), 1u);
}

// The cap: promotion_queue_limit entries in flight, all paths together; a
// slot comes back when an entry ends.
TEST_F(PromotionSchedulerTest, CapRefusesUntilATaskEnds) {
  Make({.promotion_admission_threshold = 1, .promotion_queue_limit = 2});
  Mount("holder", 100 * kKiB);
  ObjectMeta& c = AddOnDisk("c");
  AddOnDisk("a");
  AddOnDisk("b");
  ASSERT_TRUE(Enqueue("a", 0));
  ASSERT_TRUE(Enqueue("b", 0));
  EXPECT_FALSE(scheduler_->TryReserveSlot());
  EXPECT_STREQ(scheduler_->MaybePromoteOnHit(ShardOf("c"), Key("c"), c), "cap");
  EXPECT_EQ(Rejected("cap"), 1u);

  // "a" lands: its holder's report ends it.
  auto& shard = ShardOf("a");
  EXPECT_EQ(scheduler_->Take(shard, shard.promotions().find(Key("a"))).holder,
            holder_);
  scheduler_->Finished(true);
  EXPECT_EQ(scheduler_->in_flight(), 1u);
  EXPECT_EQ(scheduler_->MaybePromoteOnHit(ShardOf("c"), Key("c"), c), nullptr);
  EXPECT_EQ(scheduler_->in_flight(), 2u);

  // A cancelled entry gives its slot back too.
  scheduler_->Cancel(ShardOf("b"), ObjectKeyView{0, "b"});
  EXPECT_EQ(Entry("b"), nullptr);
  EXPECT_TRUE(scheduler_->TryReserveSlot());
  scheduler_->ReleaseSlot();
  PromotionCounters n = scheduler_->counters();
  EXPECT_EQ(n.admitted, 3u);
  EXPECT_EQ(n.completed, 1u);
  EXPECT_EQ(n.cancelled, 1u);
  EXPECT_EQ(n.in_flight, 1u);
  ExpectBalanced();
}

// The holder's mailbox: earliest deadline first among deadlined tasks,
// then those without one in the order they came.
TEST_F(PromotionSchedulerTest, MailboxIsEarliestDeadlineFirstThenFifo) {
  Mount("holder", 100 * kKiB);
  const int64_t now = clock_.NowMs();
  for (const char* k : {"n1", "d300", "n2", "d100", "n3", "d200"}) AddOnDisk(k);
  ASSERT_TRUE(Enqueue("n1", 0));
  ASSERT_TRUE(Enqueue("d300", now + 300));
  ASSERT_TRUE(Enqueue("n2", 0));
  ASSERT_TRUE(Enqueue("d100", now + 100));
  ASSERT_TRUE(Enqueue("n3", 0));
  ASSERT_TRUE(Enqueue("d200", now + 200));
  std::vector<std::string> order;
  for (const auto& t : Mailbox()) order.push_back(t.key);
  EXPECT_EQ(order, (std::vector<std::string>{"d100", "d200", "d300", "n1", "n2",
                                             "n3"}));
}

// A holder gone before its task was queued: nothing is admitted, and the
// slot and the buffer reservation come back.
TEST_F(PromotionSchedulerTest, QueueToAGoneHolderReleasesWhatItTook) {
  Make({.promotion_queue_limit = 1});
  Mount("holder", 100 * kKiB);
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  AddOnDisk("k");
  ASSERT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
  nodes_.Remove("holder");
  EXPECT_FALSE(Enqueue("k", 0, 8 * kKiB));
  EXPECT_EQ(Entry("k"), nullptr);
  EXPECT_EQ(scheduler_->counters().admitted, 0u);
  EXPECT_TRUE(scheduler_->TryReserveSlot());  // the only slot is free
  // The 8 KiB are free again: another 8 KiB fit under the 90% mark.
  EXPECT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
}

// The prefetch buffer's own watermark counts what queued promotions
// reserved; a refusal asks for room.
TEST_F(PromotionSchedulerTest, BufferReservationsCountAgainstTheBuffer) {
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  EXPECT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 5 * kKiB));
  EXPECT_FALSE(scheduler_->ReserveBuffer(holder_, "holder", 5 * kKiB));
  ASSERT_EQ(room_asked_.size(), 1u);
  EXPECT_EQ(room_asked_[0], 10 * kKiB);
  PromotionState st;
  st.holder = holder_;
  st.buffer_reserved = 5 * kKiB;
  scheduler_->ReleaseBufferReservation(st);
  EXPECT_EQ(st.buffer_reserved, 0u);
  EXPECT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 5 * kKiB));
}

// At hand-out, a task past its deadline is expired: its slot and buffer
// reservation come back, the trigger's lease ends, and it counts as
// expired; one with time left is told how much.
TEST_F(PromotionSchedulerTest, ExpiredTaskReleasesSlotAndBuffer) {
  Make({.promotion_queue_limit = 2});
  Mount("holder", 100 * kKiB);
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  const int64_t now = clock_.NowMs();
  ObjectMeta& m = AddOnDisk("late");
  m.set_lease_deadline_ms(now + 60000);  // the trigger's
  m.set_reader_lease_deadline_ms(now);
  AddOnDisk("early");
  ASSERT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
  ASSERT_TRUE(Enqueue("late", now + 100, 8 * kKiB));
  ASSERT_TRUE(Enqueue("early", now + 500));
  EXPECT_FALSE(scheduler_->TryReserveSlot());
  auto tasks = Mailbox();
  ASSERT_EQ(tasks.size(), 2u);

  clock_.Advance(200);
  const int64_t later = clock_.NowMs();
  using R = PromotionScheduler::HandOutResult;
  EXPECT_EQ(scheduler_->HandOut(ShardOf("late"), ObjectKeyView{0, "late"},
                                later, tasks[0]),
            R::kExpired);
  EXPECT_EQ(scheduler_->HandOut(ShardOf("early"), ObjectKeyView{0, "early"},
                                later, tasks[1]),
            R::kDeliver);
  EXPECT_EQ(tasks[1].deadline_in_ms, 300);
  EXPECT_EQ(Entry("late"), nullptr);
  EXPECT_NE(Entry("early"), nullptr);
  EXPECT_EQ(m.lease_deadline_ms(), m.reader_lease_deadline_ms());
  PromotionCounters c = scheduler_->counters();
  EXPECT_EQ(c.expired, 1u);
  EXPECT_EQ(c.in_flight, 1u);
  ExpectBalanced();
  EXPECT_EQ(metrics_.CounterValue("kvpool_master_prefetch_fate_total",
                                  "fate=\"expired\""),
            1u);
  EXPECT_EQ(
      metrics_.CounterValue("kvpool_master_promotion_deadline_expired_total",
                            "where=\"master\""),
      1u);
  EXPECT_TRUE(scheduler_->TryReserveSlot());  // the slot came back
  EXPECT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
}

// The reaper drops entries older than promotion_task_ttl_sec, whatever
// their deadline, and frees a staged range only after the grace.
TEST_F(PromotionSchedulerTest, ReaperDropsTasksPastTheirTtl) {
  Make({.promotion_task_ttl_sec = 10});
  const uint32_t seg = Mount("holder", 100 * kKiB);
  AddOnDisk("old");
  AddOnDisk("young");
  ASSERT_TRUE(Enqueue("old", 0));
  auto p = segments_.Allocate(kKiB, 1, SegmentKind::kMain, "");
  ASSERT_EQ(p.size(), 1u);
  {
    auto& shard = ShardOf("old");
    PromotionState& st = shard.promotions().find(Key("old"))->second;
    st.staged = true;
    st.staged_segment = seg;
    st.staged_handle = p[0].handle;
    st.staged_offset = p[0].offset;
  }
  clock_.Advance(5000);
  ASSERT_TRUE(Enqueue("young", 0));
  clock_.Advance(5000);  // "old" is exactly at its TTL: kept
  for (size_t i = 0; i < ObjectStore::kShards; ++i)
    scheduler_->Reap(objects_->shard(i), clock_.NowMs());
  EXPECT_NE(Entry("old"), nullptr);
  clock_.Advance(1);
  for (size_t i = 0; i < ObjectStore::kShards; ++i)
    scheduler_->Reap(objects_->shard(i), clock_.NowMs());
  EXPECT_EQ(Entry("old"), nullptr);
  EXPECT_NE(Entry("young"), nullptr);
  PromotionCounters c = scheduler_->counters();
  EXPECT_EQ(c.expired, 1u);
  EXPECT_EQ(c.in_flight, 1u);
  ExpectBalanced();
  // The holder may still be writing the staged range: not free yet.
  EXPECT_EQ(segments_.Usage(SegmentKind::kMain).used, kKiB);
}

// An exist trigger takes over a queued router promotion not yet staged:
// no deadline, no buffer reservation, the exist path's from now on.
TEST_F(PromotionSchedulerTest, ExistTakesOverAQueuedRouterPromotion) {
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  ASSERT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
  PromotionState st;
  st.holder = holder_;
  st.source = TriggerSource::kRouter;
  st.deadline_ms = clock_.NowMs() + 100;
  st.buffer_reserved = 8 * kKiB;
  scheduler_->TakeOverForExist(st);
  EXPECT_EQ(st.source, TriggerSource::kExist);
  EXPECT_EQ(st.deadline_ms, 0);
  EXPECT_EQ(st.buffer_reserved, 0u);
  EXPECT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 8 * kKiB));
  // A staged one lands where it was asked to.
  PromotionState staged;
  staged.source = TriggerSource::kRouter;
  staged.staged = true;
  staged.deadline_ms = 5;
  scheduler_->TakeOverForExist(staged);
  EXPECT_EQ(staged.source, TriggerSource::kRouter);
  EXPECT_EQ(staged.deadline_ms, 5);
}

// A refused reservation says what held the buffer: its replicas' bytes or
// the reservations of queued tasks, summed over refusals.
TEST_F(PromotionSchedulerTest, AFullBufferCountsWhatHeldIt) {
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  ASSERT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", 6 * kKiB));
  EXPECT_FALSE(scheduler_->ReserveBuffer(holder_, "holder", 4 * kKiB));
  EXPECT_FALSE(scheduler_->ReserveBuffer(holder_, "holder", 4 * kKiB));
  auto bytes = [&](const char* part) {
    return metrics_.CounterValue(
        "kvpool_master_prefetch_buffer_full_bytes_total",
        std::string("part=\"") + part + "\"");
  };
  EXPECT_EQ(bytes("reserved"), 12 * kKiB);
  EXPECT_EQ(bytes("used"), 0u);
}

// The exist trigger of its holder claims a router promotion still in the
// mailbox (not handed out, not staged): the mailbox copy is then a
// duplicate at hand-out. Another node's, a handed-out or an on-hit one is
// not claimed.
TEST_F(PromotionSchedulerTest, ExistOfTheHolderClaimsOnlyAMailboxTask) {
  Mount("holder", 100 * kKiB);
  const int64_t now = clock_.NowMs();
  AddOnDisk("queued");
  AddOnDisk("out");
  ASSERT_TRUE(Enqueue("queued", now + 100));
  ASSERT_TRUE(Enqueue("out", now + 100));
  auto tasks = Mailbox();
  ASSERT_EQ(tasks.size(), 2u);
  using R = PromotionScheduler::HandOutResult;
  const size_t out = tasks[0].key == "out" ? 0 : 1;
  EXPECT_EQ(scheduler_->HandOut(ShardOf("out"), ObjectKeyView{0, "out"}, now,
                                tasks[out]),
            R::kDeliver);
  EXPECT_FALSE(scheduler_->ClaimForExist(*MutableEntry("out"), holder_));

  PromotionState* queued = MutableEntry("queued");
  EXPECT_FALSE(scheduler_->ClaimForExist(*queued, holder_ + 1));
  EXPECT_EQ(queued->source, TriggerSource::kRouter);
  EXPECT_TRUE(scheduler_->ClaimForExist(*queued, holder_));
  EXPECT_EQ(queued->source, TriggerSource::kExist);
  EXPECT_EQ(queued->deadline_ms, 0);
  EXPECT_FALSE(scheduler_->ClaimForExist(*queued, holder_));  // once
  clock_.Advance(200);
  EXPECT_EQ(scheduler_->HandOut(ShardOf("queued"), ObjectKeyView{0, "queued"},
                                clock_.NowMs(), tasks[1 - out]),
            R::kDuplicate);
  EXPECT_NE(Entry("queued"), nullptr);  // the holder runs it
  EXPECT_EQ(scheduler_->counters().expired, 0u);
  ExpectBalanced();

  PromotionState on_hit;
  on_hit.holder = holder_;
  EXPECT_FALSE(scheduler_->ClaimForExist(on_hit, holder_));
}

// Staging: a router promotion lands in its holder's prefetch buffer (only
// there, strictly), every other one in the main cache; its buffer
// reservation ends either way.
TEST_F(PromotionSchedulerTest, StageChoosesTheBufferForRouterPromotions) {
  const uint32_t main = Mount("holder", 100 * kKiB);
  const uint32_t buffer =
      Mount("holder", 2 * kKiB, SegmentKind::kPrefetchBuffer);
  PromotionState router;
  router.holder = holder_;
  router.source = TriggerSource::kRouter;
  ASSERT_TRUE(scheduler_->ReserveBuffer(holder_, "holder", kKiB));
  router.buffer_reserved = kKiB;
  auto p = scheduler_->Stage(router, kKiB, "holder");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->segment, buffer);
  EXPECT_TRUE(router.staged);
  EXPECT_EQ(router.staged_segment, buffer);
  EXPECT_EQ(router.buffer_reserved, 0u);
  // The buffer is full now: strictly, no room at all.
  PromotionState second = router;
  second.staged = false;
  EXPECT_FALSE(scheduler_->Stage(second, 2 * kKiB, "holder").has_value());
  EXPECT_FALSE(second.staged);
  EXPECT_EQ(metrics_.CounterValue("kvpool_master_promotion_alloc_failed_total"),
            1u);
  EXPECT_EQ(metrics_.CounterValue("kvpool_master_prefetch_buffer_full_total"),
            1u);
  PromotionState on_hit;
  on_hit.holder = holder_;
  auto q = scheduler_->Stage(on_hit, 2 * kKiB, "holder");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->segment, main);
  // Not strictly: a router promotion overflows into the main cache.
  Make({.prefetch_strict_buffer = false});
  PromotionState loose = second;
  auto r = scheduler_->Stage(loose, 2 * kKiB, "holder");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->segment, main);
}

// A router trigger: the cap, then the holder's buffer (strictly) with what
// queued promotions reserved; a queued task carries its deadline.
TEST_F(PromotionSchedulerTest, RouterAdmissionGatesOnCapAndBuffer) {
  Make({.promotion_queue_limit = 2});
  Mount("holder", 100 * kKiB);
  Mount("holder", 10 * kKiB, SegmentKind::kPrefetchBuffer);
  for (const char* k : {"a", "b", "c"}) AddOnDisk(k, 5 * kKiB);
  using RA = PromotionScheduler::RouterAdmission;
  const int64_t now = clock_.NowMs();
  EXPECT_EQ(scheduler_->AdmitRouter(ShardOf("a"), Key("a"), 5 * kKiB, holder_,
                                    "holder", now, 250),
            RA::kQueued);
  ASSERT_NE(Entry("a"), nullptr);
  EXPECT_EQ(Entry("a")->deadline_ms, now + 250);
  EXPECT_EQ(Entry("a")->buffer_reserved, 5 * kKiB);
  EXPECT_EQ(Entry("a")->source, TriggerSource::kRouter);
  // 5 + 5 KiB would pass the buffer's 90% mark: refused, slot given back.
  EXPECT_EQ(scheduler_->AdmitRouter(ShardOf("b"), Key("b"), 5 * kKiB, holder_,
                                    "holder", now, 0),
            RA::kBufferFull);
  EXPECT_EQ(Entry("b"), nullptr);
  EXPECT_EQ(scheduler_->in_flight(), 1u);
  EXPECT_EQ(metrics_.CounterValue("kvpool_master_prefetch_buffer_full_total"),
            1u);
  EXPECT_EQ(room_asked_.size(), 1u);
  // Not strictly: no buffer gate; a cap of 1 then refuses a second.
  Make({.promotion_queue_limit = 1, .prefetch_strict_buffer = false});
  EXPECT_EQ(scheduler_->AdmitRouter(ShardOf("b"), Key("b"), 5 * kKiB, holder_,
                                    "holder", now, 0),
            RA::kQueued);
  EXPECT_EQ(Entry("b")->deadline_ms, 0);
  EXPECT_EQ(Entry("b")->buffer_reserved, 0u);
  EXPECT_EQ(scheduler_->AdmitRouter(ShardOf("c"), Key("c"), 5 * kKiB, holder_,
                                    "holder", now, 0),
            RA::kCap);
  // A holder gone meanwhile: nothing is admitted, nothing stays taken.
  nodes_.Remove("holder");
  Make({});
  EXPECT_EQ(scheduler_->AdmitRouter(ShardOf("c"), Key("c"), 5 * kKiB, holder_,
                                    "holder", now, 0),
            RA::kHolderGone);
  EXPECT_EQ(Entry("c"), nullptr);
  EXPECT_EQ(scheduler_->in_flight(), 0u);
}

// Prefetch on exist: admitted under the shared cap, into no mailbox (its
// holder runs it itself).
TEST_F(PromotionSchedulerTest, ExistAdmissionSharesTheCap) {
  Make({.promotion_queue_limit = 1});
  Mount("holder", 100 * kKiB);
  AddOnDisk("a");
  AddOnDisk("b");
  const uint64_t id =
      scheduler_->AdmitExist(ShardOf("a"), Key("a"), holder_, clock_.NowMs());
  EXPECT_NE(id, 0u);
  ASSERT_NE(Entry("a"), nullptr);
  EXPECT_EQ(Entry("a")->task_id, id);
  EXPECT_EQ(Entry("a")->source, TriggerSource::kExist);
  EXPECT_TRUE(Entry("a")->from_prefetch);
  EXPECT_EQ(
      scheduler_->AdmitExist(ShardOf("b"), Key("b"), holder_, clock_.NowMs()),
      0u);
  EXPECT_EQ(Entry("b"), nullptr);
  EXPECT_TRUE(Mailbox().empty());
  EXPECT_EQ(scheduler_->counters().admitted, 1u);
}

// A re-trigger keeps the task until the last asker's deadline; one without
// a deadline clears it for good.
TEST_F(PromotionSchedulerTest, ReTriggerExtendsOrClearsTheDeadline) {
  PromotionState st;
  st.deadline_ms = 1100;
  PromotionScheduler::ExtendDeadline(st, 1000, 50);  // earlier: kept
  EXPECT_EQ(st.deadline_ms, 1100);
  PromotionScheduler::ExtendDeadline(st, 1000, 300);
  EXPECT_EQ(st.deadline_ms, 1300);
  PromotionScheduler::ExtendDeadline(st, 1000, 0);
  EXPECT_EQ(st.deadline_ms, 0);
  PromotionScheduler::ExtendDeadline(st, 1000, 300);  // stays without one
  EXPECT_EQ(st.deadline_ms, 0);
}

}  // namespace
}  // namespace kvpool
