// KvEventSubscriber: follows a kvpool master's KV events (docs/kv_events.md)
// into a TierMap, on its own thread, with the replay socket's protocol for
// what the live stream missed.
//
// Promises:
//  - Batches are applied to the map in sequence order, each once: the
//    live stream's (ZMQ SUB) and the replay socket's answers are merged by
//    sequence number.
//  - At start it asks the replay socket for everything from 0: when the
//    answer starts at 0 the map follows the stream from its start
//    (TierMap::ResetToStreamStart); otherwise what came before is unknown.
//  - A jump in the live numbers is a gap: it asks the replay socket "from
//    N" and applies the answer when it holds every missing number; when it
//    does not (the buffer moved on, a number skipped for dropped events, no
//    replay socket, no answer in `replay_timeout_ms`), the gap cannot be
//    filled and the map is marked stale (TierMap::MarkAllStale): its users
//    resync by lookup. Another epoch (docs/kv_events.md, "Failover and
//    restart"), or without epochs a number that goes down, is a new
//    stream: stale too,
//    then followed as at start (its stream from 0, by replay, resets the
//    map to what the new master holds).
//  - Never blocks the publisher: a slow subscriber only sees gaps.
// What it cannot see: a loss with no later batch to reveal it (the stream
// goes quiet). Thread-safe: stats() and WaitForSeq() from any thread.
#ifndef KVPOOL_EVENTS_KV_EVENT_SUBSCRIBER_H_
#define KVPOOL_EVENTS_KV_EVENT_SUBSCRIBER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "events/tier_map.h"
#include "kvpool/status.h"

namespace kvpool::events {

struct SubscriberOptions {
  std::string endpoint;          // the master's PUB socket, tcp://host:port
  std::string replay_endpoint;   // its replay (ROUTER) socket; empty: none
  std::string topic;             // subscription prefix
  int replay_timeout_ms = 2000;  // wait for a replay answer's next message
};

struct SubscriberStats {
  uint64_t batches = 0;        // applied, live or replayed
  uint64_t events = 0;         // wire events in them
  uint64_t gaps = 0;           // jumps in the live numbers
  uint64_t replays = 0;        // gaps (and the start) filled from replay
  uint64_t resyncs = 0;        // unfillable: the map was marked stale
  uint64_t restarts = 0;       // the numbers went down: a new master
  uint64_t decode_errors = 0;  // payloads that did not decode (stale too)
  uint64_t next_seq = 0;       // the number expected next
  bool following = false;      // a position in the stream is known
};

class KvEventSubscriber {
 public:
  // `map` must outlive the subscriber.
  KvEventSubscriber(SubscriberOptions options, TierMap* map);
  ~KvEventSubscriber();
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Checks the endpoints and starts the thread (which connects; ZMQ
  // reconnects by itself). INVALID_PARAMS for an endpoint ZMQ refuses.
  Status Start();
  void Stop();  // idempotent

  SubscriberStats stats() const;
  // Until every batch numbered below `seq` has been applied (or marked
  // lost): false after `timeout`.
  bool WaitForSeq(uint64_t seq, std::chrono::milliseconds timeout) const;
  // Until `done(stats())` holds, checked after each batch: false after
  // `timeout`.
  bool WaitUntil(const std::function<bool(const SubscriberStats&)>& done,
                 std::chrono::milliseconds timeout) const;

 private:
  struct Sockets;
  using Batch = std::pair<uint64_t, std::string>;  // seq, payload
  void Run();
  // Handles one live message.
  void OnLive(uint64_t seq, const std::string& payload);
  // Asks the replay socket for [from, to) (to = 0: everything from `from`)
  // and returns what it sent, in order; false when no end marker came.
  bool RequestReplay(uint64_t from, uint64_t to, std::vector<Batch>* out);
  // Applies [from, to) from the replay socket (to = 0: the catch-up at
  // start); marks the map stale when a number of it is missing.
  void Fill(uint64_t from, uint64_t to);
  void ApplyPayload(uint64_t seq, const std::string& payload);
  void MarkStale(bool resync);
  void Advance(uint64_t next);

  const SubscriberOptions options_;
  TierMap* const map_;
  std::unique_ptr<Sockets> sockets_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // The thread's own position (stats() has a copy for other threads).
  bool following_ = false;       // thread only
  uint64_t next_ = 0;            // thread only
  bool have_epoch_ = false;      // thread only: the stream followed
  uint64_t epoch_ = 0;           // thread only
  bool have_last_live_ = false;  // thread only
  uint64_t last_live_ = 0;       // thread only
  mutable Mutex mu_;
  mutable CondVar advanced_;
  SubscriberStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_KV_EVENT_SUBSCRIBER_H_
