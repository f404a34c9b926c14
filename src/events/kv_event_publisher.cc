#include "events/kv_event_publisher.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <chrono>
#include <iterator>
#include <utility>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "events/sequence_frame.h"

#include "events/event_encoder.h"

namespace kvpool::events {
namespace {

// How long the thread waits for a replay request when no event is queued:
// the publishing latency of an event that arrives on an idle master.
constexpr int kIdlePollMs = 5;
// And after a drain that found less than a full batch: events gather for
// this long before the next drain, so under a steady stream the producers'
// lock is taken ~1000 times a second, not once per event, and batches are
// larger. The latency it adds is at most this.
constexpr int kGatherMs = 1;

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  zmq::socket_t replay;  // a ROUTER when replay_endpoint is set
};

KvEventPublisher::KvEventPublisher(PublisherOptions options,
                                   MetricsRegistry* metrics)
    : options_(std::move(options)),
      queue_(options_.max_queue_size),
      replay_(options_.buffer_steps),
      stream_state_(options_.await_stream ? kAwaiting : kOpen) {
  if (metrics != nullptr) {
    published_events_ =
        &metrics->GetCounter("kvpool_master_kv_events_published_total", "",
                             "KV events (wire events) published");
    published_batches_ = &metrics->GetCounter(
        "kvpool_master_kv_events_batches_total", "",
        "KV event batches published (sequence numbers used)");
    dropped_events_ = &metrics->GetCounter(
        "kvpool_master_kv_events_dropped_total", "",
        "tier changes dropped because the event queue was full");
    replay_requests_ = &metrics->GetCounter(
        "kvpool_master_kv_events_replay_requests_total", "",
        "requests answered by the KV events replay socket");
  }
}

KvEventPublisher::~KvEventPublisher() { Stop(); }

Status KvEventPublisher::Start() {
  auto s = std::make_unique<Sockets>();
  try {
    s->pub.set(zmq::sockopt::sndhwm, options_.hwm);
    s->pub.set(zmq::sockopt::linger, 0);
    s->pub.bind(options_.endpoint);
    bound_endpoint_ = s->pub.get(zmq::sockopt::last_endpoint);
    if (!options_.replay_endpoint.empty()) {
      s->replay = zmq::socket_t(s->context, zmq::socket_type::router);
      s->replay.set(zmq::sockopt::sndhwm, options_.hwm);
      s->replay.set(zmq::sockopt::linger, 0);
      s->replay.bind(options_.replay_endpoint);
      bound_replay_ = s->replay.get(zmq::sockopt::last_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return Status(
        e.num() == EINVAL || e.num() == EPROTONOSUPPORT
            ? ErrorCode::INVALID_PARAMS
            : ErrorCode::RPC_FAIL,
        fmt::format("kv events: cannot bind {} / {}: {}", options_.endpoint,
                    options_.replay_endpoint, e.what()));
  }
  sockets_ = std::move(s);
  // The sockets pass to the thread here (its start orders the memory) and
  // are used by no other thread until it is joined.
  thread_ = std::thread([this] { Run(); });
  spdlog::info("kv events: publishing on {} (replay: {}, topic \"{}\")",
               bound_endpoint_, bound_replay_.empty() ? "off" : bound_replay_,
               options_.topic);
  return Status::OK();
}

void KvEventPublisher::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  thread_.join();
  sockets_.reset();
}

void KvEventPublisher::OpenStream(uint64_t epoch, std::string leader,
                                  std::function<bool()> serving) {
  int awaiting = kAwaiting;
  if (epoch == 0 || stream_state_.load() != kAwaiting) return;
  stream_epoch_ = epoch;
  stream_leader_ = std::move(leader);
  serving_ = std::move(serving);
  stream_state_.compare_exchange_strong(awaiting, kOpen);
}

void KvEventPublisher::CloseStream() { stream_state_.store(kClosed); }

bool KvEventPublisher::StreamReady() {
  int state = stream_state_.load();
  if (state == kOpen && serving_ && !serving_()) {
    CloseStream();
    state = kClosed;
    spdlog::info("kv events: stream of epoch {} closed: no longer serving",
                 epoch_);
  }
  if (state == kClosed) {
    // Drained so the queue never fills, and dropped: not published.
    std::vector<TierEvent> discard;
    queue_.Drain(&discard);
    return false;
  }
  // Awaiting: the events stay queued for the stream (a standby has none),
  // and a master stopped before it served publishes nothing.
  if (state == kAwaiting) return false;
  if (options_.await_stream && !reset_published_) {
    reset_published_ = true;
    epoch_ = stream_epoch_;
    TierEvent reset;
    reset.kind = TierEventKind::kReset;
    reset.key = stream_leader_;
    reset.size = stream_epoch_;
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    reset.ts_us = int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
    Publish(&reset, 1, 0);
    spdlog::info("kv events: stream of epoch {} (leader {}) opened", epoch_,
                 stream_leader_);
  }
  return true;
}

void KvEventPublisher::Run() {
  std::vector<TierEvent> events;
  while (true) {
    // Read before draining: after a stop is seen, one more drain publishes
    // everything pushed before Stop.
    const bool stopping = stop_.load();
    if (!StreamReady()) {
      events.clear();
      if (stopping) break;
      WaitOrServeReplay(kIdlePollMs);
      continue;
    }
    const uint64_t dropped = queue_.Drain(&events);
    if (dropped > 0 && dropped_events_) dropped_events_->Inc(dropped);
    if (dropped > 0 && events.empty()) Publish(nullptr, 0, dropped);
    for (size_t i = 0; i < events.size(); i += kMaxBatchEvents) {
      Publish(events.data() + i, std::min(kMaxBatchEvents, events.size() - i),
              i == 0 ? dropped : 0);
    }
    if (stopping) break;
    const int wait_ms = events.empty()                     ? kIdlePollMs
                        : events.size() >= kMaxBatchEvents ? 0
                                                           : kGatherMs;
    WaitOrServeReplay(wait_ms);
  }
}

void KvEventPublisher::WaitOrServeReplay(int wait_ms) {
  try {
    if (sockets_->replay) {
      zmq::pollitem_t item{sockets_->replay.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms)) > 0)
        ServeReplay();
    } else if (wait_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("kv events: replay socket: {}", e.what());
  }
}

void KvEventPublisher::Publish(const TierEvent* events, size_t n,
                               uint64_t dropped) {
  // A number no batch carries: every subscriber sees the loss as a gap,
  // and the replay buffer cannot fill it.
  if (dropped > 0) {
    ++next_seq_;
    gaps_.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t seq = next_seq_++;
  auto payload = std::make_shared<std::string>();
  const size_t wire_events =
      EncodeBatch(std::span<const TierEvent>(events, n), NowSeconds(), dropped,
                  payload.get(), epoch_);
  if (skip_sends_.load(std::memory_order_relaxed) > 0) {
    skip_sends_.fetch_sub(1);
  } else {
    try {
      // PUB never blocks: at the high-water mark of a subscriber the
      // message is dropped for that subscriber (it sees a gap).
      auto& pub = sockets_->pub;
      pub.send(zmq::buffer(options_.topic),
               zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      pub.send(zmq::buffer(EncodeSequence(seq)),
               zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      pub.send(zmq::buffer(*payload), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::warn("kv events: publish of batch {}: {}", seq, e.what());
    }
  }
  replay_.Add(seq, std::move(payload));
  batches_.fetch_add(1, std::memory_order_relaxed);
  events_.fetch_add(wire_events, std::memory_order_relaxed);
  if (published_batches_) published_batches_->Inc();
  if (published_events_) published_events_->Inc(wire_events);
}

void KvEventPublisher::ServeReplay() {
  auto& sock = sockets_->replay;
  std::vector<zmq::message_t> req;
  while (zmq::recv_multipart(sock, std::back_inserter(req),
                             zmq::recv_flags::dontwait)) {
    // [identity, "" (a REQ's or a framing DEALER's delimiter), seq(8, BE)];
    // the answer repeats the envelope, then one [seq, payload] per buffered
    // batch from seq on, then the end marker [seq = -1, ""].
    if (req.size() >= 2 && req.back().size() == 8) {
      if (replay_requests_) replay_requests_->Inc();
      const bool delimited = req.size() >= 3 && req[1].size() == 0;
      auto send = [&](const std::string& seq, std::string_view payload) {
        sock.send(zmq::buffer(req[0].data(), req[0].size()),
                  zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        if (delimited)
          sock.send(zmq::message_t(),
                    zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        sock.send(zmq::buffer(seq),
                  zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        sock.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      };
      for (const auto& e : replay_.From(DecodeSequence(req.back())))
        send(EncodeSequence(e.seq), *e.payload);
      send(EncodeSequence(kReplayEndMarker), "");
    }
    req.clear();
  }
}

}  // namespace kvpool::events
