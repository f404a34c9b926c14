// TcpDataServer's public face and the server's life cycle: options, the
// handler setters, capability keys, Start (TLS context, listening socket,
// I/O threads) and Stop. Connections, sessions and the frame handlers are
// in the other tcp_data_server_*.cc files (see tcp_data_server_impl.h).
#include "transport/tcp_data_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "common/thread_name.h"
#include "transport/tcp_data_server_impl.h"

namespace kvpool {
namespace {

using data_server::tcp;

// Large socket buffers let a multi-MiB response stream without stalling on
// window updates. Set on the listening socket so accepted sockets inherit
// them before the handshake and the window scale is negotiated accordingly.
constexpr int kSocketBufferBytes = 4 << 20;

// Clang before 15 cannot evaluate the options (they hold std::strings) at
// compile time; GCC builds keep the check.
#if !defined(__clang__) || __clang_major__ >= 15
static_assert(TcpDataServerOptions{}.max_ssd_read_bytes ==
              wire::kDefaultMaxSsdReadBytes);
#endif

// Connections this process can hold, keeping room for its other files
// (SSD segment files, shared memory, gRPC, logs).
size_t DefaultMaxConnections() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
    return 16384;
  }
  const uint64_t n = rl.rlim_cur > 256 ? rl.rlim_cur - 256 : rl.rlim_cur / 2;
  return static_cast<size_t>(std::clamp<uint64_t>(n, 16, 16384));
}

}  // namespace

TcpDataServer::Impl::Impl(const SegmentTable* segments, std::string node_id,
                          const TcpDataServerOptions& options)
    : segments_(segments),
      node_id_(std::move(node_id)),
      io_threads_(options.io_threads > 0 ? options.io_threads : 1),
      ssd_read_threads_(options.ssd_read_threads > 0 ? options.ssd_read_threads
                                                     : 1),
      max_ssd_read_bytes_(options.max_ssd_read_bytes),
      capability_skew_ms_(options.capability_clock_skew_ms),
      cap_locked_(options.require_capabilities),
      max_connections_(options.max_connections > 0 ? options.max_connections
                                                   : DefaultMaxConnections()),
      idle_timeout_ms_(options.idle_timeout_ms),
      max_key_frame_body_(std::min<uint64_t>(options.max_key_frame_body,
                                             wire::kMaxKeyFrameBody)),
      budget_(options.max_buffered_bytes),
      tls_cert_file_(options.tls_cert_file),
      tls_key_file_(options.tls_key_file),
      tls_handshake_timeout_(std::chrono::milliseconds(
          std::max<int64_t>(options.tls_handshake_timeout_ms, 1))) {}

void TcpDataServer::Impl::SetSsdReadHandler(SsdReadHandler handler) {
  std::lock_guard lock(mu_);
  if (!ios_.empty()) {
    spdlog::error("data server {}: SSD read handler set after Start, ignored",
                  node_id_);
    return;
  }
  ssd_read_handler_ = std::move(handler);
}

void TcpDataServer::Impl::SetPrefetchHandler(PrefetchHandler handler) {
  std::lock_guard lock(mu_);
  if (!ios_.empty()) {
    spdlog::error("data server {}: prefetch handler set after Start, ignored",
                  node_id_);
    return;
  }
  prefetch_handler_ = std::move(handler);
}

void TcpDataServer::Impl::SetWriteGuard(WriteGuard guard) {
  std::lock_guard lock(mu_);
  if (!ios_.empty()) {
    spdlog::error("data server {}: write guard set after Start, ignored",
                  node_id_);
    return;
  }
  write_guard_ = std::move(guard);
}

void TcpDataServer::Impl::SetMetrics(MetricsRegistry* metrics) {
  std::lock_guard lock(mu_);
  if (!ios_.empty()) {
    spdlog::error("data server {}: metrics set after Start, ignored", node_id_);
    return;
  }
  static constexpr const char* kOps[] = {"read", "write", "ssd_read"};
  for (int i = 0; i < 3; ++i) {
    const std::string op = std::string("op=\"") + kOps[i] + "\"";
    request_metrics_.duration[i] = &metrics->GetHistogram(
        "kvpool_node_data_request_duration_seconds", op,
        LatencyBucketsSeconds(),
        "data-plane request time on the node, from its header to its reply");
    request_metrics_.bytes[i] = &metrics->GetHistogram(
        "kvpool_node_data_request_bytes", op, SizeBucketsBytes(),
        "data bytes moved by one data-plane request");
  }
}

void TcpDataServer::Impl::SetCapabilityKey(
    std::shared_ptr<const cap::Key> key) {
  std::lock_guard lock(cap_mu_);
  const std::shared_ptr<const CapState> old = cap_state_.load();
  // A second segment's mount hands over the same key again: the
  // generations recorded under it still hold.
  const bool same = old && old->key && key && old->key->raw() == key->raw();
  const uint64_t epoch = old ? old->epoch + (same ? 0 : 1) : 1;
  cap_state_.store(
      std::make_shared<const CapState>(CapState{std::move(key), epoch}));
  write_order_.Rekey(epoch);
  cap_locked_.store(false);
}

