// KvEventPublisher: publishes the master's tier changes as vLLM-format KV
// events (docs/kv_events.md) on a ZMQ PUB socket, and answers replay
// requests from a bounded buffer on a ZMQ ROUTER socket.
//
// Promises:
//  - Producers only ever touch queue(): Push is a short locked append, and
//    a full queue drops (counted) rather than waits. Nothing a subscriber
//    does -- slow, absent, reconnecting -- can block a producer: PUB drops
//    at its high-water mark, and the sockets are used by the publisher's
//    own thread only.
//  - Batches carry sequence numbers 0, 1, 2, ... in publishing order; when
//    the queue dropped events, one number is skipped before the next batch
//    (and that batch says how many were dropped), so every subscriber sees
//    a jump it cannot fill from the replay buffer: its state is stale.
//  - Events of one key are published in the order they were pushed (the
//    master pushes under the key's shard lock).
//  - With `await_stream` (the master's), nothing is published before
//    OpenStream: then batch 0 is a reset alone, every batch names the
//    stream's epoch, and what was pushed before follows the reset. After
//    CloseStream nothing more is published (docs/kv_events.md, "Failover
//    and restart").
// A router can subscribe to it as any vLLM KV-events consumer would.
#ifndef KVPOOL_EVENTS_KV_EVENT_PUBLISHER_H_
#define KVPOOL_EVENTS_KV_EVENT_PUBLISHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "events/event_queue.h"
#include "events/replay_buffer.h"
#include "kvpool/status.h"

namespace kvpool::events {

// Named as the master's knobs (MasterConfig kv_events_*), which fill it.
struct PublisherOptions {
  std::string endpoint;         // PUB bind address, e.g. tcp://127.0.0.1:5557
  std::string replay_endpoint;  // ROUTER bind address; empty = no replay
  std::string topic;            // first frame of every message
  size_t buffer_steps = 10000;  // batches kept for replay
  int hwm = 100000;             // ZMQ send high-water mark, messages
  size_t max_queue_size = 100000;  // events queued before drops
  // Publish nothing until OpenStream (a master, which opens its stream when
  // it starts serving). Off: publish from Start, batches without an epoch.
  bool await_stream = false;
};

// Most events in one batch: bounds a replay entry and a message.
inline constexpr size_t kMaxBatchEvents = 1024;

class KvEventPublisher {
 public:
  // `metrics` may be null; else it gets the kvpool_master_kv_events_*
  // counters (docs/metrics.md).
  KvEventPublisher(PublisherOptions options, MetricsRegistry* metrics);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Binds the sockets and starts the thread. INVALID_PARAMS for an address
  // ZMQ refuses, RPC_FAIL when it cannot bind.
  Status Start();
  // Publishes what is queued, then closes the sockets. Idempotent.
  void Stop();

  // Starts the stream (once; `epoch` > 0): the next batch, sequence 0, is
  // a reset (AllBlocksCleared, kind "reset") naming `leader` and `epoch`,
  // and every batch from it on carries `epoch`. Queued events wait for it.
  // `serving`, when given, is asked (on the publisher's thread, so it must
  // be thread-safe and cheap) before each drain: once it says false the
  // stream is closed, as by CloseStream -- a leader whose lease has run
  // out publishes nothing more, even before it has noticed.
  void OpenStream(uint64_t epoch, std::string leader,
                  std::function<bool()> serving = nullptr);
  // Ends the stream for good: events queued or pushed after it are
  // dropped unpublished (a master that lost its leadership: what its
  // tables do now is no one's business).
  void CloseStream();

  EventQueue* queue() { return &queue_; }
  // The bound addresses (a `*` port resolved), after Start.
  const std::string& endpoint() const { return bound_endpoint_; }
  const std::string& replay_endpoint() const { return bound_replay_; }

  uint64_t batches_published() const { return batches_.load(); }
  uint64_t events_published() const { return events_.load(); }
  // Sequence numbers skipped to mark dropped events.
  uint64_t gaps_marked() const { return gaps_.load(); }

  // Test only: the next `n` batches are numbered and kept for replay but
  // not sent, as if the network lost them.
  void SkipSendsForTest(int n) { skip_sends_.fetch_add(n); }

 private:
  struct Sockets;
  enum StreamState : int { kAwaiting, kOpen, kClosed };
  void Run();
  // Whether the thread may drain and publish now; publishes the reset
  // first when the stream has just opened.
  bool StreamReady();
  // Waits up to `wait_ms` for a replay request, and answers it.
  void WaitOrServeReplay(int wait_ms);
  // Encodes and sends `events` (at most kMaxBatchEvents) as one batch.
  void Publish(const TierEvent* events, size_t n, uint64_t dropped);
  void ServeReplay();

  const PublisherOptions options_;
  EventQueue queue_;
  ReplayBuffer replay_;
  std::unique_ptr<Sockets> sockets_;
  std::string bound_endpoint_;
  std::string bound_replay_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // kOpen is stored after stream_epoch_ and stream_leader_ are written,
  // which are not written again.
  std::atomic<int> stream_state_;
  uint64_t stream_epoch_ = 0;
  std::string stream_leader_;
  std::function<bool()> serving_;
  bool reset_published_ = false;  // publisher thread only
  uint64_t epoch_ = 0;            // publisher thread only: in every batch
  uint64_t next_seq_ = 0;         // publisher thread only
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> gaps_{0};
  std::atomic<int> skip_sends_{0};
  Counter* published_events_ = nullptr;
  Counter* published_batches_ = nullptr;
  Counter* dropped_events_ = nullptr;
  Counter* replay_requests_ = nullptr;
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_KV_EVENT_PUBLISHER_H_
