#include "transport/tcp_data_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "transport/wire_format.h"

namespace kvpool {
namespace {

using asio::ip::tcp;

// Large socket buffers let a multi-MiB response stream without stalling on
// window updates. Set on the listening socket so accepted sockets inherit
// them before the handshake and the window scale is negotiated accordingly.
constexpr int kSocketBufferBytes = 4 << 20;
// Payload of a rejected WRITE op is drained through this much scratch.
constexpr size_t kDiscardChunk = 256 << 10;

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
      if (h.body_len > wire::kMaxUnsupportedBody) return "body over limit";
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

std::string PeerName(const tcp::socket& s) {
  asio::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace

class TcpDataServer::Impl {
 public:
  Impl(const SegmentTable* segments, std::string node_id, int io_threads)
      : segments_(segments),
        node_id_(std::move(node_id)),
        io_threads_(io_threads > 0 ? io_threads : 1) {}
  ~Impl() { Stop(); }

  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_.load(std::memory_order_relaxed); }
  const std::string& node_id() const { return node_id_; }
  const TcpDataServerStats& stats() const { return stats_; }

 private:
  // Per-connection buffers, reused across requests. Lives in the session's
  // coroutine frame, so buffers handed to Asio stay put.
  struct SessionState {
    uint8_t header[wire::kHeaderSize];
    bool greeted = false;  // a HELLO naming this node was accepted
    std::vector<uint8_t> ranges_raw;
    std::vector<wire::Range> ranges;
    std::vector<uint8_t*> targets;  // resolved segment memory, null = rejected
    std::vector<uint8_t> response;  // response header + result codes
    std::vector<asio::const_buffer> out;
    std::vector<asio::mutable_buffer> in;
    std::unique_ptr<uint8_t[]> scratch;
  };

  asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  asio::awaitable<void> Serve(tcp::socket socket);
  // Answers the HELLO whose header is `h`. Returns false when the session
  // must end (I/O error, or the client expects another node: then the
  // socket is already closed).
  asio::awaitable<bool> Greet(tcp::socket& socket, const wire::Header& h,
                              SessionState& st);
  // Reads the ranges, resolves each against the segment table and fills in
  // per-op result codes. Returns a reason when the frame is malformed.
  const char* ResolveRanges(const wire::Header& h, SessionState& st);
  void PrepareResponse(const wire::Header& h, ErrorCode status,
                       uint64_t data_len, SessionState& st);
  void BadFrame(tcp::socket& socket, const char* why);

  const SegmentTable* const segments_;
  const std::string node_id_;
  const int io_threads_;
  TcpDataServerStats stats_;
  std::atomic<uint16_t> port_{0};

  std::mutex mu_;  // serialises Start and Stop
  std::unique_ptr<asio::io_context> io_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::vector<std::thread> threads_;
};

Status TcpDataServer::Impl::Start(const std::string& host, uint16_t port) {
  std::lock_guard lock(mu_);
  if (io_) {
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  "data server already started");
  }
  // Without an identity the server could not tell a client that expects
  // another node from one that expects it.
  if (node_id_.size() < wire::kMinNodeIdSize ||
      node_id_.size() > wire::kMaxNodeIdSize) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "data server node id must be 1 to " +
                      std::to_string(wire::kMaxNodeIdSize) + " bytes, got " +
                      std::to_string(node_id_.size()));
  }
  auto io = std::make_unique<asio::io_context>(io_threads_);
  const std::string where = host + ":" + std::to_string(port);
  asio::error_code ec;
  tcp::endpoint endpoint;
  asio::ip::address addr = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(addr, port);
  } else {
    tcp::resolver resolver(*io);
    auto results = resolver.resolve(host, std::to_string(port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "cannot resolve data server address " + where + ": " +
                        (ec ? ec.message() : "no address"));
    }
    endpoint = results.begin()->endpoint();
  }

  auto acceptor = std::make_unique<tcp::acceptor>(*io);
  auto fail = [&](const char* step) {
    return Status(ErrorCode::INTERNAL_ERROR, std::string("data server ") +
                                                 step + " on " + where +
                                                 " failed: " + ec.message());
  };
  acceptor->open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  // Lets a restarted node rebind its port while old connections linger in
  // TIME_WAIT.
  acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail("SO_REUSEADDR");
  // Best effort: a kernel cap only costs throughput, not correctness.
  acceptor->set_option(
      asio::socket_base::receive_buffer_size(kSocketBufferBytes), ec);
  acceptor->set_option(asio::socket_base::send_buffer_size(kSocketBufferBytes),
                       ec);
  acceptor->bind(endpoint, ec);
  if (ec) return fail("bind");
  acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  port_.store(acceptor->local_endpoint().port(), std::memory_order_relaxed);

  asio::co_spawn(*io, AcceptLoop(*acceptor), asio::detached);
  io_ = std::move(io);
  acceptor_ = std::move(acceptor);
  for (int i = 0; i < io_threads_; ++i) {
    threads_.emplace_back([io = io_.get()] {
      // A handler that throws must not take the whole node down; the
      // session it belonged to is gone, the others keep running.
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("data server handler threw: {}", e.what());
        }
      }
    });
  }
  return Status::OK();
}

