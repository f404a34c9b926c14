// One connection of the TCP data server: the TLS handshake (if configured),
// the HELLO that must name this node, then a loop of request frames, each
// header checked before anything else is read and each op handed to the
// READ/WRITE (tcp_data_server_ranges.cc) or SSD_READ/PREFETCH
// (tcp_data_server_keys.cc) handlers. Also the answers every op shares: a
// malformed frame closes the connection, an op without a handler or over
// the memory budget is refused and the connection kept.
#include <spdlog/spdlog.h>

#include <array>
#include <string_view>
#include <type_traits>

#include "transport/tcp_data_server_impl.h"

namespace kvpool {

using data_server::kDiscardChunk;
using data_server::kKeepRequestBytes;
using data_server::Lowest;
using data_server::PeerName;
using data_server::SteadyNowMs;
using data_server::TransferWhole;

namespace {

// Returns why `h` is not an acceptable request header, or nullptr.
const char* CheckRequestHeader(const wire::Header& h) {
  if (h.magic != wire::kMagic) return "bad magic";
  if (h.version != wire::kVersion) return "unsupported version";
  if (h.status != 0) return "non-zero status field in a request";
  if (h.count > wire::kMaxOps) return "too many ops";
  const uint64_t ranges_len = uint64_t{h.count} * wire::kRangeSize;
  switch (static_cast<wire::Op>(h.op)) {
    case wire::Op::kRead:
      if (h.body_len != ranges_len) return "body length mismatch";
      return nullptr;
    case wire::Op::kWrite:
      if (h.body_len < ranges_len) return "body shorter than its ranges";
      if (h.body_len - ranges_len > wire::kMaxPayload) {
        return "payload over limit";
      }
      return nullptr;
    case wire::Op::kSsdRead:
    case wire::Op::kPrefetch:
    case wire::Op::kPrefetchForNextGet:
      // The body's structure is checked once it has been read.
      if (h.body_len > wire::kMaxKeyFrameBody) return "body over limit";
      return nullptr;
    case wire::Op::kHello:
      if (h.count != 0) return "HELLO with a non-zero count";
      if (h.body_len < wire::kMinNodeIdSize ||
          h.body_len > wire::kMaxNodeIdSize) {
        return "HELLO node id length out of range";
      }
      return nullptr;
  }
  return "unknown op";
}

// For logging a node id a peer sent: it may hold any bytes.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  return out;
}

}  // namespace

template <typename Stream>
asio::awaitable<void> TcpDataServer::Impl::Serve(
    Stream socket, std::shared_ptr<SessionSlot> slot,
    SessionList::iterator where) {
  SessionState st(&budget_);
  // Before any close posted for this session can run (same executor, posted
  // later).
  slot->socket = &Lowest(socket);
  // Runs on this session's executor when the coroutine ends, or in Stop
  // when the context is destroyed (nothing is posted to it any more).
  struct Unregister {
    Impl* impl;
    std::shared_ptr<SessionSlot> slot;
    SessionList::iterator where;
    ~Unregister() {
      slot->alive = false;
      std::lock_guard lock(impl->sessions_mu_);
      if (slot->closing.load()) --impl->closing_sessions_;
      impl->sessions_.erase(where);
    }
  } unregister{this, slot, where};
  if (slot->closing.load()) co_return;
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    if (!co_await TlsHandshake(socket, slot)) co_return;
  }
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  for (;;) {
    slot->between_frames.store(true);
    slot->last_active_ms.store(SteadyNowMs());
    st.request_hold.Reset();
    if (st.ranges_raw.capacity() > kKeepRequestBytes) st.ranges_raw = {};
    co_await asio::async_read(socket, asio::buffer(st.header), TransferWhole{},
                              token);
    if (ec) co_return;  // peer closed or reset: nothing to answer
    slot->between_frames.store(false);
    slot->last_active_ms.store(SteadyNowMs());
    st.request_start = std::chrono::steady_clock::now();
    const wire::Header h = wire::DecodeHeader(st.header);
    if (const char* why = CheckRequestHeader(h)) {
      BadFrame(Lowest(socket), why);
      co_return;
    }
    const auto op = static_cast<wire::Op>(h.op);
    // HELLO is the first frame and only the first: nothing is served to a
    // client that has not named this node.
    if ((op == wire::Op::kHello) == st.greeted) {
      BadFrame(Lowest(socket),
               st.greeted ? "second HELLO" : "request before HELLO");
      co_return;
    }
    bool go_on;
    if (op == wire::Op::kHello) {
      go_on = co_await Greet(socket, h, st);
    } else if (op == wire::Op::kSsdRead || op == wire::Op::kPrefetch ||
               op == wire::Op::kPrefetchForNextGet) {
      go_on = co_await ServeKeys(socket, h, *slot, st);
    } else {
      go_on = co_await ServeRanges(socket, h, *slot, st);
    }
    if (!go_on) co_return;
  }
}

