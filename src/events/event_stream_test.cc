// A publisher's stream (docs/kv_events.md, "Failover and restart"): a reset
// first, an epoch on every batch, nothing before it opens or after it
// closes. Read through the replay socket, which answers with everything
// published, so no subscription has to take effect first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <msgpack.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "events/event_encoder.h"
#include "events/kv_event_publisher.h"

namespace kvpool::events {
namespace {

TierEvent Stored(std::string key) {
  TierEvent ev;
  ev.kind = TierEventKind::kStored;
  ev.media = kMediumDram;
  ev.tenant = "default";
  ev.key = std::move(key);
  return ev;
}

std::string Str(const msgpack::object& o) {
  if (o.type == msgpack::type::BIN)
    return std::string(o.via.bin.ptr, o.via.bin.size);
  return o.as<std::string>();
}

TEST(EventStreamEncoderTest, AResetIsAnAllBlocksClearedNamingLeaderAndEpoch) {
  TierEvent reset;
  reset.kind = TierEventKind::kReset;
  reset.key = "10.0.0.2:50051";  // the leader
  reset.size = 7;                // the epoch
  reset.ts_us = 1000000;
  std::string out;
  EXPECT_EQ(EncodeBatch({&reset, 1}, 2.0, 0, &out, 7), 1u);
  auto oh = msgpack::unpack(out.data(), out.size());
  const auto& batch = oh.get().via.array;
  ASSERT_EQ(batch.size, 5u);  // ts, events, rank, dropped_before, epoch
  EXPECT_EQ(batch.ptr[4].as<uint64_t>(), 7u);
  const auto& ev = batch.ptr[1].via.array.ptr[0].via.array;
  ASSERT_EQ(ev.size, 10u);  // tag, kvpool's seven, leader, epoch
  EXPECT_EQ(Str(ev.ptr[0]), "AllBlocksCleared");
  EXPECT_EQ(Str(ev.ptr[1]), "reset");
  EXPECT_EQ(Str(ev.ptr[2]), "");  // every tenant
  EXPECT_EQ(Str(ev.ptr[3]), "");  // no key
  EXPECT_EQ(ev.ptr[4].as<uint64_t>(), 0u);
  EXPECT_EQ(Str(ev.ptr[8]), "10.0.0.2:50051");
  EXPECT_EQ(ev.ptr[9].as<uint64_t>(), 7u);
}

TEST(EventStreamEncoderTest, WithoutAnEpochTheBatchKeepsFourFields) {
  const TierEvent ev = Stored("k");
  std::string out;
  EncodeBatch({&ev, 1}, 2.0, 0, &out);
  auto oh = msgpack::unpack(out.data(), out.size());
  EXPECT_EQ(oh.get().via.array.size, 4u);
}

class EventStreamTest : public ::testing::Test {
 protected:
  struct Batch {
    uint64_t seq = 0;
    uint64_t epoch = 0;  // 0: the batch has none
    std::vector<std::string> kinds;
    std::vector<std::string> keys;  // extra field `key`
    std::string leader;             // of a reset
  };

  void SetUp() override {
    PublisherOptions o;
    o.endpoint = "tcp://127.0.0.1:*";
    o.replay_endpoint = "tcp://127.0.0.1:*";
    o.topic = "kv";
    o.await_stream = true;
    pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
    ASSERT_TRUE(pub_->Start().ok());
    replay_.connect(pub_->replay_endpoint());
  }

  // Every buffered batch, through the replay socket (a DEALER framed as a
  // REQ: "", seq 0).
  std::vector<Batch> ReplayAll() {
    replay_.send(zmq::message_t(), zmq::send_flags::sndmore);
    replay_.send(zmq::buffer(std::string(8, '\0')));
    std::vector<Batch> out;
    while (true) {
      std::vector<zmq::message_t> r;
      zmq::pollitem_t item{replay_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) <= 0) {
        ADD_FAILURE() << "no replay answer";
        return out;
      }
      if (!zmq::recv_multipart(replay_, std::back_inserter(r)) ||
          r.size() != 3 || r[2].size() == 0)
        return out;
      Batch b;
      const auto* p = static_cast<const unsigned char*>(r[1].data());
      for (size_t i = 0; i < 8; ++i) b.seq = b.seq << 8 | p[i];
      auto oh =
          msgpack::unpack(static_cast<const char*>(r[2].data()), r[2].size());
      const auto& batch = oh.get().via.array;
      if (batch.size > 4) b.epoch = batch.ptr[4].as<uint64_t>();
      const auto& evs = batch.ptr[1].via.array;
      for (size_t i = 0; i < evs.size; ++i) {
        const auto& ev = evs.ptr[i].via.array;
        const bool cleared = Str(ev.ptr[0]) == "AllBlocksCleared";
        const size_t extras = cleared ? 1 : 7;  // BlockStored's
        b.kinds.push_back(Str(ev.ptr[extras]));
        b.keys.push_back(Str(ev.ptr[extras + 2]));
        if (cleared && ev.size == 10) b.leader = Str(ev.ptr[8]);
      }
      out.push_back(std::move(b));
    }
  }

