#include "events/kv_event_subscriber.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "events/kv_event_publisher.h"

namespace kvpool::events {
namespace {

using std::chrono::milliseconds;

TierEvent Stored(std::string key, uint8_t media = kMediumDram) {
  TierEvent ev;
  ev.kind = TierEventKind::kStored;
  ev.media = media;
  ev.tenant = "default";
  ev.key = std::move(key);
  return ev;
}

KeyState Get(const TierMap& map, const std::string& key) {
  std::vector<KeyState> out;
  const std::string keys[] = {key};
  map.Query("default", keys, &out);
  return out[0];
}

class SubscriberTest : public ::testing::Test {
 protected:
  void StartPublisher(size_t buffer_steps, size_t max_queue_size = 100000) {
    PublisherOptions o;
    o.max_queue_size = max_queue_size;
    o.endpoint = "tcp://127.0.0.1:*";
    o.replay_endpoint = "tcp://127.0.0.1:*";
    o.topic = "kv";
    o.buffer_steps = buffer_steps;
    pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
    ASSERT_TRUE(pub_->Start().ok());
  }

  void StartSubscriber() {
    SubscriberOptions o;
    o.endpoint = pub_->endpoint();
    o.replay_endpoint = pub_->replay_endpoint();
    o.topic = "kv";
    sub_ = std::make_unique<KvEventSubscriber>(o, &map_);
    ASSERT_TRUE(sub_->Start().ok());
  }

