#include "events/kv_event_publisher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <msgpack.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace kvpool::events {
namespace {

uint64_t Seq(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < m.size(); ++i) v = v << 8 | p[i];
  return v;
}

TierEvent Stored(std::string key) {
  TierEvent ev;
  ev.kind = TierEventKind::kStored;
  ev.media = kMediumDram;
  ev.tenant = "default";
  ev.key = std::move(key);
  return ev;
}

// The keys of a batch's events (extra field 9 of BlockStored).
std::vector<std::string> Keys(const zmq::message_t& payload) {
  auto oh =
      msgpack::unpack(static_cast<const char*>(payload.data()), payload.size());
  std::vector<std::string> keys;
  const auto& evs = oh.get().via.array.ptr[1].via.array;
  for (size_t i = 0; i < evs.size; ++i) {
    const auto& k = evs.ptr[i].via.array.ptr[9].via.bin;
    keys.emplace_back(k.ptr, k.size);
  }
  return keys;
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PublisherOptions o;
    o.endpoint = "tcp://127.0.0.1:*";
    o.replay_endpoint = "tcp://127.0.0.1:*";
    o.topic = "kv";
    o.buffer_steps = 100;
    o.hwm = 10;
    o.max_queue_size = 1 << 20;
    pub_ = std::make_unique<KvEventPublisher>(o, nullptr);
    ASSERT_TRUE(pub_->Start().ok());
    sub_.set(zmq::sockopt::subscribe, "kv");
    sub_.connect(pub_->endpoint());
    replay_.connect(pub_->replay_endpoint());
  }

  // Receives one message: [topic, seq, payload]; false after 5 s.
  bool Receive(std::vector<zmq::message_t>* msg, int timeout_ms = 5000) {
    msg->clear();
    zmq::pollitem_t item{sub_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0)
      return false;
    if (!zmq::recv_multipart(sub_, std::back_inserter(*msg))) return false;
    return msg->size() == 3;
  }

  // A PUB subscription takes effect some time after connect: pushes probes
  // until one arrives; returns the seq of the batch that carried it.
  uint64_t Join() {
    std::vector<zmq::message_t> msg;
    for (int i = 0; i < 500; ++i) {
      pub_->queue()->Push(Stored("probe"));
      if (Receive(&msg, 20)) {
        // Take what the probes before it left in flight.
        uint64_t seq = Seq(msg[1]);
        while (Receive(&msg, 50)) seq = Seq(msg[1]);
        return seq;
      }
    }
    ADD_FAILURE() << "no subscription after 500 probes";
    return 0;
  }

  zmq::context_t ctx_;
  zmq::socket_t sub_{ctx_, zmq::socket_type::sub};
  zmq::socket_t replay_{ctx_, zmq::socket_type::dealer};
  std::unique_ptr<KvEventPublisher> pub_;
};

TEST_F(PublisherTest, MultipartTopicSeqPayloadInOrder) {
  const uint64_t last = Join();
  pub_->queue()->Push(Stored("a"));
  std::vector<zmq::message_t> msg;
  ASSERT_TRUE(Receive(&msg));
  EXPECT_EQ(msg[0].to_string(), "kv");
  ASSERT_EQ(msg[1].size(), 8u);
  EXPECT_EQ(Seq(msg[1]), last + 1);
  EXPECT_EQ(Keys(msg[2]), std::vector<std::string>{"a"});
}

TEST_F(PublisherTest, ALostBatchIsAGapTheReplaySocketFills) {
  const uint64_t last = Join();
  pub_->SkipSendsForTest(1);
  pub_->queue()->Push(Stored("lost"));
  // Pushed after "lost" was published: the skip is used up by then.
  while (pub_->batches_published() < last + 2) std::this_thread::yield();
  pub_->queue()->Push(Stored("next"));
  std::vector<zmq::message_t> msg;
  ASSERT_TRUE(Receive(&msg));
  EXPECT_EQ(Seq(msg[1]), last + 2);  // last + 1 never arrived
  EXPECT_EQ(Keys(msg[2]), std::vector<std::string>{"next"});
  // The replay request, framed as a REQ socket frames it.
  zmq::message_t empty;
  replay_.send(empty, zmq::send_flags::sndmore);
  std::string from(8, '\0');
  from[7] = static_cast<char>(last + 1);
  ASSERT_LT(last + 1, 256u);
  replay_.send(zmq::buffer(from));
  std::vector<std::vector<std::string>> got;
  while (true) {
    std::vector<zmq::message_t> r;
    zmq::pollitem_t item{replay_.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_GT(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 0);
    ASSERT_TRUE(zmq::recv_multipart(replay_, std::back_inserter(r)));
    ASSERT_EQ(r.size(), 3u);  // "", seq, payload
    EXPECT_EQ(r[0].size(), 0u);
    if (r[2].size() == 0) {
      EXPECT_EQ(Seq(r[1]), ~uint64_t{0});  // the end marker: seq -1
      break;
    }
    got.push_back(Keys(r[2]));
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::vector<std::string>{"lost"});
  EXPECT_EQ(got[1], std::vector<std::string>{"next"});
}

TEST_F(PublisherTest, ASubscriberThatNeverReadsDoesNotStallPublishing) {
  const uint64_t last = Join();
  // sub_ reads nothing from here on: past the high-water mark and the
  // socket buffers, PUB must drop for it rather than wait.
  const uint64_t before = pub_->events_published();
  constexpr int kEvents = 200000;
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_TRUE(pub_->queue()->Push(Stored(std::string(200, 'k'))));
    if (i % 50000 == 0) std::this_thread::yield();
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pub_->events_published() < before + kEvents &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pub_->events_published(), before + kEvents);
  EXPECT_GT(pub_->batches_published(), last + 100);  // ~40 MB sent or dropped
}

TEST(PublisherDropsTest, DroppedEventsSkipASequenceNumber) {
  PublisherOptions o;
  o.endpoint = "inproc://drops";
  o.max_queue_size = 1;
  KvEventPublisher pub(o, nullptr);
  ASSERT_TRUE(pub.Start().ok());
  // Faster than the thread drains a one-event queue: some are dropped.
  uint64_t accepted = 0;
  for (int i = 0; i < 100000 && pub.queue()->dropped_total() == 0; ++i)
    accepted += pub.queue()->Push(Stored("k"));
  ASSERT_GT(pub.queue()->dropped_total(), 0u);
  pub.Stop();  // publishes what is queued
  EXPECT_EQ(pub.events_published(), accepted);
  // Each drain that reported drops skipped a number; every event pushed
  // was either published or counted as dropped.
  EXPECT_GE(pub.gaps_marked(), 1u);
  EXPECT_LE(pub.gaps_marked(), pub.queue()->dropped_total());
  EXPECT_GE(pub.batches_published(), pub.gaps_marked());
}

TEST(PublisherStartTest, ABadEndpointIsRefused) {
  PublisherOptions o;
  o.endpoint = "nonsense://x";
  KvEventPublisher pub(o, nullptr);
  EXPECT_FALSE(pub.Start().ok());
}

}  // namespace
}  // namespace kvpool::events
