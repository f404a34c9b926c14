// Internal to the TCP data server (tcp_data_server*.cc): TcpDataServer::Impl
// and what its files share. The class is implemented in five files, one
// concern each:
//   tcp_data_server.cc              options, Start/Stop, capability keys
//   tcp_data_server_connections.cc  accept loop, connection limit, idle sweep
//   tcp_data_server_session.cc      one connection's frame loop: TLS, HELLO,
//                                   header checks, refusals
//   tcp_data_server_ranges.cc       READ and WRITE frames
//   tcp_data_server_keys.cc         SSD_READ and PREFETCH frames
// A session's coroutines are templates over its stream (plain TCP or TLS);
// the file that defines one instantiates it for both.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_SERVER_IMPL_H_
#define KVPOOL_TRANSPORT_TCP_DATA_SERVER_IMPL_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/capability.h"
#include "common/clock.h"
#include "transport/blocking_pool.h"
#include "transport/byte_budget.h"
#include "transport/tcp_data_server.h"
#include "transport/wire_format.h"
#include "transport/write_order.h"

namespace kvpool {
namespace data_server {

using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;

// Completion condition for every async_read/async_write of a session. Asio's
// default (transfer_all) moves at most 64 KiB per system call: a 4 MiB reply
// took 64 sendmsg calls and as many passes through the scheduler, and even a
// 64 KiB reply (plus its header) took two. This lets each call move all that
// is left; the kernel takes what fits.
struct TransferWhole {
  size_t operator()(const asio::error_code& ec, size_t) const {
    return ec ? 0 : size_t{1} << 30;
  }
};
// Payload of a rejected WRITE op is drained through this much scratch.
inline constexpr size_t kDiscardChunk = 256 << 10;
// A request op that goes to no handler (SessionState::handler_index).
inline constexpr uint32_t kNoOp = ~uint32_t{0};
// Request buffers bigger than this are given back after the request, so an
// idle connection holds little memory outside the budget.
inline constexpr size_t kKeepRequestBytes = 64 << 10;

// What the accept loop and the idle sweeper know of a session. `socket` is
// touched only on the session's own executor (closing is posted there).
struct SessionSlot {
  tcp::socket* socket = nullptr;
  asio::any_io_executor ex;
  std::atomic<int64_t> last_active_ms{0};
  std::atomic<bool> between_frames{true};  // waiting for a request header
  std::atomic<bool> busy{false};           // a handler works for it
  std::atomic<bool> closing{false};
  bool alive = true;  // the session's executor only
};
using SessionList = std::list<std::shared_ptr<SessionSlot>>;

inline int64_t SteadyNowMs() { return SystemClock::Default()->NowMs(); }

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
// AllocateIoMemory's memory (common/io_memory.h: 4096-aligned, for O_DIRECT
// reads).
using SsdReadBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// The TCP socket under a session's stream: what the idle sweeper and
// eviction close, and what shutdown and peer names go through.
inline tcp::socket& Lowest(tcp::socket& s) { return s; }
inline tcp::socket& Lowest(TlsStream& s) { return s.next_layer(); }

// "address:port" of the peer, or "?" once it is gone.
inline std::string PeerName(tcp::socket& socket) {
  asio::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}
inline std::string PeerName(TlsStream& stream) {
  return PeerName(Lowest(stream));
}

}  // namespace data_server

// Everything the public TcpDataServer promises (tcp_data_server.h) is done
// here. Setters and Start/Stop are serialised by mu_; SetCapabilityKey and
// the stats are safe from any thread; each session runs on the I/O thread
// its connection was given at accept.
class TcpDataServer::Impl {
 public:
  Impl(const SegmentTable* segments, std::string node_id,
       const TcpDataServerOptions& options);
  ~Impl() { Stop(); }

  void SetSsdReadHandler(SsdReadHandler handler);
  void SetPrefetchHandler(PrefetchHandler handler);
  void SetWriteGuard(WriteGuard guard);
  void SetMetrics(MetricsRegistry* metrics);
  void SetCapabilityKey(std::shared_ptr<const cap::Key> key);

  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_.load(std::memory_order_relaxed); }
  const std::string& node_id() const { return node_id_; }
  const TcpDataServerStats& stats() const { return stats_; }
  size_t write_record_intervals() const {
    return write_order_.interval_count();
  }

