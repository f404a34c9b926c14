// A MasterServer's KV events stream (docs/kv_events.md, "Failover and
// restart"): a master without HA opens it at Start with a reset naming its
// address; under HA nothing is published while a standby, the stream opens
// when HaMaster says it leads, and it ends the moment the gate stops
// serving that epoch (the lease ran out), before anyone closes it. The
// events are read through the replay socket, which answers with every
// batch published, so no subscription has to take effect first; the
// master's changes are remove_all calls, which publish an AllBlocksCleared
// even with no object and no node.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <msgpack.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "master/master_server.h"

namespace kvpool {
namespace {

class TestGate : public ServingGate {
 public:
  uint64_t ServingEpoch() const override { return epoch.load(); }
  std::string NotServingReason() const override { return "standby; test"; }
  void SupersededBy(uint64_t) override { epoch = 0; }
  std::atomic<uint64_t> epoch{0};
};

MasterConfig EventsConfig() {
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  mc.kv_events_endpoint = "tcp://127.0.0.1:*";
  mc.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
  return mc;
}

// One published batch: its epoch and, per event, kind (kvpool's first
// field) and, for a reset, the leader.
struct Batch {
  uint64_t epoch = 0;
  std::vector<std::string> kinds;
  std::string leader;
};

class ReplayReader {
 public:
  explicit ReplayReader(const std::string& endpoint) {
    dealer_.connect(endpoint);
  }
  // Every batch the master has published, oldest first.
  std::vector<Batch> All() {
    dealer_.send(zmq::message_t(), zmq::send_flags::sndmore);
    dealer_.send(zmq::buffer(std::string(8, '\0')));
    std::vector<Batch> out;
    while (true) {
      std::vector<zmq::message_t> r;
      zmq::pollitem_t item{dealer_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) <= 0) {
        ADD_FAILURE() << "no replay answer";
        return out;
      }
      if (!zmq::recv_multipart(dealer_, std::back_inserter(r)) ||
          r.size() != 3 || r[2].size() == 0)
        return out;
      auto oh =
          msgpack::unpack(static_cast<const char*>(r[2].data()), r[2].size());
      const auto& batch = oh.get().via.array;
      Batch b;
      if (batch.size > 4) b.epoch = batch.ptr[4].as<uint64_t>();
      const auto& evs = batch.ptr[1].via.array;
      for (size_t i = 0; i < evs.size; ++i) {
        const auto& ev = evs.ptr[i].via.array;
        // Every event here is an AllBlocksCleared: kvpool's fields at 1.
        b.kinds.push_back(ev.ptr[1].as<std::string>());
        if (ev.size == 10) b.leader = ev.ptr[8].as<std::string>();
      }
      out.push_back(std::move(b));
    }
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t dealer_{ctx_, zmq::socket_type::dealer};
};

bool WaitForEvents(MasterServer& server, uint64_t n) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server.events_publisher()->events_published() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(MasterEventStreamTest, AMasterWithoutHaStartsItsStreamWithAReset) {
  MasterServer server(EventsConfig());
  ASSERT_TRUE(server.Start().ok());
  const uint64_t start_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  ASSERT_TRUE(server.service().RemoveAll("default", true).ok());
  ASSERT_TRUE(WaitForEvents(server, 2));
  ReplayReader replay(server.events_publisher()->replay_endpoint());
  const auto batches = replay.All();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].kinds, std::vector<std::string>{"reset"});
  EXPECT_EQ(batches[0].leader, server.address());
  // Its epoch is when it started: within the test's own clock reading.
  EXPECT_GT(batches[0].epoch, start_us - 60'000'000);
  EXPECT_LE(batches[0].epoch, start_us);
  EXPECT_EQ(batches[1].kinds, std::vector<std::string>{"cleared"});
  EXPECT_EQ(batches[1].epoch, batches[0].epoch);
}

TEST(MasterEventStreamTest, AStandbyPublishesNothingALeaderUntilItsLeaseEnds) {
  MasterServer server(EventsConfig());
  auto gate = std::make_shared<TestGate>();
  server.set_gate(gate);
  ASSERT_TRUE(server.Start().ok());
  ReplayReader replay(server.events_publisher()->replay_endpoint());

  // A standby: a change of its tables is not published. (The second
  // replay answer comes from a publisher loop that began after the first
  // was sent, so after the change.)
  ASSERT_TRUE(server.service().RemoveAll("default", true).ok());
  replay.All();
  EXPECT_TRUE(replay.All().empty());

  // It leads: the reset first, then what it changed meanwhile.
  gate->epoch = 7;
  server.OpenEventStream(7, "127.0.0.1:50051");
  ASSERT_TRUE(WaitForEvents(server, 2));
  auto batches = replay.All();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].kinds, std::vector<std::string>{"reset"});
  EXPECT_EQ(batches[0].leader, "127.0.0.1:50051");
  EXPECT_EQ(batches[0].epoch, 7u);
  EXPECT_EQ(batches[1].kinds, std::vector<std::string>{"cleared"});

  // Its lease runs out: nothing more, though nobody closed the stream.
  // (Two answers first: a publisher loop has begun since, and asked the
  // gate; a change made between a loop's question and its drain would
  // still go out, the window docs/kv_events.md names.)
  gate->epoch = 0;
  replay.All();
  replay.All();
  ASSERT_TRUE(server.service().RemoveAll("default", true).ok());
  replay.All();
  EXPECT_EQ(replay.All().size(), 2u);
  EXPECT_EQ(server.events_publisher()->events_published(), 2u);
}

}  // namespace
}  // namespace kvpool
