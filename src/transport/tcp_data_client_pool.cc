#include "transport/tcp_data_client_pool.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <string_view>
#include <utility>

#include "transport/tcp_data_client_hello.h"

namespace kvpool::data_client {
namespace {

using tcp = asio::ip::tcp;

// Large socket buffers let a multi-MiB transfer stream without stalling on
// window updates.
constexpr int kSocketBufferBytes = 4 << 20;

// Splits "host:port" (or "[v6]:port").
bool ParseEndpoint(const std::string& endpoint, std::string* host,
                   uint16_t* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string_view h(endpoint.data(), colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  const char* first = endpoint.data() + colon + 1;
  const char* last = endpoint.data() + endpoint.size();
  unsigned value = 0;
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || first == last || value == 0 ||
      value > 65535) {
    return false;
  }
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace

ConnectionPool::ConnectionPool(const TcpDataClientOptions& options)
    : options_(options) {
  if (!options_.tls_ca_file.empty()) {
    tls_ = std::make_unique<TlsContext>(options_.tls_ca_file);
  }
}

Status ConnectionPool::ConnectTo(tcp::socket& socket, const tcp::endpoint& ep) {
  asio::error_code ec;
  socket.open(ep.protocol(), ec);
  if (ec) return Status(ErrorCode::TRANSFER_FAIL, "socket: " + ec.message());
  socket.set_option(tcp::no_delay(true), ec);
  // Before connect, so the window scale offered in the SYN covers them.
  socket.set_option(asio::socket_base::receive_buffer_size(kSocketBufferBytes),
                    ec);
  socket.set_option(asio::socket_base::send_buffer_size(kSocketBufferBytes),
                    ec);
  const int fd = socket.native_handle();
  const auto io_ms = options_.io_timeout.count();
  timeval tv{static_cast<time_t>(io_ms / 1000),
             static_cast<suseconds_t>((io_ms % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

  // Non-blocking connect plus poll() so the connect timeout holds even when
  // SYNs go unanswered (Asio's blocking connect would wait indefinitely).
  socket.non_blocking(true, ec);
  if (::connect(fd, ep.data(), ep.size()) != 0) {
    int err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      pollfd pfd{fd, POLLOUT, 0};
      int r;
      do {
        r = ::poll(&pfd, 1, static_cast<int>(options_.connect_timeout.count()));
      } while (r < 0 && errno == EINTR);
      if (r == 0) {
        return Status(ErrorCode::TRANSFER_FAIL, "connect: timed out");
      }
      socklen_t len = sizeof(err);
      if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
    if (err != 0) {
      return Status(ErrorCode::TRANSFER_FAIL, "connect: " + ErrnoText(err));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<Connection>> ConnectionPool::Connect(
    const std::string& endpoint, const std::string& node_id,
    uint64_t generation) {
  if (tls_ && !tls_->setup_error().empty()) {
    return Status(ErrorCode::TRANSFER_FAIL, tls_->setup_error());
  }
  std::string host;
  uint16_t port = 0;
  if (!ParseEndpoint(endpoint, &host, &port)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "malformed data endpoint '" + endpoint + "'");
  }
  std::vector<tcp::endpoint> candidates;
  asio::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host, ec);
  if (!ec) {
    candidates.emplace_back(addr, port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec) {
      return Status(ErrorCode::TRANSFER_FAIL,
                    "cannot resolve " + endpoint + ": " + ec.message());
    }
    for (const auto& r : results) candidates.push_back(r.endpoint());
  }
  Status last(ErrorCode::TRANSFER_FAIL, "no address for " + endpoint);
  for (const tcp::endpoint& ep : candidates) {
    auto conn = std::make_unique<Connection>(
        Connection{tcp::socket(io_), generation, {}});
    Status s = ConnectTo(conn->socket, ep);
    if (!s.ok()) {
      last = Status(ErrorCode::TRANSFER_FAIL,
                    "cannot connect to " + endpoint + ": " + s.message());
      continue;
    }
    if (tls_) {
      std::string error;
      conn->ssl = tls_->NewSession(conn->socket.native_handle(), &error);
      if (!conn->ssl) {
        last = Status(ErrorCode::TRANSFER_FAIL, error);
        continue;
      }
      last = TlsContext::Handshake(conn->link(), endpoint, host,
                                   options_.handshake_timeout);
      if (!last.ok()) continue;
    }
    // Nothing is sent or received on the connection before the server has
    // proved to be the expected node.
    last = ExchangeHello(conn->link(), endpoint, node_id,
                         options_.handshake_timeout);
    if (!last.ok()) continue;
    conn->socket.non_blocking(false, ec);
    if (ec) {
      last = Status(ErrorCode::TRANSFER_FAIL,
                    "cannot make socket blocking: " + ec.message());
      continue;
    }
    return conn;
  }
  return last;
}

Result<std::unique_ptr<Connection>> ConnectionPool::Take(
    const std::string& endpoint, const std::string& node_id, bool* reused) {
  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    Pool& pool = pools_[endpoint][node_id];
    if (!pool.idle.empty()) {
      auto conn = std::move(pool.idle.back());
      pool.idle.pop_back();
      *reused = true;
      return conn;
    }
    generation = pool.generation;
  }
  *reused = false;
  return Connect(endpoint, node_id, generation);
}

void ConnectionPool::Give(const std::string& endpoint,
                          const std::string& node_id,
                          std::unique_ptr<Connection> conn) {
  std::lock_guard lock(mu_);
  Pool& pool = pools_[endpoint][node_id];
  // A connection opened before Forget() belongs to the forgotten node.
  if (conn->generation != pool.generation ||
      pool.idle.size() >= options_.max_idle_per_endpoint) {
    return;
  }
  pool.idle.push_back(std::move(conn));
}

void ConnectionPool::DropIdle(const std::string& endpoint,
                              const std::string& node_id) {
  std::vector<std::unique_ptr<Connection>> doomed;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(endpoint);
    if (it == pools_.end()) return;
    auto pool = it->second.find(node_id);
    if (pool == it->second.end()) return;
    doomed.swap(pool->second.idle);
  }
  // `doomed` closes its sockets here, outside the lock.
}

void ConnectionPool::Forget(const std::string& endpoint) {
  std::vector<std::unique_ptr<Connection>> doomed;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(endpoint);
    if (it == pools_.end()) return;
    for (auto& [node_id, pool] : it->second) {
      // Connections in use now are closed instead of returned.
      ++pool.generation;
      for (auto& conn : pool.idle) doomed.push_back(std::move(conn));
      pool.idle.clear();
    }
  }
}

}  // namespace kvpool::data_client
