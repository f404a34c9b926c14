// The node's TCP data server (standalone Asio): serves batched READ and
// WRITE of ranges of the segments in a SegmentTable. See docs/data_plane.md
// for the frame format. Every connection starts with a HELLO in which the
// client names the node it expects; the server serves it only if that is its
// own node id, so a client that reaches a different process on a reused
// port is refused instead of served the wrong segment's bytes. Every range
// is bounds-checked against its segment; a malformed frame closes the
// connection without touching memory.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_
#define KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "kvpool/status.h"
#include "transport/segment_table.h"

namespace kvpool {

struct TcpDataServerStats {
  std::atomic<uint64_t> bytes_read{0};     // bytes sent to readers
  std::atomic<uint64_t> bytes_written{0};  // bytes received from writers
  std::atomic<uint64_t> bad_frames{0};
  std::atomic<uint64_t> rejected_ranges{0};
  // HELLOs that named another node (the connection was refused and closed).
  std::atomic<uint64_t> identity_mismatches{0};
};

class TcpDataServer {
 public:
  // `segments` must outlive the server. `node_id` is the identity clients
  // must name in their HELLO: 1 to 256 bytes (Start fails otherwise), unique
  // among the nodes any client may talk to.
  TcpDataServer(const SegmentTable* segments, std::string node_id,
                int io_threads = 2);
  ~TcpDataServer();
  // Binds host:port (port 0 = any free port) and starts serving.
  Status Start(const std::string& host, uint16_t port);
  // Closes the acceptor and every connection, joins the threads. Idempotent.
  void Stop();
  uint16_t port() const;
  const std::string& node_id() const;
  const TcpDataServerStats& stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_
