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
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

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
  // Bounds the buffer one SSD_READ request asks the server for (the ops'
  // lengths, each rounded up to 4096, summed); a bigger ReadKeys call is
  // split into several requests. Servers refuse a request over their own
  // max_ssd_read_bytes (default the same 256 MiB), so keep this at most that.
  uint64_t max_ssd_read_frame_bytes = uint64_t{256} << 20;
  // PEM file of the CA(s) that sign the nodes' data plane certificates.
  // Set: every connection is TLS (within handshake_timeout, before the
  // HELLO); the node's certificate must chain to one of these CAs and name
  // the endpoint's host (an IP address must be among its IP SANs, a host
  // name among its DNS names). A node serving plaintext fails the call with
  // TRANSFER_FAIL. Empty: plaintext. An unreadable file fails every call
  // with TRANSFER_FAIL.
  std::string tls_ca_file;
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
  // SSD_READ: reads values by key from the SSD of the node at `endpoint`
  // into each op's `dest` (which must hold `length` bytes). Same contract
  // as Read: TRANSFER_FAIL for the call and every op if the connection or
  // the HELLO failed, else OK with a result per op: OK (dest holds exactly
  // `length` bytes), OBJECT_NOT_FOUND (not on that SSD, or stored with
  // another size), INVALID_PARAMS (a null dest, zero length, a key empty or
  // over 4096 bytes, a tenant over 4096 bytes; or the node refused the
  // request: no SSD read support, or over its size limit), or another error
  // code of the node's storage.
  Status ReadKeys(const std::string& endpoint,
                  const std::string& expected_node_id,
                  std::span<KeyReadOp> ops);
  // PREFETCH: asks the node to promote `keys` of `tenant` (empty = the
  // default tenant, passed through as given) from its SSD into DRAM. The
  // node only queues the work; `results` (if not null) gets one code per key:
  // OK = accepted, OBJECT_NOT_FOUND = not on that node's SSD, INVALID_PARAMS
  // = a key empty or over 4096 bytes (never sent), or another code of the
  // node. The call returns
  //  - UNAVAILABLE_IN_CURRENT_STATUS (and every result too) when the node
  //    does not serve PREFETCH (an older or SSD-less node): the caller can
  //    treat it as a no-op; the connection stays pooled;
  //  - TRANSFER_FAIL (every result too) as Read does;
  //  - INVALID_PARAMS (every result too) for a bad node id or a tenant over
  //    4096 bytes;
  //  - else OK.
  // `tokens` (if not null) holds the master's grant for each key (the
  // LOCAL_DISK replica's disk_capability); a node that enforces
  // capabilities answers ILLEGAL_CLIENT for a key without one.
  // `for_next_get` (a get's kick) sends PREFETCH_FOR_NEXT_GET: the
  // promotions are for the next get of each key (docs/data_plane.md).
  Status Prefetch(const std::string& endpoint,
                  const std::string& expected_node_id,
                  const std::string& tenant,
                  const std::vector<std::string>& keys,
                  std::vector<ErrorCode>* results,
                  const std::vector<std::string>* tokens = nullptr,
                  bool for_next_get = false);
  // Drops pooled connections to `endpoint`, whatever node they were opened
  // for (e.g. after the node died).
  void Forget(const std::string& endpoint);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_H_
