// Client side of the TCP data plane: one batched round trip per call per
// endpoint, scatter/gather straight into and out of the caller's buffers.
// Keeps a small pool of connections per endpoint ("host:port"). Thread-safe:
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
  // Idle connections kept per endpoint; more are closed when returned.
  size_t max_idle_per_endpoint = 64;
};

class TcpDataClient {
 public:
  TcpDataClient();
  explicit TcpDataClient(const TcpDataClientOptions& options);
  ~TcpDataClient();
  // All ops go to the node at `endpoint` in one request. The call's status is
  // TRANSFER_FAIL if the connection failed (then every op's result is
  // TRANSFER_FAIL too); otherwise OK, and each op carries its own result
  // (e.g. INVALID_PARAMS for a range outside its segment).
  Status Read(const std::string& endpoint, std::span<ReadOp> ops);
  Status Write(const std::string& endpoint, std::span<WriteOp> ops);
  // Drops pooled connections to `endpoint` (e.g. after the node died).
  void Forget(const std::string& endpoint);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_H_