 private:
  using tcp = data_server::tcp;
  using TlsStream = data_server::TlsStream;
  using SessionSlot = data_server::SessionSlot;
  using SessionList = data_server::SessionList;

  // Per-connection buffers, reused across requests. Lives in the session's
  // coroutine frame, so buffers handed to Asio stay put.
  struct SessionState {
    explicit SessionState(ByteBudget* budget)
        : request_hold(budget), ssd_hold(budget) {}
    uint8_t header[wire::kHeaderSize];
    // When the current request's header arrived (for the request metrics).
    std::chrono::steady_clock::time_point request_start;
    BudgetHold request_hold;  // this request's descriptors or body
    BudgetHold ssd_hold;      // ssd_buffer
    bool greeted = false;     // a HELLO naming this node was accepted
    std::vector<uint8_t> ranges_raw;
    std::vector<wire::Range> ranges;
    std::vector<uint8_t*> targets;  // resolved segment memory, null = rejected
    // The segments `targets` point into, held until the request's bytes
    // have moved: a segment taken back meanwhile (RemoveAndWait) waits.
    SegmentTable::Pins pins;
    std::vector<ErrorCode> range_codes;  // why a range was rejected
    // WRITE: the ops to order by generation (and which range each is), and
    // the pass that keeps the admitted ones in flight until copied.
    std::vector<WriteOrder::Op> order_ops;
    std::vector<uint32_t> order_index;
    WriteOrder::Pass write_pass;
    std::vector<uint8_t> response;  // response header + result codes
    std::vector<asio::const_buffer> out;
    std::vector<asio::mutable_buffer> in;
    std::unique_ptr<uint8_t[]> scratch;
    // SSD_READ and PREFETCH.
    std::vector<uint8_t> body;            // the request body
    std::vector<ErrorCode> codes;         // per request op, in wire order
    std::vector<uint32_t> handler_index;  // request op -> handler op, or kNoOp
    std::vector<KeyReadOp> key_ops;       // ops handed to the SSD read handler
    std::vector<uint64_t> key_lengths;    // their lengths as requested
    std::vector<uint64_t> key_offsets;    // their slots in ssd_buffer
    uint64_t ssd_buffer_size = 0;
    data_server::SsdReadBuffer ssd_buffer;
    size_t ssd_buffer_capacity = 0;  // kept across requests of this session
    std::string tenant;
    std::vector<std::string> keys;
  };

  // The key and which one it is (`epoch` grows whenever its bytes change).
  struct CapState {
    std::shared_ptr<const cap::Key> key;
    uint64_t epoch = 0;
  };

  // --- tcp_data_server.cc: start-up.
  // The TLS context of tls_cert_file_ and tls_key_file_ (null when both
  // are empty).
  Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext() const;
  // Binds and listens on host:port with the first context.
  Result<std::unique_ptr<tcp::acceptor>> Listen(asio::io_context& io,
                                                const std::string& host,
                                                uint16_t port);
  // The key to check tokens with, or null to check nothing; *locked when
  // every op is to be refused. *epoch (if given): which key it is, for
  // write_order_.
  std::shared_ptr<const cap::Key> CapKey(bool* locked,
                                         uint64_t* epoch = nullptr) const {
    *locked = cap_locked_.load();
    if (*locked) return nullptr;
    const std::shared_ptr<const CapState> st = cap_state_.load();
    if (!st) return nullptr;
    if (epoch != nullptr) *epoch = st->epoch;
    return st->key;
  }

  // --- tcp_data_server_connections.cc: connections.
  asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  // Closes sessions that have done nothing for idle_timeout_ms.
  asio::awaitable<void> SweepIdle();
  // Whether a new connection may be served: under the limit, or once the
  // session idle the longest has been told to close.
  bool Admit();
  void CloseSession(const std::shared_ptr<SessionSlot>& slot);
  size_t ClosingSessions() {
    std::lock_guard lock(sessions_mu_);
    return closing_sessions_;
  }
  // Logs at most one line per 10 s per kind, with how many it swallowed.
  void WarnLimited(std::atomic<int64_t>* last_ms, std::atomic<uint64_t>* held,
                   const std::string& what);