  // Until the publisher has published `n` batches (events) in all; false
  // after 5 s.
  bool WaitForBatches(uint64_t n) {
    return WaitFor([&] { return pub_->batches_published() >= n; });
  }
  bool WaitForEvents(uint64_t n) {
    return WaitFor([&] { return pub_->events_published() >= n; });
  }
  template <typename F>
  bool WaitFor(F done) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  zmq::context_t ctx_;
  zmq::socket_t replay_{ctx_, zmq::socket_type::dealer};
  std::unique_ptr<KvEventPublisher> pub_;
};

TEST_F(EventStreamTest, NothingBeforeTheStreamThenTheResetFirst) {
  ASSERT_TRUE(pub_->queue()->Push(Stored("early")));
  // The second answer is given by a loop that began after the first one
  // was sent, so after the push: a publisher that did not hold events
  // back would have published "early" by then.
  EXPECT_TRUE(ReplayAll().empty());
  EXPECT_TRUE(ReplayAll().empty());
  EXPECT_EQ(pub_->batches_published(), 0u);

  pub_->OpenStream(42, "10.0.0.2:50051");
  ASSERT_TRUE(pub_->queue()->Push(Stored("late")));
  // The reset, "early", "late" ("late" may share the batch of "early").
  ASSERT_TRUE(WaitForEvents(3));
  const auto batches = ReplayAll();
  ASSERT_GE(batches.size(), 2u);
  EXPECT_EQ(batches[0].seq, 0u);
  EXPECT_EQ(batches[0].kinds, std::vector<std::string>{"reset"});
  EXPECT_EQ(batches[0].leader, "10.0.0.2:50051");
  std::vector<std::string> keys;
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].seq, i);
    EXPECT_EQ(batches[i].epoch, 42u);
    if (i > 0)
      keys.insert(keys.end(), batches[i].keys.begin(), batches[i].keys.end());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"early", "late"}));
}

TEST_F(EventStreamTest, NothingAfterTheStreamCloses) {
  pub_->OpenStream(3, "leader");
  ASSERT_TRUE(pub_->queue()->Push(Stored("while-leading")));
  ASSERT_TRUE(WaitForBatches(2));
  pub_->CloseStream();
  ASSERT_TRUE(pub_->queue()->Push(Stored("after")));
  // As above: the second answer comes from a loop after the push.
  ReplayAll();
  const auto batches = ReplayAll();
  EXPECT_EQ(batches.size(), 2u);
  EXPECT_EQ(pub_->batches_published(), 2u);
  pub_->Stop();  // which publishes what is queued, unless closed
  EXPECT_EQ(pub_->batches_published(), 2u);
}

TEST_F(EventStreamTest, AStreamClosesWhenItsMasterNoLongerServes) {
  std::atomic<bool> serving{true};
  pub_->OpenStream(9, "leader", [&] { return serving.load(); });
  ASSERT_TRUE(pub_->queue()->Push(Stored("while-serving")));
  ASSERT_TRUE(WaitForBatches(2));
  // The lease ran out: the master has not noticed (nobody called
  // CloseStream), but the publisher asks before each drain. (Two answers
  // first: a loop has begun since, and asked.)
  serving.store(false);
  ReplayAll();
  ReplayAll();
  ASSERT_TRUE(pub_->queue()->Push(Stored("after-the-lease")));
  ReplayAll();
  const auto batches = ReplayAll();
  EXPECT_EQ(batches.size(), 2u);
  EXPECT_EQ(pub_->batches_published(), 2u);
  // And it stays closed when the predicate would say yes again.
  serving.store(true);
  ASSERT_TRUE(pub_->queue()->Push(Stored("later")));
  ReplayAll();
  EXPECT_EQ(ReplayAll().size(), 2u);
}

TEST_F(EventStreamTest, AStreamOpensOnceWithAnEpoch) {
  pub_->OpenStream(0, "no epoch");  // refused: 0 means "no stream"
  pub_->OpenStream(5, "first");
  pub_->OpenStream(6, "second");  // ignored: the stream is open
  ASSERT_TRUE(WaitForBatches(1));
  const auto batches = ReplayAll();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].leader, "first");
  EXPECT_EQ(batches[0].epoch, 5u);
}

}  // namespace
}  // namespace kvpool::events
