// What KV events (docs/kv_events.md) cost the master, and what the publisher
// sustains, in one run:
//
// BM_MasterPut/events:{0,1,2}: PutStart + PutEnd of a fresh 4 KiB key on a
//   MasterService (no gRPC), events off (0), or on with a KvEventPublisher
//   on tcp://127.0.0.1 and a subscriber draining it (1: a router's load) or
//   none (2).
// BM_MasterPutCounted/events:{0,1}: the same, exactly 20000 puts (for
//   callgrind).
// BM_MasterPutServed/events:{0,1}: the master as clients see it: a
//   MasterServer on loopback (gRPC), one client putting batches of 16 keys
//   (BatchPutStart + BatchPutEnd, as the client library's batch put does),
//   events off or on with a subscriber draining; keys per second of wall
//   time.
// BM_MasterLookup/events:{0,1}: QueryReadOnlyBatch of 128 keys (the
//   router's batched tier lookup) on 100k keys, same two settings.
// BM_Publisher/subscriber:{0,1}: tier changes pushed into the queue and
//   published (encoded, sent) per second, with no subscriber or one
//   draining the socket.
//
// Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving
// so off and on alternate on a noisy machine; docs/kv_events.md has numbers.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "events/kv_event_publisher.h"
#include "master/master_server.h"
#include "master/master_service.h"
#include "rpc/master_client.h"

namespace kvpool {
namespace {

constexpr int kLookupBatch = 128;
constexpr uint64_t kLookupKeys = 100000;

// A SUB socket on its own thread that takes and drops every message.
class DrainingSubscriber {
 public:
  explicit DrainingSubscriber(const std::string& endpoint) {
    sub_.set(zmq::sockopt::subscribe, "");
    sub_.set(zmq::sockopt::rcvhwm, 0);
    sub_.connect(endpoint);
    thread_ = std::thread([this] {
      zmq::pollitem_t item{sub_.handle(), 0, ZMQ_POLLIN, 0};
      std::vector<zmq::message_t> msg;
      while (!stop_.load()) {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(10)) <= 0) continue;
        while (zmq::recv_multipart(sub_, std::back_inserter(msg),
                                   zmq::recv_flags::dontwait)) {
          received_.fetch_add(1, std::memory_order_relaxed);
          msg.clear();
        }
      }
    });
  }
  ~DrainingSubscriber() {
    stop_ = true;
    thread_.join();
  }
  uint64_t received() const { return received_.load(); }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sub_{ctx_, zmq::socket_type::sub};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> received_{0};
  std::thread thread_;
};