  // --- tcp_data_server_session.cc: one connection.
  // `slot` is the session's entry in sessions_, at `where`.
  template <typename Stream>
  asio::awaitable<void> Serve(Stream socket, std::shared_ptr<SessionSlot> slot,
                              SessionList::iterator where);
  // The TLS handshake, bounded by tls_handshake_timeout_. False (the socket
  // closed, the failure counted and logged) if it failed.
  asio::awaitable<bool> TlsHandshake(TlsStream& socket,
                                     const std::shared_ptr<SessionSlot>& slot);
  // Answers the HELLO whose header is `h`. Returns false when the session
  // must end (I/O error, or the client expects another node: then the
  // socket is already closed).
  template <typename Stream>
  asio::awaitable<bool> Greet(Stream& socket, const wire::Header& h,
                              SessionState& st);
  // Counts and logs a malformed frame and closes the connection.
  void BadFrame(tcp::socket& socket, const char* why);
  // Reads and discards the body of an op this server does not serve, then
  // answers it with a frame-level INVALID_PARAMS. False if the session ends.
  template <typename Stream>
  asio::awaitable<bool> RefuseOp(Stream& socket, const wire::Header& h,
                                 SessionState& st,
                                 ErrorCode code = ErrorCode::INVALID_PARAMS);
  // A request the budget has no room for: counted, logged (rate-limited),
  // its body discarded and every op answered NO_AVAILABLE_HANDLE.
  template <typename Stream>
  asio::awaitable<bool> RefuseOverBudget(Stream& socket, const wire::Header& h,
                                         SessionState& st);

  // --- tcp_data_server_ranges.cc: READ and WRITE. Each returns false if
  // the session must end.
  // From the header on: reads the ranges, resolves them and serves the op.
  template <typename Stream>
  asio::awaitable<bool> ServeRanges(Stream& socket, const wire::Header& h,
                                    SessionSlot& slot, SessionState& st);
  template <typename Stream>
  asio::awaitable<bool> ServeRead(Stream& socket, const wire::Header& h,
                                  SessionState& st);
  template <typename Stream>
  asio::awaitable<bool> ServeWrite(Stream& socket, const wire::Header& h,
                                   SessionState& st);
  // Suspends the session until the older writes that overlap st.write_pass
  // have finished copying.
  asio::awaitable<void> WaitForOlderWrites(SessionSlot& slot, SessionState& st);
  // Resolves each of the ranges in st.ranges_raw against the segment table
  // and fills in per-op result codes; for a WRITE, admits the ops by
  // generation into write_order_ (st.write_pass). Returns a reason when the
  // frame is malformed.
  const char* ResolveRanges(const wire::Header& h, SessionState& st);
  // WRITE ops with a verified token, in write generation order: refuses the
  // stale ones (INVALID_WRITE) and records the others.
  void OrderWrites(uint64_t epoch, SessionState& st, uint64_t* rejected);
  // The response to `h` in st.response: `status` and, when it is OK, a
  // result code per range (OK for the ranges in st.targets).
  void PrepareResponse(const wire::Header& h, ErrorCode status,
                       uint64_t data_len, SessionState& st);

  // --- tcp_data_server_keys.cc: SSD_READ and PREFETCH. Each returns false
  // if the session must end.
  // From the header on: reads the body within the limits and the budget,
  // and serves the op.
  template <typename Stream>
  asio::awaitable<bool> ServeKeys(Stream& socket, const wire::Header& h,
                                  SessionSlot& slot, SessionState& st);
  // Once their body is in st.body.
  template <typename Stream>
  asio::awaitable<bool> ServeSsdRead(Stream& socket, const wire::Header& h,
                                     SessionState& st);
  template <typename Stream>
  asio::awaitable<bool> ServePrefetch(Stream& socket, const wire::Header& h,
                                      SessionState& st);
  // Parses an SSD_READ body into st (key_ops and the maps around them).
  // Returns a reason when the frame is malformed; *refusal is set to
  // INVALID_PARAMS when it is well formed but over the server's limits.
  const char* ParseSsdRead(const wire::Header& h, SessionState& st,
                           ErrorCode* refusal);
  // Parses a PREFETCH body into st (tenant, keys and the map to them).
  // Returns a reason when the frame is malformed.
  const char* ParsePrefetch(const wire::Header& h, SessionState& st);
  // On an SSD read thread: allocates the buffer and runs the handler.
  void RunSsdRead(SessionState& st);
  // Once the handler has run: the result codes and, in st.out, the reply
  // gathered from st.response and the values read. Returns the values'
  // bytes.
  uint64_t PrepareSsdReadReply(const wire::Header& h, SessionState& st);
  // Runs the prefetch handler on st.keys and sets st.codes from it.
  void RunPrefetch(const wire::Header& h, SessionState& st);
  // A status-0 response whose result codes are st.codes.
  void PrepareCodesResponse(const wire::Header& h, uint64_t data_len,
                            SessionState& st);

