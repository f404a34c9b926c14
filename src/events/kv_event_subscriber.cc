#include "events/kv_event_subscriber.h"

#include <spdlog/spdlog.h>

#include <iterator>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "events/sequence_frame.h"

namespace kvpool::events {
namespace {

// How often the thread looks at its stop flag while the stream is quiet.
constexpr int kPollMs = 50;
// Messages the SUB socket queues while the thread is replaying or applying.
constexpr int kReceiveHwm = 100000;

}  // namespace

struct KvEventSubscriber::Sockets {
  zmq::context_t context{1};
  zmq::socket_t sub{context, zmq::socket_type::sub};
  zmq::socket_t replay;  // a DEALER when replay_endpoint is set

  void ConnectReplay(const std::string& endpoint) {
    replay = zmq::socket_t(context, zmq::socket_type::dealer);
    replay.set(zmq::sockopt::rcvhwm, 0);  // a whole replay answer
    replay.set(zmq::sockopt::linger, 0);
    replay.connect(endpoint);
  }
};

KvEventSubscriber::KvEventSubscriber(SubscriberOptions options, TierMap* map)
    : options_(std::move(options)), map_(map) {}

KvEventSubscriber::~KvEventSubscriber() { Stop(); }

Status KvEventSubscriber::Start() {
  auto s = std::make_unique<Sockets>();
  try {
    s->sub.set(zmq::sockopt::rcvhwm, kReceiveHwm);
    s->sub.set(zmq::sockopt::linger, 0);
    s->sub.set(zmq::sockopt::subscribe, options_.topic);
    s->sub.connect(options_.endpoint);
    if (!options_.replay_endpoint.empty())
      s->ConnectReplay(options_.replay_endpoint);
  } catch (const zmq::error_t& e) {
    return Status(
        ErrorCode::INVALID_PARAMS,
        fmt::format("kv events: cannot connect to {} / {}: {}",
                    options_.endpoint, options_.replay_endpoint, e.what()));
  }
  sockets_ = std::move(s);
  // The sockets pass to the thread here and no other thread uses them.
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void KvEventSubscriber::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  thread_.join();
  sockets_.reset();
}

void KvEventSubscriber::Run() {
  // Catch up: everything the master still buffers, from its first batch.
  if (sockets_->replay) Fill(0, 0);
  std::vector<zmq::message_t> msg;
  while (!stop_.load()) {
    try {
      zmq::pollitem_t item{sockets_->sub.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) <= 0)
        continue;
      msg.clear();
      if (!zmq::recv_multipart(sockets_->sub, std::back_inserter(msg),
                               zmq::recv_flags::dontwait))
        continue;
    } catch (const zmq::error_t& e) {
      spdlog::warn("kv events: subscriber: {}", e.what());
      continue;
    }
    // [topic, seq (8 bytes, big-endian), payload]
    if (msg.size() != 3 || msg[1].size() != 8) {
      MarkStale(true);
      MutexLock lock(&mu_);
      ++stats_.decode_errors;
      continue;
    }
    OnLive(DecodeSequence(msg[1]), msg[2].to_string());
  }
}

void KvEventSubscriber::OnLive(uint64_t seq, const std::string& payload) {
  // A new stream (a master restarted or took over) is told by its epoch
  // (docs/kv_events.md, "Failover and restart"); from a publisher that
  // sends none, by live numbers going down. Its batches describe a store
  // the map knows nothing of yet.
  uint64_t epoch = 0;
  if (auto b = DecodeBatch(payload); b.ok()) epoch = b->epoch;
  const bool new_epoch = have_epoch_ && epoch != epoch_;
  if (new_epoch || (epoch == 0 && have_last_live_ && seq <= last_live_)) {
    MarkStale(false);
    following_ = false;
    MutexLock lock(&mu_);
    ++stats_.restarts;
    stats_.following = false;
  }
  have_last_live_ = true;
  last_live_ = seq;
  have_epoch_ = true;
  epoch_ = epoch;
  if (!following_) {
    if (seq > 0) {
      Fill(0, seq);
    } else {
      map_->ResetToStreamStart();
    }
  } else if (seq < next_) {
    return;  // already applied from a replay answer
  } else if (seq > next_) {
    {
      MutexLock lock(&mu_);
      ++stats_.gaps;
    }
    Fill(next_, seq);
  }
  ApplyPayload(seq, payload);
}

