// Client side of the TCP data plane: one batched round trip per call per
// endpoint, scatter/gather straight into and out of the caller's buffers.
// Every new connection first checks, with a HELLO exchange, that the server
// is the node the caller expects: an endpoint ("host:port") whose port now
// belongs to another process fails the call instead of serving it. Keeps a
// small pool of connections per (endpoint, node id). Thread-safe:
// concurrent calls use different pooled connections.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "kvpool/status.h"
#include "transport/data_plane_types.h"

namespace kvpool {

struct TcpDataClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // A call fails with TRANSFER_FAIL once no byte has moved for this long, so
  // a hung or vanished node cannot block a caller forever.
  std::chrono::milliseconds io_timeout{30000};
  // Bounds the whole HELLO exchange on a new connection, so a peer that is
  // not a kvpool data server (and never answers) fails the call quickly
  // rather than after io_timeout.
  std::chrono::milliseconds handshake_timeout{2000};
  // Idle connections kept per endpoint; more are closed when returned.
  size_t max_idle_per_endpoint = 64;
};

class TcpDataClient {
 public:
  TcpDataClient();
  explicit TcpDataClient(const TcpDataClientOptions& options);
  ~TcpDataClient();
  // All ops go to the node at `endpoint` in one request, provided that node
  // is `expected_node_id` (1 to 256 bytes, else INVALID_PARAMS). The call's
  // status is TRANSFER_FAIL if the connection failed or the endpoint is now
  // another node or no kvpool data server at all (then every op's result is
  // TRANSFER_FAIL too and no buffer was touched by that server); otherwise
  // OK, and each op carries its own result (e.g. INVALID_PARAMS for a range
  // outside its segment).
  Status Read(const std::string& endpoint, const std::string& expected_node_id,
              std::span<ReadOp> ops);
  Status Write(const std::string& endpoint, const std::string& expected_node_id,
               std::span<WriteOp> ops);
  // Drops pooled connections to `endpoint`, whatever node they were opened
  // for (e.g. after the node died).
  void Forget(const std::string& endpoint);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_H_