  const SegmentTable* const segments_;
  const std::string node_id_;
  const int io_threads_;
  const int ssd_read_threads_;
  const uint64_t max_ssd_read_bytes_;
  const int64_t capability_skew_ms_;
  // Null, or a null key: capabilities are not enforced (no master has given
  // this node a key yet, or an older master that does not sign). Swapped at
  // a mount.
  std::atomic<std::shared_ptr<const CapState>> cap_state_;
  std::mutex cap_mu_;  // serialises SetCapabilityKey
  std::atomic<bool> cap_locked_;
  // The newest write generation that has written each range (WRITE tokens
  // carry it), and the writes still copying.
  WriteOrder write_order_;
  const size_t max_connections_;
  const int64_t idle_timeout_ms_;
  const uint64_t max_key_frame_body_;
  ByteBudget budget_;
  const std::string tls_cert_file_, tls_key_file_;
  const std::chrono::milliseconds tls_handshake_timeout_;
  // Set by Start when TLS is configured; shared by every session (an
  // SSL_CTX is safe to use from several threads once set up).
  std::unique_ptr<asio::ssl::context> tls_;
  std::mutex sessions_mu_;
  SessionList sessions_;
  size_t closing_sessions_ = 0;  // in sessions_, told to close
  std::atomic<int64_t> last_limit_log_ms_{0}, last_budget_log_ms_{0};
  std::atomic<uint64_t> limit_log_held_{0}, budget_log_held_{0};
  std::atomic<int64_t> last_accept_log_ms_{0}, last_tls_log_ms_{0};
  std::atomic<uint64_t> tls_log_held_{0};
  std::atomic<uint64_t> accept_log_held_{0};
  TcpDataServerStats stats_;
  // Set before Start, read-only after; null handles until SetMetrics.
  enum RequestKind { kReadRequest = 0, kWriteRequest = 1, kSsdReadRequest = 2 };
  struct RequestMetrics {
    Histogram* duration[3] = {nullptr, nullptr, nullptr};
    Histogram* bytes[3] = {nullptr, nullptr, nullptr};
  } request_metrics_;
  void ObserveRequest(RequestKind kind, const SessionState& st,
                      uint64_t bytes) const {
    if (request_metrics_.duration[kind] == nullptr) return;
    request_metrics_.duration[kind]->ObserveSince(st.request_start);
    request_metrics_.bytes[kind]->Observe(static_cast<double>(bytes));
  }
  std::atomic<uint16_t> port_{0};
  // Set before Start, read-only while serving.
  SsdReadHandler ssd_read_handler_;
  PrefetchHandler prefetch_handler_;
  WriteGuard write_guard_;

  std::mutex mu_;  // serialises Start, Stop and the handler setters
  // One context per I/O thread, each connection pinned to one of them (round
  // robin at accept): a request is read, served and answered by the thread
  // whose epoll saw it. With one context shared by several threads, Asio
  // hands the reactor to another thread at every event, and on a small
  // machine that wake-up was a third of a 64 KiB get's round trip.
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  size_t next_io_ = 0;  // accept loop only
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::vector<std::thread> threads_;
  // Runs the SSD read handler; exists while serving if that handler is set.
  std::unique_ptr<BlockingPool> ssd_pool_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_TCP_DATA_SERVER_IMPL_H_