bool KvEventSubscriber::RequestReplay(uint64_t from, uint64_t to,
                                      std::vector<Batch>* out) {
  auto& sock = sockets_->replay;
  try {
    sock.send(zmq::message_t(), zmq::send_flags::sndmore);
    sock.send(zmq::buffer(EncodeSequence(from)), zmq::send_flags::none);
    std::vector<zmq::message_t> reply;
    while (!stop_.load()) {
      zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1,
                    std::chrono::milliseconds(options_.replay_timeout_ms)) <= 0)
        break;
      reply.clear();
      if (!zmq::recv_multipart(sock, std::back_inserter(reply))) break;
      // ["", seq, payload]: a DEALER with the delimiter frame.
      if (reply.size() != 3 || reply[1].size() != 8) continue;
      const uint64_t seq = DecodeSequence(reply[1]);
      if (seq == kReplayEndMarker) return true;
      if (to == 0 || seq < to) out->emplace_back(seq, reply[2].to_string());
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("kv events: replay request from {}: {}", from, e.what());
  }
  // No end marker: a late answer must not be read as the next one's.
  sockets_->ConnectReplay(options_.replay_endpoint);
  return false;
}

void KvEventSubscriber::Fill(uint64_t from, uint64_t to) {
  std::vector<Batch> got;
  const bool answered =
      sockets_->replay && RequestReplay(from, to, &got) && !got.empty();
  // Filled: every number of [from, to) came, in order; at the start (to =
  // 0) whatever came from `from` on.
  bool filled = answered && got.front().first == from &&
                (to == 0 || got.back().first + 1 == to);
  for (size_t i = 1; filled && i < got.size(); ++i)
    filled = got[i].first == got[i - 1].first + 1;
  if (to == 0 && got.empty()) return;  // nothing published yet
  if (filled) {
    if (from == 0) map_->ResetToStreamStart();
    MutexLock lock(&mu_);
    ++stats_.replays;
  } else {
    MarkStale(true);
  }
  // Applied even when the gap stays open: they keep the (stale) entries
  // closer to the truth, and the numbers move on past the gap.
  for (const auto& [seq, payload] : got) {
    if (!following_ || seq >= next_) ApplyPayload(seq, payload);
  }
  if (to > 0) Advance(to);
}

void KvEventSubscriber::ApplyPayload(uint64_t seq, const std::string& payload) {
  auto batch = DecodeBatch(payload);
  if (!batch.ok()) {
    spdlog::warn("kv events: batch {}: {}", seq, batch.status().ToString());
    MarkStale(true);
    {
      MutexLock lock(&mu_);
      ++stats_.decode_errors;
    }
    Advance(seq + 1);
    return;
  }
  // The stream followed: the first batch applied, live or replayed, names
  // it (the catch-up at start may apply batches before any live one).
  if (!have_epoch_) {
    have_epoch_ = true;
    epoch_ = batch->epoch;
  }
  map_->Apply(batch->events);
  {
    MutexLock lock(&mu_);
    ++stats_.batches;
    stats_.events += batch->events.size();
  }
  Advance(seq + 1);
}

void KvEventSubscriber::MarkStale(bool resync) {
  map_->MarkAllStale();
  if (!resync) return;
  MutexLock lock(&mu_);
  ++stats_.resyncs;
}

void KvEventSubscriber::Advance(uint64_t next) {
  next_ = next;
  following_ = true;
  MutexLock lock(&mu_);
  stats_.next_seq = next;
  stats_.following = true;
  advanced_.SignalAll();
}

SubscriberStats KvEventSubscriber::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

bool KvEventSubscriber::WaitForSeq(uint64_t seq,
                                   std::chrono::milliseconds timeout) const {
  return WaitUntil(
      [seq](const SubscriberStats& s) {
        return s.following && s.next_seq >= seq;
      },
      timeout);
}

bool KvEventSubscriber::WaitUntil(
    const std::function<bool(const SubscriberStats&)>& done,
    std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  while (!done(stats_)) {
    if (!advanced_.WaitUntil(&mu_, deadline)) return done(stats_);
  }
  return true;
}

}  // namespace kvpool::events