void TcpDataServer::Impl::Stop() {
  std::lock_guard lock(mu_);
  if (!io_) return;
  io_->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  acceptor_.reset();
  // Destroying the context destroys every suspended session coroutine, and
  // with it each connection's socket; clients see the connection close.
  io_.reset();
}

asio::awaitable<void> TcpDataServer::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  for (;;) {
    asio::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
        co_return;
      }
      // Typically EMFILE: back off instead of spinning on the same error.
      spdlog::warn("data server accept failed: {}", ec.message());
      asio::steady_timer timer(acceptor.get_executor(),
                               std::chrono::milliseconds(50));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    // Detects peers that vanished mid-frame so their sessions do not linger.
    socket.set_option(asio::socket_base::keep_alive(true), ec);
    asio::co_spawn(acceptor.get_executor(), Serve(std::move(socket)),
                   asio::detached);
  }
}

void TcpDataServer::Impl::BadFrame(tcp::socket& socket, const char* why) {
  stats_.bad_frames.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("data server: malformed frame from {} ({}), closing",
               PeerName(socket), why);
  asio::error_code ec;
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

const char* TcpDataServer::Impl::ResolveRanges(const wire::Header& h,
                                               SessionState& st) {
  st.ranges.resize(h.count);
  st.targets.resize(h.count);
  uint64_t total = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const wire::Range r =
        wire::DecodeRange(st.ranges_raw.data() + i * wire::kRangeSize);
    // Checked before summing so the sum cannot overflow.
    if (r.length > wire::kMaxPayload || total + r.length > wire::kMaxPayload) {
      return "total length over limit";
    }
    total += r.length;
    st.ranges[i] = r;
  }
  if (static_cast<wire::Op>(h.op) == wire::Op::kWrite &&
      total != h.body_len - uint64_t{h.count} * wire::kRangeSize) {
    return "payload length does not match the ranges";
  }
  // Only now, with the whole frame known to be well formed, are ranges
  // resolved; a malformed frame never reaches segment memory.
  uint64_t rejected = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const wire::Range& r = st.ranges[i];
    // A zero-length range names no bytes; rejecting it keeps "OK" meaning
    // "these bytes were moved".
    uint8_t* p = r.length == 0
                     ? nullptr
                     : segments_->Resolve(r.segment_id, r.offset, r.length);
    st.targets[i] = p;
    if (p == nullptr) ++rejected;
  }
  if (rejected > 0) {
    stats_.rejected_ranges.fetch_add(rejected, std::memory_order_relaxed);
  }
  return nullptr;
}

void TcpDataServer::Impl::PrepareResponse(const wire::Header& h,
                                          ErrorCode status, uint64_t data_len,
                                          SessionState& st) {
  const uint32_t count = status == ErrorCode::OK ? h.count : 0;
  st.response.resize(wire::kHeaderSize + size_t{count} * wire::kResultSize);
  wire::Header rh;
  rh.op = h.op;
  rh.count = count;
  rh.status = ToInt(status);
  rh.body_len = uint64_t{count} * wire::kResultSize + data_len;
  wire::EncodeHeader(rh, st.response.data());
  uint8_t* codes = st.response.data() + wire::kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    const ErrorCode code =
        st.targets[i] != nullptr ? ErrorCode::OK : ErrorCode::INVALID_PARAMS;
    wire::PutLe<uint32_t>(codes + i * wire::kResultSize,
                          static_cast<uint32_t>(ToInt(code)));
  }
}

asio::awaitable<bool> TcpDataServer::Impl::Greet(tcp::socket& socket,
                                                 const wire::Header& h,
                                                 SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Bounded by CheckRequestHeader (at most kMaxNodeIdSize bytes).
  std::string expected(static_cast<size_t>(h.body_len), '\0');
  co_await asio::async_read(socket, asio::buffer(expected), token);
  if (ec) co_return false;
  const bool match = expected == node_id_;
  if (!match) {
    // Counted and logged before the answer goes out, so whoever sees the
    // answer also sees the count.
    stats_.identity_mismatches.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("data server {}: {} expected node '{}', refusing and closing",
                 node_id_, PeerName(socket), Printable(expected));
  }
  // Either way the answer names this node, so the client can report who
  // holds the endpoint now.
  wire::Header rh;
  rh.op = h.op;
  rh.status = ToInt(match ? ErrorCode::OK : ErrorCode::SEGMENT_NOT_FOUND);
  rh.body_len = node_id_.size();
  st.response.resize(wire::kHeaderSize);
  wire::EncodeHeader(rh, st.response.data());
  const std::array<asio::const_buffer, 2> out = {asio::buffer(st.response),
                                                 asio::buffer(node_id_)};
  co_await asio::async_write(socket, out, token);
  if (ec) co_return false;
  if (match) {
    st.greeted = true;
    co_return true;
  }
  // The client sends nothing after its HELLO, so closing cannot reset the
  // connection before it has read the answer.
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  co_return false;
}