asio::awaitable<bool> TcpDataServer::Impl::TlsHandshake(
    TlsStream& socket, const std::shared_ptr<SessionSlot>& slot) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // A peer that never finishes the handshake must not hold its slot until
  // the idle sweep: closing the socket fails the handshake at once. The
  // timer's handler may already be queued when the handshake ends, and may
  // run after this session is gone: it goes through the slot.
  auto done = std::make_shared<bool>(false);
  // Taken now: a peer that gave up has no remote endpoint by the time its
  // failure is logged.
  const std::string peer = PeerName(socket);
  asio::steady_timer deadline(socket.get_executor(), tls_handshake_timeout_);
  deadline.async_wait([slot, done](const asio::error_code& wait_ec) {
    if (wait_ec || *done || !slot->alive || slot->socket == nullptr) return;
    asio::error_code ignored;
    slot->socket->close(ignored);
  });
  co_await socket.async_handshake(asio::ssl::stream_base::server, token);
  *done = true;
  deadline.cancel();
  if (ec) {
    stats_.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    WarnLimited(&last_tls_log_ms_, &tls_log_held_,
                "TLS handshake with " + peer + " failed: " + ec.message() +
                    " (a plaintext client, or one that does not trust "
                    "this node's certificate?)");
    asio::error_code ignored;
    Lowest(socket).close(ignored);
    co_return false;
  }
  slot->last_active_ms.store(SteadyNowMs());
  co_return true;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::Greet(Stream& socket,
                                                 const wire::Header& h,
                                                 SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Bounded by CheckRequestHeader (at most kMaxNodeIdSize bytes).
  std::string expected(static_cast<size_t>(h.body_len), '\0');
  co_await asio::async_read(socket, asio::buffer(expected), TransferWhole{},
                            token);
  if (ec) co_return false;
  const bool match = expected == node_id_;
  if (!match) {
    // Counted and logged before the answer goes out, so whoever sees the
    // answer also sees the count.
    stats_.identity_mismatches.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("data server {}: {} expected node '{}', refusing and closing",
                 node_id_, PeerName(socket), Printable(expected));
  }
  // A refusal does not name this node: whoever guesses wrong learns
  // nothing to guess better with.
  wire::Header rh;
  rh.op = h.op;
  rh.status = ToInt(match ? ErrorCode::OK : ErrorCode::SEGMENT_NOT_FOUND);
  rh.body_len = match ? node_id_.size() : 0;
  st.response.resize(wire::kHeaderSize);
  wire::EncodeHeader(rh, st.response.data());
  const std::array<asio::const_buffer, 2> out = {
      asio::buffer(st.response),
      asio::buffer(node_id_.data(), match ? node_id_.size() : 0)};
  co_await asio::async_write(socket, out, TransferWhole{}, token);
  if (ec) co_return false;
  if (match) {
    st.greeted = true;
    co_return true;
  }
  // The client sends nothing after its HELLO, so closing cannot reset the
  // connection before it has read the answer.
  Lowest(socket).shutdown(tcp::socket::shutdown_both, ec);
  Lowest(socket).close(ec);
  co_return false;
}

void TcpDataServer::Impl::BadFrame(tcp::socket& socket, const char* why) {
  stats_.bad_frames.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("data server: malformed frame from {} ({}), closing",
               PeerName(socket), why);
  asio::error_code ec;
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::RefuseOp(Stream& socket,
                                                    const wire::Header& h,
                                                    SessionState& st,
                                                    ErrorCode code) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Skip the body so the connection stays usable, then refuse cleanly.
  if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
  for (uint64_t left = h.body_len; left > 0;) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
    co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                              TransferWhole{}, token);
    if (ec) co_return false;
    left -= n;
  }
  PrepareResponse(h, code, 0, st);
  co_await asio::async_write(socket, asio::buffer(st.response), TransferWhole{},
                             token);
  co_return !ec;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::RefuseOverBudget(
    Stream& socket, const wire::Header& h, SessionState& st) {
  stats_.budget_refusals.fetch_add(1, std::memory_order_relaxed);
  WarnLimited(&last_budget_log_ms_, &budget_log_held_,
              "requests in flight hold all of max_buffered_bytes: refusing a "
              "request");
  co_return co_await RefuseOp(socket, h, st, ErrorCode::NO_AVAILABLE_HANDLE);
}

// The accept loop starts sessions of both kinds; the frame handlers refuse
// ops of both.
template asio::awaitable<void> TcpDataServer::Impl::Serve(
    tcp::socket, std::shared_ptr<SessionSlot>, SessionList::iterator);
template asio::awaitable<void> TcpDataServer::Impl::Serve(
    TlsStream, std::shared_ptr<SessionSlot>, SessionList::iterator);
template asio::awaitable<bool> TcpDataServer::Impl::RefuseOp(
    tcp::socket&, const wire::Header&, SessionState&, ErrorCode);
template asio::awaitable<bool> TcpDataServer::Impl::RefuseOp(
    TlsStream&, const wire::Header&, SessionState&, ErrorCode);
template asio::awaitable<bool> TcpDataServer::Impl::RefuseOverBudget(
    tcp::socket&, const wire::Header&, SessionState&);
template asio::awaitable<bool> TcpDataServer::Impl::RefuseOverBudget(
    TlsStream&, const wire::Header&, SessionState&);

}  // namespace kvpool