// Pushes probes until the subscriber has one: the subscription is on.
void Join(events::KvEventPublisher& pub, const DrainingSubscriber& sub) {
  for (int i = 0; i < 1000 && sub.received() == 0; ++i) {
    events::TierEvent ev;
    ev.key = "probe";
    pub.queue()->Push(std::move(ev));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One large segment on a node that never heartbeats: virtual, the master
// never touches its bytes.
void MountVirtualSegment(MasterService& svc) {
  SegmentInfo seg;
  seg.node_id = "bench-node";
  seg.capacity = 64ull << 40;
  seg.data_endpoint = "127.0.0.1:1";
  if (!svc.MountSegment(seg).ok()) std::abort();
}

// A master with one large virtual segment, with or without events.
struct Master {
  // events: 0 = off; 1 = on, with a subscriber draining; 2 = on, with none.
  explicit Master(int64_t events) {
    MasterConfig mc;
    mc.client_ttl = 1 << 20;  // the fake segment never heartbeats
    svc = std::make_unique<MasterService>(mc);
    if (events) {
      events::PublisherOptions o;
      o.endpoint = "tcp://127.0.0.1:*";
      o.replay_endpoint = "tcp://127.0.0.1:*";
      o.topic = "kv-events";
      pub = std::make_unique<events::KvEventPublisher>(o, &svc->metrics());
      if (!pub->Start().ok()) std::abort();
      if (events == 1) {
        sub = std::make_unique<DrainingSubscriber>(pub->endpoint());
        Join(*pub, *sub);
      }
      svc->set_event_queue(pub->queue());
    }
    MountVirtualSegment(*svc);
  }
  ~Master() {
    // The publisher's counters live in the service's registry: it stops
    // first (the service is idle by now; pub's queue outlives it).
    if (pub) pub->Stop();
    svc.reset();
  }
  void Put(const std::string& key) {
    if (!svc->PutStart("", key, 4096, {}).ok() || !svc->PutEnd("", key).ok())
      std::abort();
  }

  std::unique_ptr<events::KvEventPublisher> pub;
  std::unique_ptr<DrainingSubscriber> sub;
  std::unique_ptr<MasterService> svc;
};

void BM_MasterPut(benchmark::State& state) {
  Master m(state.range(0));
  uint64_t i = 0;
  for (auto _ : state) m.Put(fmt::format("put-{:010d}", i++));
  state.SetItemsProcessed(static_cast<int64_t>(i));
  if (m.pub) {
    state.counters["dropped"] =
        static_cast<double>(m.pub->queue()->dropped_total());
  }
}
BENCHMARK(BM_MasterPut)
    ->ArgName("events")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->MinTime(1.0);
// The same puts, a fixed 20000 of them: for instruction counts under
// callgrind (docs/kv_events.md, "Cost"), where the table's growth must be
// the same with events on and off.
BENCHMARK(BM_MasterPut)
    ->Name("BM_MasterPutCounted")
    ->ArgName("events")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(20000);

// A MasterServer on loopback with one large virtual segment, with or
// without events (on: a subscriber draining), and a gRPC client.
struct ServedMaster {
  explicit ServedMaster(int64_t events) {
    MasterConfig mc;
    mc.rpc_port = 0;
    mc.metrics_port = -1;
    mc.client_ttl = 1 << 20;  // the fake segment never heartbeats
    if (events) mc.kv_events_endpoint = "tcp://127.0.0.1:*";
    server = std::make_unique<MasterServer>(mc);
    if (!server->Start().ok()) std::abort();
    if (auto* pub = server->events_publisher()) {
      sub = std::make_unique<DrainingSubscriber>(pub->endpoint());
      Join(*pub, *sub);
    }
    MountVirtualSegment(server->service());
    client = std::make_unique<MasterClient>(server->address(), 10000);
  }
  ~ServedMaster() {
    client.reset();
    server->Stop();
  }
  void PutBatch(uint64_t first, int n) {
    rpc::BatchPutStartRequest start;
    rpc::BatchKeyRequest end;
    for (int i = 0; i < n; ++i) {
      std::string key = fmt::format("put-{:010d}", first + i);
      auto* item = start.add_items();
      item->set_key(key);
      item->set_size(4096);
      end.add_keys(std::move(key));
    }
    rpc::BatchPutStartResponse started;
    rpc::BatchKeyStatus ended;
    if (!client->Call(&rpc::MasterService::Stub::BatchPutStart, start, &started)
             .ok() ||
        !client->Call(&rpc::MasterService::Stub::BatchPutEnd, end, &ended)
             .ok()) {
      std::abort();
    }
    for (const auto& item : started.items())
      if (item.error_code() != 0) std::abort();
    for (int code : ended.error_codes())
      if (code != 0) std::abort();
  }

  std::unique_ptr<MasterServer> server;
  std::unique_ptr<DrainingSubscriber> sub;
  std::unique_ptr<MasterClient> client;
};

void BM_MasterPutServed(benchmark::State& state) {
  constexpr int kBatch = 16;
  ServedMaster m(state.range(0));
  uint64_t i = 0;
  for (auto _ : state) {
    m.PutBatch(i, kBatch);
    i += kBatch;
  }
  state.SetItemsProcessed(static_cast<int64_t>(i));
}
BENCHMARK(BM_MasterPutServed)
    ->ArgName("events")
    ->Arg(0)
    ->Arg(1)
    ->MinTime(1.0)
    ->UseRealTime();

void BM_MasterLookup(benchmark::State& state) {
  Master m(state.range(0));
  for (uint64_t i = 0; i < kLookupKeys; ++i)
    m.Put(fmt::format("key-{:08d}", i));
  std::mt19937_64 rng(7);
  std::vector<std::vector<std::string>> batches(256);
  for (auto& b : batches) {
    for (int j = 0; j < kLookupBatch; ++j)
      b.push_back(fmt::format("key-{:08d}", rng() % kLookupKeys));
  }
  BatchQueryResult out;
  size_t b = 0;
  for (auto _ : state) {
    out.items.clear();
    out.replicas.clear();
    m.svc->QueryReadOnlyBatch("", batches[b++ % batches.size()], &out);
    benchmark::DoNotOptimize(out.items.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(b) * kLookupBatch);
}
BENCHMARK(BM_MasterLookup)->ArgName("events")->Arg(0)->Arg(1)->MinTime(1.0);

void BM_Publisher(benchmark::State& state) {
  constexpr size_t kEvents = 200000;
  events::PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.max_queue_size = kEvents + 1000;
  events::KvEventPublisher pub(o, nullptr);
  if (!pub.Start().ok()) std::abort();
  std::unique_ptr<DrainingSubscriber> sub;
  if (state.range(0) != 0) {
    sub = std::make_unique<DrainingSubscriber>(pub.endpoint());
    Join(pub, *sub);
  }
  // Typical records: a 24-byte key of the default tenant, DRAM.
  std::vector<events::TierEvent> proto(kEvents);
  for (size_t i = 0; i < kEvents; ++i) {
    proto[i].kind = events::TierEventKind::kStored;
    proto[i].media = events::kMediumDram;
    proto[i].size = 4096;
    proto[i].tenant = "default";
    proto[i].key = fmt::format("tenant-block-{:012d}", i);
  }
  uint64_t published = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<events::TierEvent> batch = proto;
    const uint64_t target = pub.events_published() + kEvents;
    state.ResumeTiming();
    for (auto& ev : batch) pub.queue()->Push(std::move(ev));
    while (pub.events_published() < target) std::this_thread::yield();
    published += kEvents;
  }
  state.SetItemsProcessed(static_cast<int64_t>(published));
  state.counters["dropped"] = static_cast<double>(pub.queue()->dropped_total());
}
BENCHMARK(BM_Publisher)
    ->ArgName("subscriber")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kvpool

BENCHMARK_MAIN();
