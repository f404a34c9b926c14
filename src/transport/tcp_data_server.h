// The node's TCP data server (standalone Asio): serves batched READ and
// WRITE of ranges of the segments in a SegmentTable and, when the node sets
// handlers for them, SSD_READ (values by key from the node's SSD) and
// PREFETCH (promote keys from SSD to DRAM). See docs/data_plane.md for the
// frame format. Every connection starts with a HELLO in which the
// client names the node it expects; the server serves it only if that is its
// own node id, so a client that reaches a different process on a reused
// port is refused instead of served the wrong segment's bytes. Every range
// is bounds-checked against its segment; a malformed frame closes the
// connection without touching memory. With capabilities on, a WRITE whose
// token's generation is older than one that has written its range already
// is refused (transport/write_order.h).
#ifndef KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_
#define KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/capability.h"
#include "common/metrics.h"
#include "kvpool/status.h"
#include "transport/data_plane_types.h"
#include "transport/segment_table.h"

namespace kvpool {

struct TcpDataServerStats {
  std::atomic<uint64_t> bytes_read{0};     // bytes sent to readers
  std::atomic<uint64_t> bytes_written{0};  // bytes received from writers
  std::atomic<uint64_t> bad_frames{0};
  std::atomic<uint64_t> rejected_ranges{0};
  // HELLOs that named another node (the connection was refused and closed).
  std::atomic<uint64_t> identity_mismatches{0};
  // Bytes of successful SSD_READ ops sent to readers.
  std::atomic<uint64_t> ssd_bytes_read{0};
  // Keys handed to the prefetch handler.
  std::atomic<uint64_t> prefetch_keys{0};
  // Ranges and keys refused for a missing, forged, foreign-op or expired
  // capability token.
  std::atomic<uint64_t> capability_refusals{0};
  // WRITE ops the write guard refused (a valid token, a complete value).
  std::atomic<uint64_t> write_guard_refusals{0};
  // WRITE ops refused because a newer write grant has written part of their
  // range (a valid token of a value whose range was given to another since).
  std::atomic<uint64_t> write_generation_refusals{0};
  // WRITE requests that waited for an older write of an overlapping range
  // to finish copying before copying their own bytes.
  std::atomic<uint64_t> write_generation_waits{0};
  // Connections closed at once because every slot was busy, connections
  // closed to make room for a new one (the longest idle first), and
  // connections closed for doing nothing for idle_timeout_ms.
  std::atomic<uint64_t> connections_refused{0};
  std::atomic<uint64_t> connections_evicted{0};
  std::atomic<uint64_t> idle_closed{0};
  // Requests refused (NO_AVAILABLE_HANDLE) because requests in flight held
  // all of max_buffered_bytes.
  std::atomic<uint64_t> budget_refusals{0};
  // TLS connections whose handshake failed or timed out (closed).
  std::atomic<uint64_t> tls_handshake_failures{0};
};

struct TcpDataServerOptions {
  int io_threads = 2;
  // Threads that run the SSD read handler (blocking disk I/O), so that it
  // never holds up an I/O thread. Started only if that handler is set.
  int ssd_read_threads = 2;
  // An SSD_READ whose buffer (each op's length rounded up to 4096, summed)
  // would exceed this is refused as a whole with INVALID_PARAMS.
  uint64_t max_ssd_read_bytes = uint64_t{256} << 20;
  // Grace (ms) past a token's expiry before it is refused: the bound on how
  // far this node's wall clock may lag the master's. The master gives a
  // freed range out again only after every token for it has expired, so a
  // grace longer than the real clock offset reopens that window.
  int64_t capability_clock_skew_ms = 0;
  // Refuse every op (ILLEGAL_CLIENT) until SetCapabilityKey is called, so
  // nothing is served unchecked between Start and the first mount. Off:
  // serve unchecked until a key is set (tests of the frame layer).
  bool require_capabilities = false;
  // Connections served at once (0 = the open-file limit less 256, at most
  // 16384). At the limit a new connection closes the one idle the longest;
  // with none idle it is closed at once.
  size_t max_connections = 0;
  // A connection that completes no read or write for this long is closed
  // (0 = never); a request whose handler is still working is not idle.
  int64_t idle_timeout_ms = 60000;
  // Largest SSD_READ or PREFETCH body a connection may announce (at most
  // wire::kMaxKeyFrameBody); a bigger header closes the connection before
  // anything is allocated.
  uint64_t max_key_frame_body = uint64_t{8} << 20;
  // Bytes all requests in flight may hold at once: descriptor lists,
  // request bodies, SSD read buffers (never WRITE payloads or READ
  // replies, which move straight between socket and segment).
  uint64_t max_buffered_bytes = uint64_t{1} << 30;
  // PEM certificate chain and private key: with both set, every connection
  // must complete a TLS handshake within tls_handshake_timeout_ms before its
  // HELLO, and all its frames travel inside TLS. Both empty: plaintext. One
  // alone, or a file that does not load, fails Start.
  std::string tls_cert_file;
  std::string tls_key_file;
  int64_t tls_handshake_timeout_ms = 5000;
};

// Serves the ops of one SSD_READ request. Each op's `dest` is 4096-aligned
// and has room for `length` rounded up to 4096; the handler fills it and
// sets `result` (OK means `dest` holds exactly `length` bytes: the value's
// size). A result left unset reads as INTERNAL_ERROR. Runs on the server's
// SSD read threads, may block, may run concurrently with itself.
using SsdReadHandler = std::function<void(std::span<KeyReadOp> ops)>;
// Accepts the keys of one PREFETCH request for promotion to DRAM and returns
// one code per key (OK = accepted, e.g. OBJECT_NOT_FOUND = not here); a
// missing code reads as INTERNAL_ERROR. Runs on an I/O thread: it must only
// enqueue work and return quickly.
// `for_next_get`: the request came as PREFETCH_FOR_NEXT_GET (a get's kick).
using PrefetchHandler = std::function<std::vector<ErrorCode>(
    const std::string& tenant, const std::vector<std::string>& keys,
    bool for_next_get)>;
// Whether a WRITE of [offset, offset+length) of a segment, already allowed
// by its capability, may land: false refuses the op with INVALID_WRITE (the
// node knows a complete value there). Runs on an I/O thread; must be quick.
using WriteGuard =
    std::function<bool(uint64_t segment_id, uint64_t offset, uint64_t length)>;

class TcpDataServer {
 public:
  // `segments` must outlive the server. `node_id` is the identity clients
  // must name in their HELLO: 1 to 256 bytes (Start fails otherwise), unique
  // among the nodes any client may talk to.
  TcpDataServer(const SegmentTable* segments, std::string node_id,
                int io_threads = 2);
  TcpDataServer(const SegmentTable* segments, std::string node_id,
                const TcpDataServerOptions& options);
  ~TcpDataServer();
  // Handlers of SSD_READ and PREFETCH; set them before Start (later calls
  // are ignored with an error log). Without one, the server answers that op
  // with a frame-level INVALID_PARAMS and keeps the connection.
  void SetSsdReadHandler(SsdReadHandler handler);
  void SetPrefetchHandler(PrefetchHandler handler);
  // Before Start, like the handlers; none by default.
  void SetWriteGuard(WriteGuard guard);
  // Before Start: histograms of each READ, WRITE and SSD_READ request, from
  // its header to its reply, and of its data bytes, in `metrics` (which
  // must outlive the server): kvpool_node_data_request_duration_seconds and
  // kvpool_node_data_request_bytes, label op. None by default.
  void SetMetrics(MetricsRegistry* metrics);
  // The key the master shares with this node for capability tokens
  // (common/capability.h). Once set, every READ, WRITE, SSD_READ and
  // PREFETCH op needs a token that verifies under it; null serves every op
  // unchecked (a node does so only for a master too old to sign). Any
  // time, thread-safe: a remount swaps it and requests in flight finish
  // under the old one. A key of other bytes than the current one also
  // forgets the write generations recorded under the old one (WRITE tokens
  // are ordered by their generation: transport/write_order.h).
  void SetCapabilityKey(std::shared_ptr<const cap::Key> key);
  // Binds host:port (port 0 = any free port) and starts serving.
  Status Start(const std::string& host, uint16_t port);
  // Closes the acceptor and every connection, joins the threads. Idempotent.
  void Stop();
  uint16_t port() const;
  const std::string& node_id() const;
  const TcpDataServerStats& stats() const;
  // Ranges in the record of write generations, over all segments (bounded
  // by the ranges written since the key last changed; tests, metrics).
  size_t write_record_intervals() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_SERVER_H_