Status TcpDataServer::Impl::Start(const std::string& host, uint16_t port) {
  std::lock_guard lock(mu_);
  if (!ios_.empty()) {
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
  auto tls = MakeTlsContext();
  if (!tls.ok()) return tls.status();
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (int i = 0; i < io_threads_; ++i) {
    ios.push_back(std::make_unique<asio::io_context>(1));
  }
  asio::io_context* io = ios.front().get();
  auto acceptor = Listen(*io, host, port);
  if (!acceptor.ok()) return acceptor.status();
  port_.store((*acceptor)->local_endpoint().port(), std::memory_order_relaxed);

  if (ssd_read_handler_) {
    ssd_pool_ = std::make_unique<BlockingPool>(ssd_read_threads_);
  }
  tls_ = std::move(tls).value();
  asio::co_spawn(*io, AcceptLoop(**acceptor), asio::detached);
  if (idle_timeout_ms_ > 0) asio::co_spawn(*io, SweepIdle(), asio::detached);
  ios_ = std::move(ios);
  acceptor_ = std::move(acceptor).value();
  for (auto& ctx : ios_) {
    // A context whose connections have all closed must keep running for
    // the next one it is given; Stop() ends it with stop().
    threads_.emplace_back([io = ctx.get()] {
      SetThreadName("kvp-data-io");
      auto keep_running = asio::make_work_guard(*io);
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

Result<std::unique_ptr<asio::ssl::context>>
TcpDataServer::Impl::MakeTlsContext() const {
  if (tls_cert_file_.empty() != tls_key_file_.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "data server TLS needs both a certificate and a key file");
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (tls_cert_file_.empty()) return tls;
  tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  asio::error_code tls_ec;
  tls->set_options(
      asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
          asio::ssl::context::no_tlsv1_1,
      tls_ec);
  if (!tls_ec) tls->use_certificate_chain_file(tls_cert_file_, tls_ec);
  if (tls_ec) {
    return Status(ErrorCode::INVALID_PARAMS, "data server TLS certificate " +
                                                 tls_cert_file_ + ": " +
                                                 tls_ec.message());
  }
  tls->use_private_key_file(tls_key_file_, asio::ssl::context::pem, tls_ec);
  if (tls_ec) {
    return Status(
        ErrorCode::INVALID_PARAMS,
        "data server TLS key " + tls_key_file_ + ": " + tls_ec.message());
  }
  return tls;
}

Result<std::unique_ptr<tcp::acceptor>> TcpDataServer::Impl::Listen(
    asio::io_context& io, const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  asio::error_code ec;
  tcp::endpoint endpoint;
  asio::ip::address addr = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(addr, port);
  } else {
    tcp::resolver resolver(io);
    auto results = resolver.resolve(host, std::to_string(port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "cannot resolve data server address " + where + ": " +
                        (ec ? ec.message() : "no address"));
    }
    endpoint = results.begin()->endpoint();
  }

  auto acceptor = std::make_unique<tcp::acceptor>(io);
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
  return acceptor;
}

void TcpDataServer::Impl::Stop() {
  std::lock_guard lock(mu_);
  if (ios_.empty()) return;
  for (auto& ctx : ios_) ctx->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  // Before the context goes: a running SSD read finishes and posts its
  // session's resumption (which never runs), queued ones are dropped. Both
  // release their session, whose unwinding is posted to the context and
  // destroyed with it below.
  if (ssd_pool_) {
    ssd_pool_->Stop();
    ssd_pool_.reset();
  }
  // Sessions waiting for an older write: their resumptions go the same way
  // (posted unwinding, destroyed with the context), never run.
  write_order_.DropWaiters();
  acceptor_.reset();
  // Destroying a context destroys every suspended session coroutine on it,
  // and with it each connection's socket; clients see the connection close.
  ios_.clear();
  tls_.reset();  // after the sessions that used it
  next_io_ = 0;
  // Sessions accepted but never started left their entries.
  std::lock_guard sessions_lock(sessions_mu_);
  sessions_.clear();
  closing_sessions_ = 0;
}

TcpDataServer::TcpDataServer(const SegmentTable* segments, std::string node_id,
                             int io_threads)
    : TcpDataServer(segments, std::move(node_id),
                    TcpDataServerOptions{.io_threads = io_threads}) {}

TcpDataServer::TcpDataServer(const SegmentTable* segments, std::string node_id,
                             const TcpDataServerOptions& options)
    : impl_(std::make_unique<Impl>(segments, std::move(node_id), options)) {}

void TcpDataServer::SetSsdReadHandler(SsdReadHandler handler) {
  impl_->SetSsdReadHandler(std::move(handler));
}

void TcpDataServer::SetPrefetchHandler(PrefetchHandler handler) {
  impl_->SetPrefetchHandler(std::move(handler));
}

void TcpDataServer::SetWriteGuard(WriteGuard guard) {
  impl_->SetWriteGuard(std::move(guard));
}

void TcpDataServer::SetMetrics(MetricsRegistry* metrics) {
  impl_->SetMetrics(metrics);
}

void TcpDataServer::SetCapabilityKey(std::shared_ptr<const cap::Key> key) {
  impl_->SetCapabilityKey(std::move(key));
}

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

size_t TcpDataServer::write_record_intervals() const {
  return impl_->write_record_intervals();
}

}  // namespace kvpool
