#include "transport/tcp_data_server.h"
#include "common/clock.h"
#include "common/thread_name.h"

#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <algorithm>
#include <array>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/aligned_buffer.h"
#include "transport/wire_format.h"
#include "transport/write_order.h"

namespace kvpool {
namespace {

using asio::ip::tcp;

// Large socket buffers let a multi-MiB response stream without stalling on
// window updates. Set on the listening socket so accepted sockets inherit
// them before the handshake and the window scale is negotiated accordingly.
constexpr int kSocketBufferBytes = 4 << 20;

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
constexpr size_t kDiscardChunk = 256 << 10;
constexpr uint32_t kNoOp = ~uint32_t{0};
// Request buffers bigger than this are given back after the request, so an
// idle connection holds little memory outside the budget.
constexpr size_t kKeepRequestBytes = 64 << 10;

// Clang before 15 cannot evaluate the options (they hold std::strings) at
// compile time; GCC builds keep the check.
#if !defined(__clang__) || __clang_major__ >= 15
static_assert(TcpDataServerOptions{}.max_ssd_read_bytes ==
              wire::kDefaultMaxSsdReadBytes);
#endif

// Bytes that requests in flight hold in server memory (descriptor lists,
// SSD_READ and PREFETCH bodies, SSD read buffers), across all sessions: a
// request that would take it past its cap is refused, so a crowd of clients
// announcing big requests cannot make the node allocate without bound.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}
  bool TryAcquire(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > cap_ || used > cap_ - n) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    return true;
  }
  void Release(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

// Bytes one session holds of a ByteBudget; gives them back when reset or
// destroyed (a session that ends mid-request included).
class BudgetHold {
 public:
  explicit BudgetHold(ByteBudget* budget) : budget_(budget) {}
  ~BudgetHold() { Reset(); }
  BudgetHold(const BudgetHold&) = delete;
  BudgetHold& operator=(const BudgetHold&) = delete;
  // Holds `n` bytes in all (more or fewer than now); false, holding what it
  // held, if the budget has no room.
  bool Resize(uint64_t n) {
    if (n > held_) {
      if (!budget_->TryAcquire(n - held_)) return false;
    } else {
      budget_->Release(held_ - n);
    }
    held_ = n;
    return true;
  }
  void Reset() { Resize(0); }

 private:
  ByteBudget* const budget_;
  uint64_t held_ = 0;
};

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

int64_t SteadyNowMs() { return SystemClock::Default()->NowMs(); }

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

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// A few threads that run blocking jobs (the SSD read handler) in FIFO
// order, so that disk I/O never occupies an I/O thread. Each connection has
// at most one job queued or running (its requests are sequential), and a
// queued job holds only its parsed descriptors: its data buffer is
// allocated when a thread picks it up.
class BlockingPool {
 public:
  explicit BlockingPool(int threads) {
    for (int i = 0; i < std::max(threads, 1); ++i) {
      threads_.emplace_back([this] {
        SetThreadName("kvp-data-blk");
        Loop();
      });
    }
  }
  ~BlockingPool() { Stop(); }

  void Submit(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;  // the job (and what it owns) is dropped
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  // Lets running jobs finish, drops queued ones, joins the threads.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard lock(mu_);
      dropped.swap(jobs_);
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
};

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
    case wire::Op::kPrefetch:
      // The body's structure is checked once it has been read.
      if (h.body_len > wire::kMaxKeyFrameBody) return "body over limit";
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

// Reads a u32 length and that many bytes at `*pos` of `body`, advancing
// `*pos`. False if the body ends first.
bool TakeLengthPrefixed(const std::vector<uint8_t>& body, size_t* pos,
                        std::string* out) {
  if (body.size() - *pos < wire::kLenPrefixSize) return false;
  const uint32_t len = wire::GetLe<uint32_t>(body.data() + *pos);
  *pos += wire::kLenPrefixSize;
  if (body.size() - *pos < len) return false;
  out->assign(reinterpret_cast<const char*>(body.data() + *pos), len);
  *pos += len;
  return true;
}

using TlsStream = asio::ssl::stream<tcp::socket>;

// The TCP socket under a session's stream: what the idle sweeper and
// eviction close, and what shutdown and peer names go through.
tcp::socket& Lowest(tcp::socket& s) { return s; }
tcp::socket& Lowest(TlsStream& s) { return s.next_layer(); }

template <typename Stream>
std::string PeerName(Stream& stream) {
  asio::error_code ec;
  auto ep = Lowest(stream).remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace

class TcpDataServer::Impl {
 public:
  Impl(const SegmentTable* segments, std::string node_id,
       const TcpDataServerOptions& options)
      : segments_(segments),
        node_id_(std::move(node_id)),
        io_threads_(options.io_threads > 0 ? options.io_threads : 1),
        ssd_read_threads_(
            options.ssd_read_threads > 0 ? options.ssd_read_threads : 1),
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
  ~Impl() { Stop(); }

  void SetSsdReadHandler(SsdReadHandler handler);
  void SetPrefetchHandler(PrefetchHandler handler);
  void SetWriteGuard(WriteGuard guard) {
    std::lock_guard lock(mu_);
    if (!ios_.empty()) {
      spdlog::error("data server {}: write guard set after Start, ignored",
                    node_id_);
      return;
    }
    write_guard_ = std::move(guard);
  }
  void SetCapabilityKey(std::shared_ptr<const cap::Key> key) {
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

  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_.load(std::memory_order_relaxed); }
  const std::string& node_id() const { return node_id_; }
  const TcpDataServerStats& stats() const { return stats_; }
  size_t write_record_intervals() const {
    return write_order_.interval_count();
  }

 private:
  // Per-connection buffers, reused across requests. Lives in the session's
  // coroutine frame, so buffers handed to Asio stay put.
  struct SessionState {
    explicit SessionState(ByteBudget* budget)
        : request_hold(budget), ssd_hold(budget) {}
    uint8_t header[wire::kHeaderSize];
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
    AlignedBuffer ssd_buffer;
    size_t ssd_buffer_capacity = 0;  // kept across requests of this session
    std::string tenant;
    std::vector<std::string> keys;
  };

  asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  // `slot` is the session's entry in sessions_, at `where`.
  template <typename Stream>
  asio::awaitable<void> Serve(
      Stream socket, std::shared_ptr<SessionSlot> slot,
      std::list<std::shared_ptr<SessionSlot>>::iterator where);
  // Closes sessions that have done nothing for idle_timeout_ms.
  asio::awaitable<void> SweepIdle();
  // Whether a new connection may be served: under the limit, or once the
  // session idle the longest has been told to close.
  bool Admit();
  void CloseSession(const std::shared_ptr<SessionSlot>& slot);
  // Logs at most one line per 10 s per kind, with how many it swallowed.
  void WarnLimited(std::atomic<int64_t>* last_ms, std::atomic<uint64_t>* held,
                   const std::string& what);
  // Answers the HELLO whose header is `h`. Returns false when the session
  // must end (I/O error, or the client expects another node: then the
  // socket is already closed).
  template <typename Stream>
  asio::awaitable<bool> Greet(Stream& socket, const wire::Header& h,
                              SessionState& st);
  // Reads the ranges, resolves each against the segment table and fills in
  // per-op result codes; for a WRITE, admits the ops by generation into
  // write_order_ (st.write_pass). Returns a reason when the frame is
  // malformed.
  const char* ResolveRanges(const wire::Header& h, SessionState& st);
  // WRITE ops with a verified token, in write generation order: refuses the
  // stale ones (INVALID_WRITE) and records the others.
  void OrderWrites(uint64_t epoch, SessionState& st, uint64_t* rejected);
  void PrepareResponse(const wire::Header& h, ErrorCode status,
                       uint64_t data_len, SessionState& st);
  // A status-0 response whose result codes are st.codes.
  void PrepareCodesResponse(const wire::Header& h, uint64_t data_len,
                            SessionState& st);
  template <typename Stream>
  void BadFrame(Stream& socket, const char* why);
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
  // SSD_READ and PREFETCH, once their body is in st.body. False if the
  // session must end.
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
  // On an SSD read thread: allocates the buffer and runs the handler.
  void RunSsdRead(SessionState& st);

  const SegmentTable* const segments_;
  const std::string node_id_;
  const int io_threads_;
  const int ssd_read_threads_;
  const uint64_t max_ssd_read_bytes_;
  const int64_t capability_skew_ms_;
  // The key and which one it is (`epoch` grows whenever its bytes change).
  struct CapState {
    std::shared_ptr<const cap::Key> key;
    uint64_t epoch = 0;
  };
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
  std::list<std::shared_ptr<SessionSlot>> sessions_;
  size_t closing_sessions_ = 0;  // in sessions_, told to close
  std::atomic<int64_t> last_limit_log_ms_{0}, last_budget_log_ms_{0};
  std::atomic<uint64_t> limit_log_held_{0}, budget_log_held_{0};
  std::atomic<int64_t> last_accept_log_ms_{0}, last_tls_log_ms_{0};
  std::atomic<uint64_t> tls_log_held_{0};
  std::atomic<uint64_t> accept_log_held_{0};
  size_t ClosingSessions() {
    std::lock_guard lock(sessions_mu_);
    return closing_sessions_;
  }
  TcpDataServerStats stats_;
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
  if (tls_cert_file_.empty() != tls_key_file_.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "data server TLS needs both a certificate and a key file");
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (!tls_cert_file_.empty()) {
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
  }
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (int i = 0; i < io_threads_; ++i) {
    ios.push_back(std::make_unique<asio::io_context>(1));
  }
  asio::io_context* io = ios.front().get();
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

  if (ssd_read_handler_) {
    ssd_pool_ = std::make_unique<BlockingPool>(ssd_read_threads_);
  }
  tls_ = std::move(tls);
  asio::co_spawn(*io, AcceptLoop(*acceptor), asio::detached);
  if (idle_timeout_ms_ > 0) asio::co_spawn(*io, SweepIdle(), asio::detached);
  ios_ = std::move(ios);
  acceptor_ = std::move(acceptor);
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

asio::awaitable<void> TcpDataServer::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  for (;;) {
    asio::error_code ec;
    // Sessions told to close still hold their descriptors: let them go
    // before taking more, or a flood of connections runs the process out
    // of file descriptors faster than evictions free them.
    while (ClosingSessions() > 32) {
      asio::steady_timer pause(acceptor.get_executor(),
                               std::chrono::milliseconds(1));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!acceptor.is_open()) co_return;
    }
    asio::io_context& home = *ios_[next_io_];
    next_io_ = (next_io_ + 1) % ios_.size();
    tcp::socket socket = co_await acceptor.async_accept(
        home, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
        co_return;
      }
      // Typically EMFILE: back off instead of spinning on the same error.
      WarnLimited(&last_accept_log_ms_, &accept_log_held_,
                  "accept failed: " + ec.message() +
                      " (retrying every 50 ms; new clients wait meanwhile)");
      asio::steady_timer timer(acceptor.get_executor(),
                               std::chrono::milliseconds(50));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (!Admit()) {
      stats_.connections_refused.fetch_add(1, std::memory_order_relaxed);
      WarnLimited(&last_limit_log_ms_, &limit_log_held_,
                  "at its limit of " + std::to_string(max_connections_) +
                      " connections, all busy: refusing new ones");
      socket.close(ec);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    // Detects peers that vanished mid-frame so their sessions do not linger.
    socket.set_option(asio::socket_base::keep_alive(true), ec);
    // Registered here, not when the session starts running, so the next
    // accept already counts it.
    auto slot = std::make_shared<SessionSlot>();
    slot->ex = socket.get_executor();
    slot->last_active_ms.store(SteadyNowMs());
    std::list<std::shared_ptr<SessionSlot>>::iterator where;
    {
      std::lock_guard lock(sessions_mu_);
      where = sessions_.insert(sessions_.end(), slot);
    }
    auto ex = socket.get_executor();
    if (tls_) {
      asio::co_spawn(
          ex,
          Serve(TlsStream(std::move(socket), *tls_), std::move(slot), where),
          asio::detached);
    } else {
      asio::co_spawn(ex, Serve(std::move(socket), std::move(slot), where),
                     asio::detached);
    }
  }
}

bool TcpDataServer::Impl::Admit() {
  std::shared_ptr<SessionSlot> victim;
  {
    std::lock_guard lock(sessions_mu_);
    if (sessions_.size() - closing_sessions_ < max_connections_) return true;
    // The session idle the longest makes room: a crowd of idle sockets
    // cannot lock new clients out, it only shortens its own members' lives.
    int64_t oldest = INT64_MAX;
    for (const auto& slot : sessions_) {
      if (slot->closing.load() || slot->busy.load() ||
          !slot->between_frames.load()) {
        continue;
      }
      const int64_t t = slot->last_active_ms.load();
      if (t < oldest) {
        oldest = t;
        victim = slot;
      }
    }
    if (!victim) return false;
    victim->closing.store(true);
    ++closing_sessions_;
  }
  stats_.connections_evicted.fetch_add(1, std::memory_order_relaxed);
  WarnLimited(&last_limit_log_ms_, &limit_log_held_,
              "at its limit of " + std::to_string(max_connections_) +
                  " connections: closing the longest idle ones for new "
                  "clients");
  CloseSession(victim);
  return true;
}

void TcpDataServer::Impl::CloseSession(
    const std::shared_ptr<SessionSlot>& slot) {
  asio::post(slot->ex, [slot] {
    if (!slot->alive || slot->socket == nullptr) return;
    asio::error_code ec;
    slot->socket->shutdown(tcp::socket::shutdown_both, ec);
    slot->socket->close(ec);
  });
}

void TcpDataServer::Impl::WarnLimited(std::atomic<int64_t>* last_ms,
                                      std::atomic<uint64_t>* held,
                                      const std::string& what) {
  const int64_t now = SteadyNowMs();
  int64_t last = last_ms->load();
  if (now - last < 10000 || !last_ms->compare_exchange_strong(last, now)) {
    held->fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t swallowed = held->exchange(0);
  spdlog::warn("data server {}: {}{}", node_id_, what,
               swallowed ? " (" + std::to_string(swallowed) +
                               " more like this in the last 10 s)"
                         : std::string());
}

asio::awaitable<void> TcpDataServer::Impl::SweepIdle() {
  const auto period = std::chrono::milliseconds(
      std::clamp<int64_t>(idle_timeout_ms_ / 4, 10, 1000));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(period);
    asio::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    const int64_t now = SteadyNowMs();
    std::vector<std::shared_ptr<SessionSlot>> idle;
    {
      std::lock_guard lock(sessions_mu_);
      for (const auto& slot : sessions_) {
        if (slot->closing.load() || slot->busy.load() ||
            now - slot->last_active_ms.load() < idle_timeout_ms_) {
          continue;
        }
        slot->closing.store(true);
        ++closing_sessions_;
        idle.push_back(slot);
      }
    }
    for (const auto& slot : idle) CloseSession(slot);
    stats_.idle_closed.fetch_add(idle.size(), std::memory_order_relaxed);
  }
}

template <typename Stream>
void TcpDataServer::Impl::BadFrame(Stream& socket, const char* why) {
  stats_.bad_frames.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("data server: malformed frame from {} ({}), closing",
               PeerName(socket), why);
  asio::error_code ec;
  Lowest(socket).shutdown(tcp::socket::shutdown_both, ec);
  Lowest(socket).close(ec);
}

const char* TcpDataServer::Impl::ResolveRanges(const wire::Header& h,
                                               SessionState& st) {
  st.ranges.resize(h.count);
  st.targets.resize(h.count);
  st.range_codes.assign(h.count, ErrorCode::OK);
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
  bool locked = false;
  uint64_t epoch = 0;
  const std::shared_ptr<const cap::Key> key = CapKey(&locked, &epoch);
  const uint32_t want = static_cast<wire::Op>(h.op) == wire::Op::kRead
                            ? cap::kOpRead
                            : cap::kOpWrite;
  const int64_t now = key ? cap::WallNowMs() : 0;
  uint64_t rejected = 0, refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const wire::Range& r = st.ranges[i];
    ErrorCode code = locked ? ErrorCode::ILLEGAL_CLIENT : ErrorCode::OK;
    if (locked) ++refused;
    if (key) {
      // The token is checked first: without a grant, whether a segment id
      // exists or a range fits is not the client's business.
      code = !wire::InsideGrant(r)
                 ? ErrorCode::ILLEGAL_CLIENT
                 : key->VerifyRange(r.token, r.segment_id, r.grant_offset,
                                    r.grant_length, want, now,
                                    capability_skew_ms_);
      if (code != ErrorCode::OK) ++refused;
    }
    // A zero-length range names no bytes; rejecting it keeps "OK" meaning
    // "these bytes were moved".
    uint8_t* p =
        code != ErrorCode::OK || r.length == 0
            ? nullptr
            : segments_->Resolve(r.segment_id, r.offset, r.length, &st.pins);
    if (p != nullptr && want == cap::kOpWrite && write_guard_ &&
        !write_guard_(r.segment_id, r.offset, r.length)) {
      p = nullptr;
      code = ErrorCode::INVALID_WRITE;
      stats_.write_guard_refusals.fetch_add(1, std::memory_order_relaxed);
    }
    st.targets[i] = p;
    if (p == nullptr) {
      ++rejected;
      st.range_codes[i] =
          code != ErrorCode::OK ? code : ErrorCode::INVALID_PARAMS;
    }
  }
  // Only a verified token's generation means anything: without a key,
  // writes are not ordered.
  if (key && want == cap::kOpWrite) OrderWrites(epoch, st, &rejected);
  if (rejected > 0) {
    stats_.rejected_ranges.fetch_add(rejected, std::memory_order_relaxed);
  }
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  return nullptr;
}

void TcpDataServer::Impl::OrderWrites(uint64_t epoch, SessionState& st,
                                      uint64_t* rejected) {
  st.order_ops.clear();
  st.order_index.clear();
  bool ordered = false;
  for (uint32_t i = 0; i < st.targets.size(); ++i) {
    if (st.targets[i] == nullptr) continue;
    const wire::Range& r = st.ranges[i];
    const uint64_t generation = cap::TokenGeneration(r.token);
    ordered = ordered || generation != 0;
    st.order_ops.push_back(WriteOrder::Op{r.segment_id, r.offset, r.length,
                                          r.grant_offset, r.grant_length,
                                          generation});
    st.order_index.push_back(i);
  }
  // Tokens of a master before write generations: nothing to order, and no
  // lock taken.
  if (!ordered) return;
  st.write_pass = write_order_.Admit(epoch, st.order_ops);
  uint64_t refused = 0;
  for (size_t j = 0; j < st.order_ops.size(); ++j) {
    if (st.order_ops[j].admitted) continue;
    const uint32_t i = st.order_index[j];
    st.targets[i] = nullptr;
    st.range_codes[i] = ErrorCode::INVALID_WRITE;
    ++refused;
  }
  if (refused > 0) {
    *rejected += refused;
    stats_.write_generation_refusals.fetch_add(refused,
                                               std::memory_order_relaxed);
  }
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
        st.targets[i] != nullptr ? ErrorCode::OK : st.range_codes[i];
    wire::PutLe<uint32_t>(codes + i * wire::kResultSize,
                          static_cast<uint32_t>(ToInt(code)));
  }
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::Greet(Stream& socket,
                                                 const wire::Header& h,
                                                 SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Bounded by CheckRequestHeader (at most kMaxNodeIdSize bytes).
  std::string expected(static_cast<size_t>(h.body_len), '\0');
  co_await asio::async_read(socket, asio::buffer(expected), TransferWhole{},
                            token);
  if (ec) co_return false;
  const bool match = expected == node_id_;
  if (!match) {
    // Counted and logged before the answer goes out, so whoever sees the
    // answer also sees the count.
    stats_.identity_mismatches.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("data server {}: {} expected node '{}', refusing and closing",
                 node_id_, PeerName(socket), Printable(expected));
  }
  // A refusal does not name this node: whoever guesses wrong learns
  // nothing to guess better with.
  wire::Header rh;
  rh.op = h.op;
  rh.status = ToInt(match ? ErrorCode::OK : ErrorCode::SEGMENT_NOT_FOUND);
  rh.body_len = match ? node_id_.size() : 0;
  st.response.resize(wire::kHeaderSize);
  wire::EncodeHeader(rh, st.response.data());
  const std::array<asio::const_buffer, 2> out = {
      asio::buffer(st.response),
      asio::buffer(node_id_.data(), match ? node_id_.size() : 0)};
  co_await asio::async_write(socket, out, TransferWhole{}, token);
  if (ec) co_return false;
  if (match) {
    st.greeted = true;
    co_return true;
  }
  // The client sends nothing after its HELLO, so closing cannot reset the
  // connection before it has read the answer.
  Lowest(socket).shutdown(tcp::socket::shutdown_both, ec);
  Lowest(socket).close(ec);
  co_return false;
}

void TcpDataServer::Impl::PrepareCodesResponse(const wire::Header& h,
                                               uint64_t data_len,
                                               SessionState& st) {
  const uint32_t count = static_cast<uint32_t>(st.codes.size());
  st.response.resize(wire::kHeaderSize + size_t{count} * wire::kResultSize);
  wire::Header rh;
  rh.op = h.op;
  rh.count = count;
  rh.body_len = uint64_t{count} * wire::kResultSize + data_len;
  wire::EncodeHeader(rh, st.response.data());
  uint8_t* codes = st.response.data() + wire::kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    wire::PutLe<uint32_t>(codes + i * wire::kResultSize,
                          static_cast<uint32_t>(ToInt(st.codes[i])));
  }
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::RefuseOp(Stream& socket,
                                                    const wire::Header& h,
                                                    SessionState& st,
                                                    ErrorCode code) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Skip the body so the connection stays usable, then refuse cleanly.
  if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
  for (uint64_t left = h.body_len; left > 0;) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
    co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                              TransferWhole{}, token);
    if (ec) co_return false;
    left -= n;
  }
  PrepareResponse(h, code, 0, st);
  co_await asio::async_write(socket, asio::buffer(st.response), TransferWhole{},
                             token);
  co_return !ec;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::RefuseOverBudget(
    Stream& socket, const wire::Header& h, SessionState& st) {
  stats_.budget_refusals.fetch_add(1, std::memory_order_relaxed);
  WarnLimited(&last_budget_log_ms_, &budget_log_held_,
              "requests in flight hold all of max_buffered_bytes: refusing a "
              "request");
  co_return co_await RefuseOp(socket, h, st, ErrorCode::NO_AVAILABLE_HANDLE);
}

const char* TcpDataServer::Impl::ParseSsdRead(const wire::Header& h,
                                              SessionState& st,
                                              ErrorCode* refusal) {
  *refusal = ErrorCode::OK;
  st.codes.assign(h.count, ErrorCode::OK);
  st.handler_index.assign(h.count, kNoOp);
  st.key_ops.clear();
  st.key_lengths.clear();
  st.key_offsets.clear();
  const std::vector<uint8_t>& body = st.body;
  size_t pos = 0;
  uint64_t slots = 0;
  bool over_limits = false;
  bool locked = false;
  const std::shared_ptr<const cap::Key> cap_key = CapKey(&locked);
  const int64_t now = cap_key ? cap::WallNowMs() : 0;
  uint64_t refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    if (body.size() - pos < wire::kKeyReadFixedSize) {
      return "key descriptor cut short";
    }
    const uint8_t* d = body.data() + pos;
    const uint64_t length = wire::GetLe<uint64_t>(d);
    const uint32_t tenant_len = wire::GetLe<uint32_t>(d + 8);
    const uint32_t key_len = wire::GetLe<uint32_t>(d + 12);
    const uint8_t* token = d + 16;
    pos += wire::kKeyReadFixedSize;
    if (body.size() - pos < uint64_t{tenant_len} + key_len) {
      return "key descriptor cut short";
    }
    const char* tenant = reinterpret_cast<const char*>(body.data() + pos);
    const char* key = tenant + tenant_len;
    pos += size_t{tenant_len} + key_len;
    if (over_limits) continue;  // only the structure matters any more
    if (tenant_len > wire::kMaxTenantSize || key_len == 0 ||
        key_len > wire::kMaxKeySize || length > wire::kMaxPayload) {
      over_limits = true;
      continue;
    }
    // Cannot overflow: at most 65536 slots of at most 16 GiB + 4 KiB.
    slots += wire::RoundUpToSsdAlign(length);
    if (length == 0) {
      // Names no bytes: rejected like a zero-length READ range.
      st.codes[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    if (locked || cap_key) {
      const ErrorCode c =
          locked
              ? ErrorCode::ILLEGAL_CLIENT
              : cap_key->VerifyKey(token, std::string_view(tenant, tenant_len),
                                   std::string_view(key, key_len),
                                   cap::kOpSsdRead, now, capability_skew_ms_);
      if (c != ErrorCode::OK) {
        st.codes[i] = c;
        ++refused;
        continue;
      }
    }
    st.handler_index[i] = static_cast<uint32_t>(st.key_ops.size());
    KeyReadOp& op = st.key_ops.emplace_back();
    op.tenant.assign(tenant, tenant_len);
    op.key.assign(key, key_len);
    op.length = length;
  }
  if (pos != body.size()) return "body longer than its key descriptors";
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  if (over_limits || slots > max_ssd_read_bytes_) {
    *refusal = ErrorCode::INVALID_PARAMS;
    st.key_ops.clear();
    return nullptr;
  }
  // Every slot starts 4096-aligned within a 4096-aligned buffer.
  uint64_t offset = 0;
  for (const KeyReadOp& op : st.key_ops) {
    st.key_lengths.push_back(op.length);
    st.key_offsets.push_back(offset);
    offset += wire::RoundUpToSsdAlign(op.length);
  }
  st.ssd_buffer_size = offset;
  return nullptr;
}

constexpr size_t kKeepSsdBufferBytes = 64ull << 20;

void TcpDataServer::Impl::RunSsdRead(SessionState& st) {
  const size_t size = static_cast<size_t>(
      std::max<uint64_t>(st.ssd_buffer_size, wire::kSsdReadAlign));
  // Reuse the session's buffer: a fresh allocation of this size is a fresh
  // mmap, and faulting its pages in costs more than the read on some VMs.
  if (!st.ssd_buffer || st.ssd_buffer_capacity < size) {
    static_assert(storage::kBlockSize % wire::kSsdReadAlign == 0);
    st.ssd_buffer.reset();
    st.ssd_buffer_capacity = 0;
    if (!st.ssd_hold.Resize(size)) {
      st.ssd_hold.Reset();
      stats_.budget_refusals.fetch_add(1, std::memory_order_relaxed);
      WarnLimited(&last_budget_log_ms_, &budget_log_held_,
                  "requests in flight hold all of max_buffered_bytes: "
                  "refusing an SSD read of " +
                      std::to_string(size) + " bytes");
      for (KeyReadOp& op : st.key_ops)
        op.result = ErrorCode::NO_AVAILABLE_HANDLE;
      return;
    }
    void* p = storage::AllocateIoMemory(size);
    if (p == nullptr) {
      spdlog::error("data server {}: cannot allocate {} bytes for an SSD read",
                    node_id_, size);
      for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
      return;
    }
    st.ssd_buffer.reset(static_cast<uint8_t*>(p));
    st.ssd_buffer_capacity = size;
  }
  for (size_t j = 0; j < st.key_ops.size(); ++j) {
    st.key_ops[j].dest = st.ssd_buffer.get() + st.key_offsets[j];
    // A handler that does not get to an op must not make it read as OK.
    st.key_ops[j].result = ErrorCode::INTERNAL_ERROR;
  }
  try {
    ssd_read_handler_(std::span<KeyReadOp>(st.key_ops));
  } catch (const std::exception& e) {
    spdlog::error("data server {}: SSD read handler threw: {}", node_id_,
                  e.what());
    for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
  } catch (...) {
    spdlog::error("data server {}: SSD read handler threw", node_id_);
    for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
  }
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeSsdRead(Stream& socket,
                                                        const wire::Header& h,
                                                        SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  ErrorCode refusal = ErrorCode::OK;
  if (const char* why = ParseSsdRead(h, st, &refusal)) {
    BadFrame(socket, why);
    co_return false;
  }
  if (refusal != ErrorCode::OK) {
    spdlog::warn(
        "data server {}: SSD_READ of {} ops from {} refused (a key or tenant "
        "of bad length, or more than {} bytes in total)",
        node_id_, h.count, PeerName(socket), max_ssd_read_bytes_);
    PrepareResponse(h, refusal, 0, st);
    co_await asio::async_write(socket, asio::buffer(st.response),
                               TransferWhole{}, token);
    co_return !ec;
  }

  if (!st.key_ops.empty()) {
    // The handler blocks on disk I/O: it runs on an SSD read thread while
    // this session is suspended, and the session resumes on its own
    // executor. Nothing else touches `st` meanwhile.
    const auto ex = co_await asio::this_coro::executor;
    co_await asio::async_initiate<const asio::use_awaitable_t<>, void()>(
        [this, &st, ex](auto handler) {
          auto resume = std::make_shared<decltype(handler)>(std::move(handler));
          ssd_pool_->Submit([this, &st, ex, resume] {
            RunSsdRead(st);
            asio::post(ex, [resume] {
              auto& resume_session = *resume;
              resume_session();
            });
          });
        },
        asio::use_awaitable);
  }

  // Header, codes and the bytes of the successful ops go out in one
  // gathered write straight from the buffer the handler filled.
  uint64_t data_len = 0;
  st.out.clear();
  st.out.emplace_back();  // response header + codes, filled in below
  for (uint32_t i = 0; i < h.count; ++i) {
    const uint32_t j = st.handler_index[i];
    if (j == kNoOp) continue;
    st.codes[i] = st.key_ops[j].result;
    if (st.codes[i] != ErrorCode::OK) continue;
    st.out.emplace_back(st.ssd_buffer.get() + st.key_offsets[j],
                        st.key_lengths[j]);
    data_len += st.key_lengths[j];
  }
  PrepareCodesResponse(h, data_len, st);
  st.out[0] = asio::buffer(st.response);
  co_await asio::async_write(socket, st.out, TransferWhole{}, token);
  // Keep a moderate buffer for the session's next read; give back big ones.
  if (st.ssd_buffer_capacity > kKeepSsdBufferBytes) {
    st.ssd_buffer.reset();
    st.ssd_buffer_capacity = 0;
    st.ssd_hold.Reset();
  }
  if (ec) co_return false;
  stats_.ssd_bytes_read.fetch_add(data_len, std::memory_order_relaxed);
  co_return true;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServePrefetch(Stream& socket,
                                                         const wire::Header& h,
                                                         SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  size_t pos = 0;
  if (!TakeLengthPrefixed(st.body, &pos, &st.tenant)) {
    BadFrame(socket, "PREFETCH tenant cut short");
    co_return false;
  }
  const bool tenant_ok = st.tenant.size() <= wire::kMaxTenantSize;
  st.codes.assign(h.count, ErrorCode::OK);
  st.handler_index.assign(h.count, kNoOp);
  st.keys.clear();
  std::string key;
  bool locked = false;
  const std::shared_ptr<const cap::Key> cap_key = CapKey(&locked);
  const int64_t now = cap_key ? cap::WallNowMs() : 0;
  uint64_t refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    if (!TakeLengthPrefixed(st.body, &pos, &key) ||
        st.body.size() - pos < wire::kTokenSize) {
      BadFrame(socket, "PREFETCH key cut short");
      co_return false;
    }
    const uint8_t* token = st.body.data() + pos;
    pos += wire::kTokenSize;
    if (!tenant_ok || key.empty() || key.size() > wire::kMaxKeySize) {
      st.codes[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    if (locked || cap_key) {
      const ErrorCode c =
          locked ? ErrorCode::ILLEGAL_CLIENT
                 : cap_key->VerifyKey(token, st.tenant, key, cap::kOpPrefetch,
                                      now, capability_skew_ms_);
      if (c != ErrorCode::OK) {
        st.codes[i] = c;
        ++refused;
        continue;
      }
    }
    st.handler_index[i] = static_cast<uint32_t>(st.keys.size());
    st.keys.push_back(std::move(key));
  }
  if (pos != st.body.size()) {
    BadFrame(socket, "body longer than its keys");
    co_return false;
  }
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  if (!st.keys.empty()) {
    std::vector<ErrorCode> got;
    try {
      got = prefetch_handler_(st.tenant, st.keys);
    } catch (const std::exception& e) {
      spdlog::error("data server {}: prefetch handler threw: {}", node_id_,
                    e.what());
      got.clear();
    } catch (...) {
      spdlog::error("data server {}: prefetch handler threw", node_id_);
      got.clear();
    }
    for (uint32_t i = 0; i < h.count; ++i) {
      const uint32_t j = st.handler_index[i];
      if (j == kNoOp) continue;
      st.codes[i] = j < got.size() ? got[j] : ErrorCode::INTERNAL_ERROR;
    }
    stats_.prefetch_keys.fetch_add(st.keys.size(), std::memory_order_relaxed);
  }
  PrepareCodesResponse(h, 0, st);
  co_await asio::async_write(socket, asio::buffer(st.response), TransferWhole{},
                             token);
  co_return !ec;
}

template <typename Stream>
asio::awaitable<void> TcpDataServer::Impl::Serve(
    Stream socket, std::shared_ptr<SessionSlot> slot,
    std::list<std::shared_ptr<SessionSlot>>::iterator where) {
  SessionState st(&budget_);
  // Before any close posted for this session can run (same executor, posted
  // later).
  slot->socket = &Lowest(socket);
  // Runs on this session's executor when the coroutine ends, or in Stop
  // when the context is destroyed (nothing is posted to it any more).
  struct Unregister {
    Impl* impl;
    std::shared_ptr<SessionSlot> slot;
    std::list<std::shared_ptr<SessionSlot>>::iterator where;
    ~Unregister() {
      slot->alive = false;
      std::lock_guard lock(impl->sessions_mu_);
      if (slot->closing.load()) --impl->closing_sessions_;
      impl->sessions_.erase(where);
    }
  } unregister{this, slot, where};
  if (slot->closing.load()) co_return;
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    // A peer that never finishes the handshake must not hold its slot until
    // the idle sweep: closing the socket fails the handshake at once. The
    // timer's handler may already be queued when the handshake ends, and may
    // run after this session is gone: it goes through the slot.
    auto done = std::make_shared<bool>(false);
    // Taken now: a peer that gave up has no remote endpoint by the time its
    // failure is logged.
    const std::string peer = PeerName(socket);
    asio::steady_timer deadline(socket.get_executor(), tls_handshake_timeout_);
    deadline.async_wait([slot, done](const asio::error_code& wait_ec) {
      if (wait_ec || *done || !slot->alive || slot->socket == nullptr) return;
      asio::error_code ignored;
      slot->socket->close(ignored);
    });
    co_await socket.async_handshake(asio::ssl::stream_base::server, token);
    *done = true;
    deadline.cancel();
    if (ec) {
      stats_.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
      WarnLimited(&last_tls_log_ms_, &tls_log_held_,
                  "TLS handshake with " + peer + " failed: " + ec.message() +
                      " (a plaintext client, or one that does not trust "
                      "this node's certificate?)");
      asio::error_code ignored;
      Lowest(socket).close(ignored);
      co_return;
    }
    slot->last_active_ms.store(SteadyNowMs());
  }
  for (;;) {
    slot->between_frames.store(true);
    slot->last_active_ms.store(SteadyNowMs());
    st.request_hold.Reset();
    if (st.ranges_raw.capacity() > kKeepRequestBytes) st.ranges_raw = {};
    co_await asio::async_read(socket, asio::buffer(st.header), TransferWhole{},
                              token);
    if (ec) co_return;  // peer closed or reset: nothing to answer
    slot->between_frames.store(false);
    slot->last_active_ms.store(SteadyNowMs());
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

    if (op == wire::Op::kSsdRead || op == wire::Op::kPrefetch) {
      const bool ssd_read = op == wire::Op::kSsdRead;
      // Without the op's handler (e.g. a node without an SSD tier) the op is
      // refused cleanly and the connection stays usable.
      if (ssd_read ? !ssd_read_handler_ : !prefetch_handler_) {
        if (!co_await RefuseOp(socket, h, st)) co_return;
        continue;
      }
      if (h.body_len > max_key_frame_body_) {
        BadFrame(socket, "body over the server's limit");
        co_return;
      }
      if (!st.request_hold.Resize(h.body_len)) {
        if (!co_await RefuseOverBudget(socket, h, st)) co_return;
        continue;
      }
      // Memory grows with the bytes that arrive, not with what a header
      // announces.
      st.body.clear();
      for (uint64_t got = 0; got < h.body_len;) {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(h.body_len - got, 64 << 10));
        st.body.resize(static_cast<size_t>(got) + n);
        co_await asio::async_read(socket, asio::buffer(st.body.data() + got, n),
                                  TransferWhole{}, token);
        if (ec) co_return;
        got += n;
        slot->last_active_ms.store(SteadyNowMs());
      }
      slot->busy.store(true);
      const bool go_on = ssd_read ? co_await ServeSsdRead(socket, h, st)
                                  : co_await ServePrefetch(socket, h, st);
      slot->busy.store(false);
      slot->last_active_ms.store(SteadyNowMs());
      if (!go_on) co_return;
      // An idle connection does not keep a big request's memory.
      if (st.body.capacity() > kKeepRequestBytes) st.body = {};
      if (st.key_ops.capacity() > 1024) st.key_ops = {};
      if (st.keys.capacity() > 1024) st.keys = {};
      continue;
    }

    if (!st.request_hold.Resize(uint64_t{h.count} * wire::kRangeSize)) {
      if (!co_await RefuseOverBudget(socket, h, st)) co_return;
      continue;
    }
    st.ranges_raw.resize(size_t{h.count} * wire::kRangeSize);
    co_await asio::async_read(socket, asio::buffer(st.ranges_raw),
                              TransferWhole{}, token);
    if (ec) co_return;
    slot->last_active_ms.store(SteadyNowMs());
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
      co_await asio::async_write(socket, st.out, TransferWhole{}, token);
      if (ec) co_return;
      st.pins.Release();
      stats_.bytes_read.fetch_add(data_len, std::memory_order_relaxed);
      continue;
    }

    // An older write of an overlapping range may still be copying: this
    // one's bytes go in after it has finished, never mixed with its stale
    // ones. Bounded by that write's own transfer (its session ends at the
    // latest when idle_timeout_ms closes it).
    if (st.write_pass.blocked()) {
      stats_.write_generation_waits.fetch_add(1, std::memory_order_relaxed);
      slot->busy.store(true);
      const auto ex = co_await asio::this_coro::executor;
      co_await asio::async_initiate<const asio::use_awaitable_t<>, void()>(
          [this, &st, ex](auto handler) {
            auto resume =
                std::make_shared<decltype(handler)>(std::move(handler));
            auto post = [ex, resume] {
              asio::post(ex, [resume] {
                auto& resume_session = *resume;
                resume_session();
              });
            };
            if (!write_order_.Wait(st.write_pass, post)) post();
          },
          asio::use_awaitable);
      slot->busy.store(false);
      slot->last_active_ms.store(SteadyNowMs());
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
        co_await asio::async_read(socket, st.in, TransferWhole{}, token);
        if (ec) co_return;
        st.in.clear();
      }
      if (at_end) break;
      if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
      for (uint64_t left = st.ranges[i].length; left > 0;) {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
        co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                                  TransferWhole{}, token);
        if (ec) co_return;
        left -= n;
      }
    }
    // Every byte has landed: newer writes of these ranges may go ahead, and
    // the segments may be taken back.
    st.write_pass.Release();
    st.pins.Release();
    stats_.bytes_written.fetch_add(written, std::memory_order_relaxed);
    PrepareResponse(h, ErrorCode::OK, 0, st);
    co_await asio::async_write(socket, asio::buffer(st.response),
                               TransferWhole{}, token);
    if (ec) co_return;
  }
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
