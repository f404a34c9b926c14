// The TCP data client's connections: a small pool of idle ones per
// (endpoint, expected node id), and opening new ones: connect within
// connect_timeout, TLS if configured, then the HELLO that proves the server
// is the expected node. A connection is only ever reused for the node its
// HELLO named. Thread-safe. Internal to the data client.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_POOL_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_POOL_H_

#include <asio.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvpool/status.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_client_link.h"
#include "transport/tcp_data_client_tls.h"

namespace kvpool::data_client {

// One open connection that passed the HELLO. Its socket is blocking, with
// SO_SNDTIMEO/SO_RCVTIMEO set to the io_timeout.
struct Connection {
  asio::ip::tcp::socket socket;
  uint64_t generation;  // of its pool when it was opened
  // Declared after the socket so it is freed first (it does not own the
  // descriptor).
  SslPtr ssl;
  Link link() { return Link{socket.native_handle(), ssl.get()}; }
};

class ConnectionPool {
 public:
  explicit ConnectionPool(const TcpDataClientOptions& options);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A pooled connection to `node_id` at `endpoint` if there is one (sets
  // *reused), else a new one that passed the HELLO exchange.
  Result<std::unique_ptr<Connection>> Take(const std::string& endpoint,
                                           const std::string& node_id,
                                           bool* reused);
  // Returns a connection that is in a clean state (between requests); it is
  // closed instead if the pool is full or Forget ran since it was opened.
  void Give(const std::string& endpoint, const std::string& node_id,
            std::unique_ptr<Connection> conn);
  // Closes the idle connections to `node_id` at `endpoint`.
  void DropIdle(const std::string& endpoint, const std::string& node_id);
  // Closes the idle connections to `endpoint`, whatever node they were
  // opened for, and those in use when they come back.
  void Forget(const std::string& endpoint);

 private:
  struct Pool {
    uint64_t generation = 0;
    std::vector<std::unique_ptr<Connection>> idle;
  };

  Result<std::unique_ptr<Connection>> Connect(const std::string& endpoint,
                                              const std::string& node_id,
                                              uint64_t generation);
  // Connects `socket` to `ep` and leaves it non-blocking.
  Status ConnectTo(asio::ip::tcp::socket& socket,
                   const asio::ip::tcp::endpoint& ep);

  const TcpDataClientOptions options_;
  // Set when options_.tls_ca_file is: every connection is TLS.
  std::unique_ptr<TlsContext> tls_;
  // Only owns the sockets; it is never run because all I/O is blocking.
  asio::io_context io_;
  std::mutex mu_;
  // endpoint -> expected node id -> pool.
  std::unordered_map<std::string, std::unordered_map<std::string, Pool>> pools_;
};

}  // namespace kvpool::data_client

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_POOL_H_