  // Publishes `key` as a batch of its own; returns the batch's number.
  uint64_t PublishOne(const std::string& key, uint8_t media = kMediumDram) {
    const uint64_t before = pub_->batches_published();
    pub_->queue()->Push(Stored(key, media));
    // The publisher has no completion signal: its counter is the condition.
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
    while (pub_->batches_published() == before &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_GT(pub_->batches_published(), before);
    return pub_->batches_published() - 1;
  }

  // A PUB subscription takes effect some time after connect: publishes
  // probes until the subscriber has applied one that came after it.
  void Join() {
    for (int i = 0; i < 500; ++i) {
      const uint64_t seq = PublishOne("probe");
      if (sub_->WaitForSeq(seq + 1, milliseconds(20))) return;
    }
    FAIL() << "the subscriber never saw a live batch";
  }

  TierMap map_{1000};
  std::unique_ptr<KvEventPublisher> pub_;
  std::unique_ptr<KvEventSubscriber> sub_;
};

TEST_F(SubscriberTest, CatchesUpFromTheStartByReplay) {
  StartPublisher(100);
  PublishOne("early", kMediumSsd);
  StartSubscriber();
  ASSERT_TRUE(sub_->WaitForSeq(1, milliseconds(5000)));
  EXPECT_TRUE(Get(map_, "early").fresh);
  EXPECT_EQ(Get(map_, "early").media, kMediumSsd);
  EXPECT_TRUE(Get(map_, "never-put").fresh);  // from the start: known absent
  EXPECT_EQ(sub_->stats().resyncs, 0u);
}

TEST_F(SubscriberTest, AGapIsFilledFromTheReplaySocket) {
  StartPublisher(100);
  StartSubscriber();
  Join();
  const SubscriberStats before = sub_->stats();
  pub_->SkipSendsForTest(2);  // numbered and buffered, never sent
  PublishOne("lost-1");
  PublishOne("lost-2");
  const uint64_t seq = PublishOne("live");
  ASSERT_TRUE(sub_->WaitForSeq(seq + 1, milliseconds(5000)));
  const SubscriberStats after = sub_->stats();
  EXPECT_EQ(after.gaps - before.gaps, 1u);
  EXPECT_EQ(after.replays - before.replays, 1u);
  EXPECT_EQ(after.resyncs, 0u);
  for (const char* k : {"lost-1", "lost-2", "live"}) {
    EXPECT_TRUE(Get(map_, k).fresh) << k;
    EXPECT_EQ(Get(map_, k).media, kMediumDram) << k;
  }
}

TEST_F(SubscriberTest, AGapTheReplayCannotFillMarksTheMapStale) {
  // A one-event queue: pushed faster than the publisher drains, events are
  // dropped, and the publisher skips a number no replay can give back.
  StartPublisher(100, 1);
  StartSubscriber();
  Join();
  const uint64_t resyncs = sub_->stats().resyncs;
  // Fresh unless joining itself met a loss (probes lost before the
  // subscription took effect and no longer buffered).
  EXPECT_EQ(Get(map_, "probe").fresh, resyncs == 0);
  for (int i = 0; i < 100000 && pub_->queue()->dropped_total() == 0; ++i)
    pub_->queue()->Push(Stored("flood"));
  ASSERT_GT(pub_->queue()->dropped_total(), 0u);
  uint64_t seq = 0;
  do {  // a push into a queue still holding the flood's last event drops
    seq = PublishOne("live");
  } while (!sub_->WaitForSeq(seq + 1, milliseconds(5000)) ||
           Get(map_, "live").media == 0);
  EXPECT_GT(sub_->stats().resyncs, resyncs);
  EXPECT_FALSE(Get(map_, "probe").fresh);
  EXPECT_FALSE(Get(map_, "never-seen").fresh);  // unknown, not absent
  EXPECT_FALSE(Get(map_, "live").fresh);        // seen, but after a loss
  EXPECT_EQ(Get(map_, "live").media, kMediumDram);
}

TEST_F(SubscriberTest, ANewMasterStartingAtZeroResetsTheMap) {
  StartPublisher(100);
  StartSubscriber();
  Join();
  // Numbers well past where the new master will be when the subscriber
  // hears from it (ZMQ reconnects every 100 ms): it must see them go down.
  for (int i = 0; i < 100; ++i) PublishOne("old");
  ASSERT_TRUE(sub_->WaitForSeq(pub_->batches_published(), milliseconds(5000)));
  ASSERT_TRUE(Get(map_, "old").fresh);
  // A new master on the same endpoints: its numbers start again at 0.
  PublisherOptions o;
  o.endpoint = pub_->endpoint();
  o.replay_endpoint = pub_->replay_endpoint();
  o.topic = "kv";
  pub_.reset();
  pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
  ASSERT_TRUE(pub_->Start().ok());
  // The subscriber reconnects by itself; the first batch it receives has a
  // lower number than the last it saw. Probes until it has followed one.
  bool restarted = false;
  for (int i = 0; i < 500 && !restarted; ++i) {
    PublishOne("new");
    restarted =
        sub_->WaitUntil([](const SubscriberStats& s) { return s.restarts > 0; },
                        milliseconds(20));
  }
  ASSERT_TRUE(restarted);
  // Whatever it received since: applied.
  ASSERT_TRUE(sub_->WaitForSeq(pub_->batches_published(), milliseconds(5000)));
  EXPECT_EQ(sub_->stats().restarts, 1u);
  // The new master's stream from 0 was replayed: the map is what it holds.
  EXPECT_EQ(sub_->stats().resyncs, 0u);
  EXPECT_TRUE(Get(map_, "new").fresh);
  EXPECT_EQ(Get(map_, "new").media, kMediumDram);
  EXPECT_TRUE(Get(map_, "old").fresh);  // the new master does not hold it
  EXPECT_EQ(Get(map_, "old").media, 0);
}

TEST_F(SubscriberTest, ANewEpochIsANewStreamWhateverItsNumbers) {
  // Masters' streams (docs/kv_events.md, "Failover and restart"): batch 0
  // a reset, every batch with the stream's epoch.
  PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.topic = "kv";
  o.await_stream = true;
  pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
  ASSERT_TRUE(pub_->Start().ok());
  pub_->OpenStream(1, "old-leader");
  StartSubscriber();
  Join();
  ASSERT_TRUE(Get(map_, "probe").fresh);
  o.endpoint = pub_->endpoint();
  o.replay_endpoint = pub_->replay_endpoint();
  pub_.reset();
  pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
  ASSERT_TRUE(pub_->Start().ok());
  pub_->OpenStream(2, "new-leader");
  bool restarted = false;
  for (int i = 0; i < 500 && !restarted; ++i) {
    PublishOne("new");
    restarted =
        sub_->WaitUntil([](const SubscriberStats& s) { return s.restarts > 0; },
                        milliseconds(20));
  }
  ASSERT_TRUE(restarted) << "batches " << sub_->stats().batches << " next "
                         << sub_->stats().next_seq << " gaps "
                         << sub_->stats().gaps << " resyncs "
                         << sub_->stats().resyncs << " published "
                         << pub_->batches_published();
  ASSERT_TRUE(sub_->WaitForSeq(pub_->batches_published(), milliseconds(5000)));
  EXPECT_EQ(sub_->stats().restarts, 1u);
  EXPECT_EQ(sub_->stats().resyncs, 0u);   // the new stream from its reset
  EXPECT_TRUE(Get(map_, "probe").fresh);  // the old stream's key: gone
  EXPECT_EQ(Get(map_, "probe").media, 0);
  EXPECT_TRUE(Get(map_, "new").fresh);
  EXPECT_EQ(Get(map_, "new").media, kMediumDram);
}

TEST(SubscriberStartTest, ABadEndpointIsRefused) {
  TierMap map(10);
  SubscriberOptions o;
  o.endpoint = "nonsense://x";
  KvEventSubscriber sub(o, &map);
  EXPECT_FALSE(sub.Start().ok());
}

}  // namespace
}  // namespace kvpool::events