asio::awaitable<void> TcpDataServer::Impl::Serve(tcp::socket socket) {
  SessionState st;
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  for (;;) {
    co_await asio::async_read(socket, asio::buffer(st.header), token);
    if (ec) co_return;  // peer closed or reset: nothing to answer
    const wire::Header h = wire::DecodeHeader(st.header);
    if (const char* why = CheckRequestHeader(h)) {
      BadFrame(socket, why);
      co_return;
    }
    const auto op = static_cast<wire::Op>(h.op);
    // HELLO is the first frame and only the first: nothing is served to a
    // client that has not named this node.
    if ((op == wire::Op::kHello) == st.greeted) {
      BadFrame(socket, st.greeted ? "second HELLO" : "request before HELLO");
      co_return;
    }
    if (op == wire::Op::kHello) {
      if (!co_await Greet(socket, h, st)) co_return;
      continue;
    }

    if (op == wire::Op::kSsdRead) {
      // Skip the body so the connection stays usable, then refuse cleanly.
      if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
      for (uint64_t left = h.body_len; left > 0;) {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
        co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                                  token);
        if (ec) co_return;
        left -= n;
      }
      PrepareResponse(h, ErrorCode::INVALID_PARAMS, 0, st);
      co_await asio::async_write(socket, asio::buffer(st.response), token);
      if (ec) co_return;
      continue;
    }

    st.ranges_raw.resize(size_t{h.count} * wire::kRangeSize);
    co_await asio::async_read(socket, asio::buffer(st.ranges_raw), token);
    if (ec) co_return;
    if (const char* why = ResolveRanges(h, st)) {
      BadFrame(socket, why);
      co_return;
    }

    if (op == wire::Op::kRead) {
      // Header, codes and the accepted ranges go out in one gathered write
      // straight from segment memory.
      uint64_t data_len = 0;
      st.out.clear();
      st.out.emplace_back();  // response header + codes, filled in below
      for (uint32_t i = 0; i < h.count; ++i) {
        if (st.targets[i] == nullptr) continue;
        st.out.emplace_back(st.targets[i], st.ranges[i].length);
        data_len += st.ranges[i].length;
      }
      PrepareResponse(h, ErrorCode::OK, data_len, st);
      st.out[0] = asio::buffer(st.response);
      co_await asio::async_write(socket, st.out, token);
      if (ec) co_return;
      stats_.bytes_read.fetch_add(data_len, std::memory_order_relaxed);
      continue;
    }

    // WRITE: payloads of accepted ops are read straight into the segment;
    // a rejected op's payload is drained so the next op's bytes line up.
    uint64_t written = 0;
    st.in.clear();
    for (uint32_t i = 0; i <= h.count; ++i) {
      const bool at_end = i == h.count;
      if (!at_end && st.targets[i] != nullptr) {
        st.in.emplace_back(st.targets[i], st.ranges[i].length);
        written += st.ranges[i].length;
        continue;
      }
      if (!st.in.empty()) {
        co_await asio::async_read(socket, st.in, token);
        if (ec) co_return;
        st.in.clear();
      }
      if (at_end) break;
      if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
      for (uint64_t left = st.ranges[i].length; left > 0;) {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
        co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                                  token);
        if (ec) co_return;
        left -= n;
      }
    }
    stats_.bytes_written.fetch_add(written, std::memory_order_relaxed);
    PrepareResponse(h, ErrorCode::OK, 0, st);
    co_await asio::async_write(socket, asio::buffer(st.response), token);
    if (ec) co_return;
  }
}

TcpDataServer::TcpDataServer(const SegmentTable* segments, std::string node_id,
                             int io_threads)
    : impl_(std::make_unique<Impl>(segments, std::move(node_id), io_threads)) {}

TcpDataServer::~TcpDataServer() { Stop(); }

Status TcpDataServer::Start(const std::string& host, uint16_t port) {
  return impl_->Start(host, port);
}

void TcpDataServer::Stop() { impl_->Stop(); }

uint16_t TcpDataServer::port() const { return impl_->port(); }

const std::string& TcpDataServer::node_id() const { return impl_->node_id(); }

const TcpDataServerStats& TcpDataServer::stats() const {
  return impl_->stats();
}

}  // namespace kvpool
