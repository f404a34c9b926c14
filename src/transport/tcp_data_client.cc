#include "transport/tcp_data_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/wire_format.h"

namespace kvpool {
namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kSocketBufferBytes = 4 << 20;

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

// For quoting a node id in a message: a peer's answer may hold any bytes.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  return out;
}

// Waits until `fd` is ready for `events` or `deadline` has passed. Returns
// > 0 when ready (or in error, which the next send/recv reports), 0 on
// timeout, < 0 on a poll error (errno set).
int PollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return 0;
    pollfd pfd{fd, events, 0};
    const int r = ::poll(
        &pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

// A connection's byte stream: the socket, read and written through `ssl`
// when the connection is TLS.
struct Link {
  int fd = -1;
  SSL* ssl = nullptr;
};

// The reason of the last TLS failure on this thread, for the message of a
// call that failed with EPROTO from TlsIo.
thread_local std::string tls_error;

std::string TlsErrorText() {
  std::string out;
  char buf[256];
  while (const unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "TLS error" : out;
}

// OpenSSL's socket BIO writes with write(2), which raises SIGPIPE on a
// connection the peer has reset; the rest of this client sends with
// MSG_NOSIGNAL, and so does this BIO.
int NoSigpipeWrite(BIO* bio, const char* data, int len) {
  const int fd =
      static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

int NoSigpipeRead(BIO* bio, char* data, int len) {
  const int fd =
      static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(fd, data, static_cast<size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(n);
}

long NoSigpipeCtrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* NoSigpipeMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                 "kvpool socket");
    BIO_meth_set_write(m, NoSigpipeWrite);
    BIO_meth_set_read(m, NoSigpipeRead);
    BIO_meth_set_ctrl(m, NoSigpipeCtrl);
    return m;
  }();
  return method;
}

// One SSL_read or SSL_write of at most `n` bytes, in the terms of
// send/recv: bytes moved, 0 when the peer closed, or -1 with errno set:
// EAGAIN when OpenSSL waits for the socket (*wants says for what: on a
// blocking socket that is SO_RCVTIMEO/SO_SNDTIMEO firing), EPROTO for a
// TLS failure (described in tls_error).
ssize_t TlsIo(SSL* ssl, void* p, size_t n, bool sending, short* wants) {
  const int len = static_cast<int>(std::min<size_t>(n, size_t{1} << 30));
  ERR_clear_error();
  errno = 0;  // SSL_ERROR_SYSCALL with none set means end of file
  const int r = sending ? SSL_write(ssl, p, len) : SSL_read(ssl, p, len);
  if (r > 0) return r;
  const int err = SSL_get_error(ssl, r);
  // A closed peer is an error for a writer: 0 would read as "0 bytes
  // moved, try again".
  auto closed = [sending]() -> ssize_t {
    if (!sending) return 0;
    errno = EPIPE;
    return -1;
  };
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      *wants = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      // A signal is retried by the callers; anything else is the socket
      // timing out (or, non-blocking, having nothing yet).
      if (errno != EINTR) errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return closed();
    case SSL_ERROR_SYSCALL:
      // errno is the socket's; none means the peer closed without a TLS
      // close_notify.
      if (errno == 0) return closed();
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *wants = sending ? POLLOUT : POLLIN;
      }
      return -1;
    default:
      tls_error = TlsErrorText();
      errno = EPROTO;
      return -1;
  }
}

// send(2)/recv(2) on `link`, through TLS if it has an SSL. *wants is the
// poll event to wait for after EAGAIN.
ssize_t LinkIo(const Link& link, void* p, size_t n, bool sending,
               short* wants) {
  if (link.ssl != nullptr) return TlsIo(link.ssl, p, n, sending, wants);
  *wants = sending ? POLLOUT : POLLIN;
  return sending ? ::send(link.fd, p, n, MSG_NOSIGNAL)
                 : ::recv(link.fd, p, n, 0);
}

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

// Why an exchange failed. Only a failure on a connection that had sat in the
// pool and died in a way a closed peer explains is worth one retry.
struct IoFailure {
  std::string message;
  bool peer_closed = false;
};

// What one sendmsg/recvmsg of `n` bytes means for the transfer: bytes moved,
// an interruption to retry, or a failure (described in *failure: a timeout
// of SO_SNDTIMEO/SO_RCVTIMEO, a socket error, or the peer's close).
enum class Step { kMoved, kRetry, kFailed };
Step CheckStep(ssize_t n, bool receiving, const char* what,
               IoFailure* failure) {
  if (n < 0) {
    const int err = errno;
    if (err == EINTR) return Step::kRetry;
    failure->message = std::string(what) + ": ";
    if (err == EAGAIN || err == EWOULDBLOCK) {
      failure->message += "timed out";
    } else if (err == EPROTO && !tls_error.empty()) {
      failure->message += tls_error;
    } else {
      failure->message += ErrnoText(err);
      failure->peer_closed = err == ECONNRESET || err == EPIPE;
    }
    return Step::kFailed;
  }
  if (n == 0 && receiving) {
    failure->message = std::string(what) + ": connection closed by peer";
    failure->peer_closed = true;
    return Step::kFailed;
  }
  return Step::kMoved;
}

// Moves every byte of `iov` with sendmsg/recvmsg on a blocking socket whose
// SO_SNDTIMEO/SO_RCVTIMEO bound each wait. Asio's own blocking operations
// fall back to an unbounded poll() when those timeouts fire, so they cannot
// enforce the stall timeout; the raw calls also take up to IOV_MAX buffers
// per syscall instead of Asio's 64. `iov` is consumed in place.
bool TransferAll(const Link& link, std::vector<iovec>& iov, bool sending,
                 const char* what, IoFailure* failure) {
  const int fd = link.fd;
  size_t first = 0;
  while (first < iov.size() && iov[first].iov_len == 0) ++first;
  while (first < iov.size()) {
    ssize_t n;
    if (link.ssl != nullptr) {
      // TLS has no scatter/gather: one buffer per call. Partial writes are
      // enabled, so a call returns what it moved like sendmsg does.
      short wants;
      n = TlsIo(link.ssl, iov[first].iov_base, iov[first].iov_len, sending,
                &wants);
    } else {
      msghdr msg{};
      msg.msg_iov = &iov[first];
      msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
      // MSG_WAITALL: one wake-up per filled iovec list rather than one per
      // arriving burst; SO_RCVTIMEO still bounds the wait.
      n = sending ? ::sendmsg(fd, &msg, MSG_NOSIGNAL)
                  : ::recvmsg(fd, &msg, MSG_WAITALL);
    }
    const Step step = CheckStep(n, !sending, what, failure);
    if (step == Step::kRetry) continue;
    if (step == Step::kFailed) return false;
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      iovec& v = iov[first];
      if (left < v.iov_len) {
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + left;
        v.iov_len -= left;
        left = 0;
      } else {
        left -= v.iov_len;
        ++first;
      }
    }
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
  }
  return true;
}

template <typename Buf>
iovec Iov(Buf* p, uint64_t len) {
  return iovec{const_cast<uint8_t*>(p), static_cast<size_t>(len)};
}

uint8_t* OpBuffer(ReadOp& op) { return op.dest; }
const uint8_t* OpBuffer(WriteOp& op) { return op.src; }

Status CheckNodeId(const std::string& node_id) {
  if (node_id.size() < wire::kMinNodeIdSize ||
      node_id.size() > wire::kMaxNodeIdSize) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "expected node id must be 1 to " +
                      std::to_string(wire::kMaxNodeIdSize) + " bytes, got " +
                      std::to_string(node_id.size()));
  }
  return Status::OK();
}

bool ProtocolError(IoFailure* failure, const char* what) {
  failure->message = std::string("bad response from server: ") + what;
  return false;
}

// Receives into the concatenation of buf[0, len) and extra[0, extra_len),
// from byte *got on, until at least `min` bytes are in: each recvmsg takes
// what has arrived, never past the end of the two, so nothing beyond what
// the caller knows to expect is consumed.
bool ReceiveAtLeast(const Link& link, uint8_t* buf, size_t len, uint8_t* extra,
                    size_t extra_len, size_t min, size_t* got, const char* what,
                    IoFailure* failure) {
  while (*got < min) {
    iovec v[2];
    int nv = 0;
    if (*got < len) v[nv++] = iovec{buf + *got, len - *got};
    const size_t in_extra = *got > len ? *got - len : 0;
    if (extra_len > in_extra) {
      v[nv++] = iovec{extra + in_extra, extra_len - in_extra};
    }
    ssize_t r;
    if (link.ssl != nullptr) {
      short wants;
      r = TlsIo(link.ssl, v[0].iov_base, v[0].iov_len, /*sending=*/false,
                &wants);
    } else {
      msghdr msg{};
      msg.msg_iov = v;
      msg.msg_iovlen = nv;
      r = ::recvmsg(link.fd, &msg, 0);
    }
    const Step step = CheckStep(r, /*receiving=*/true, what, failure);
    if (step == Step::kRetry) continue;
    if (step == Step::kFailed) return false;
    *got += static_cast<size_t>(r);
  }
  return true;
}

// Receives the head of the response to a request of `op` with `n` ops: the
// header into *rh and, if the server took the frame (status 0), the n
// result codes into *codes. A refused frame (status != 0) has no body.
// The server sends header, codes and data in one write, so one recv usually
// takes them all (a syscall or two saved per call: a single small get is a
// handful of syscalls). `first` (may be empty) is where the data of a lone
// op goes if it succeeds: only with one op is the place of the first data
// byte known before the codes are read. *first_got is how much landed there.
bool ReceiveHead(const Link& link, uint16_t op, uint32_t n, wire::Header* rh,
                 std::vector<ErrorCode>* codes, std::span<uint8_t> first,
                 size_t* first_got, IoFailure* failure) {
  const size_t head = wire::kHeaderSize + size_t{n} * wire::kResultSize;
  uint8_t small[wire::kHeaderSize + 64 * wire::kResultSize];
  std::vector<uint8_t> large;
  uint8_t* raw = small;
  if (head > sizeof(small)) {
    large.resize(head);
    raw = large.data();
  }
  size_t got = 0;
  *first_got = 0;
  if (!ReceiveAtLeast(link, raw, head, first.data(), first.size(),
                      wire::kHeaderSize, &got, "receive response", failure)) {
    return false;
  }
  *rh = wire::DecodeHeader(raw);
  if (rh->magic != wire::kMagic || rh->version != wire::kVersion ||
      rh->op != op) {
    return ProtocolError(failure, "header mismatch");
  }
  codes->clear();
  if (rh->status != 0) {
    // The server refused the whole frame but kept the stream in sync.
    if (rh->count != 0 || rh->body_len != 0 || got != wire::kHeaderSize) {
      return ProtocolError(failure, "error frame with a body");
    }
    return true;
  }
  if (rh->count != n) return ProtocolError(failure, "result count mismatch");
  if (!ReceiveAtLeast(link, raw, head, nullptr, 0, head, &got,
                      "receive results", failure)) {
    return false;
  }
  *first_got = got - head;
  codes->resize(n);
  const uint8_t* codes_raw = raw + wire::kHeaderSize;
  for (uint32_t i = 0; i < n; ++i) {
    (*codes)[i] = ErrorCodeFromInt(static_cast<int32_t>(
        wire::GetLe<uint32_t>(codes_raw + i * wire::kResultSize)));
  }
  return true;
}

// Sends the request gathered in `iov`, then takes one result per op and, when
// `kReceivesData`, the bytes of the successful ops scattered straight into
// their destinations. Shared by READ, WRITE and SSD_READ.
template <bool kReceivesData, typename OpT>
bool SendAndCollect(const Link& link, uint16_t op, std::vector<iovec>& iov,
                    std::span<OpT> ops, std::span<const uint32_t> batch,
                    IoFailure* failure) {
  if (!TransferAll(link, iov, /*sending=*/true, "send request", failure)) {
    return false;
  }
  const uint32_t n = static_cast<uint32_t>(batch.size());
  wire::Header rh;
  std::vector<ErrorCode> codes;
  std::span<uint8_t> first;
  if constexpr (kReceivesData) {
    if (n == 1) first = {ops[batch[0]].dest, ops[batch[0]].length};
  }
  size_t first_got = 0;
  if (!ReceiveHead(link, op, n, &rh, &codes, first, &first_got, failure)) {
    return false;
  }
  if (rh.status != 0) {
    const ErrorCode code = ErrorCodeFromInt(rh.status);
    for (uint32_t idx : batch) ops[idx].result = code;
    return true;
  }
  iov.clear();
  uint64_t data_len = 0;
  for (uint32_t i = 0; i < n; ++i) {
    OpT& o = ops[batch[i]];
    o.result = codes[i];
    if constexpr (kReceivesData) {
      if (o.result == ErrorCode::OK) {
        iov.push_back(Iov(o.dest, o.length));
        data_len += o.length;
      }
    }
  }
  if (rh.body_len != uint64_t{n} * wire::kResultSize + data_len) {
    return ProtocolError(failure, "body length mismatch");
  }
  if (first_got > data_len) return ProtocolError(failure, "data for a failure");
  if (first_got > 0) {  // a lone op's first bytes came with the codes
    iov[0].iov_base = static_cast<uint8_t*>(iov[0].iov_base) + first_got;
    iov[0].iov_len -= first_got;
  }
  if (data_len > 0 &&
      !TransferAll(link, iov, /*sending=*/false, "receive data", failure)) {
    return false;
  }
  return true;
}

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= wire::kMaxKeySize;
}

}  // namespace

class TcpDataClient::Impl {
 public:
  explicit Impl(const TcpDataClientOptions& options) : options_(options) {
    if (!options_.tls_ca_file.empty()) SetUpTls();
  }

  template <typename OpT>
  Status Run(const std::string& endpoint, const std::string& node_id,
             std::span<OpT> ops);
  Status ReadKeys(const std::string& endpoint, const std::string& node_id,
                  std::span<KeyReadOp> ops);
  Status Prefetch(const std::string& endpoint, const std::string& node_id,
                  const std::string& tenant,
                  const std::vector<std::string>& keys,
                  const std::vector<std::string>* tokens,
                  std::vector<ErrorCode>* results);
  void Forget(const std::string& endpoint);

 private:
  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  struct Connection {
    tcp::socket socket;
    uint64_t generation;  // of its pool when it was opened
    // Declared after the socket so it is freed first (it does not own the
    // descriptor).
    std::unique_ptr<SSL, SslFree> ssl;
    Link link() { return Link{socket.native_handle(), ssl.get()}; }
  };
  struct Pool {
    uint64_t generation = 0;
    std::vector<std::unique_ptr<Connection>> idle;
  };

  // A pooled connection to `node_id` at `endpoint` if there is one (sets
  // *reused), else a new one that passed the HELLO exchange.
  Result<std::unique_ptr<Connection>> Take(const std::string& endpoint,
                                           const std::string& node_id,
                                           bool* reused);
  void Give(const std::string& endpoint, const std::string& node_id,
            std::unique_ptr<Connection> conn);
  // Closes the idle connections to `node_id` at `endpoint`.
  void DropIdle(const std::string& endpoint, const std::string& node_id);
  Result<std::unique_ptr<Connection>> Connect(const std::string& endpoint,
                                              const std::string& node_id,
                                              uint64_t generation);
  // Connects `socket` to `ep` and leaves it non-blocking.
  Status ConnectTo(tcp::socket& socket, const tcp::endpoint& ep);
  // The HELLO exchange on a freshly connected, non-blocking socket, bounded
  // as a whole by options_.handshake_timeout.
  Status Handshake(const Link& link, const std::string& endpoint,
                   const std::string& node_id);
  // The TLS handshake on a freshly connected, non-blocking socket, bounded
  // by options_.handshake_timeout; verifies the node's certificate against
  // the CA and `host` (the endpoint's host: a DNS name or an IP address).
  Status TlsHandshake(const Link& link, const std::string& endpoint,
                      const std::string& host);
  // Runs `exchange(conn, i, failure)` for every i < `exchanges` on one
  // connection to `node_id` at `endpoint`, in order; on failure drops the
  // node's idle connections and, if the connection was a pooled one the
  // peer had closed, starts over once on a new one. Returns OK, the
  // connect/HELLO error, or TRANSFER_FAIL.
  template <typename F>
  Status OnConnection(const std::string& endpoint, const std::string& node_id,
                      size_t exchanges, F&& exchange);
  // One request/response on `conn` for the ops at `batch` indices.
  template <typename OpT>
  bool Exchange(Connection& conn, std::span<OpT> ops,
                std::span<const uint32_t> batch, IoFailure* failure);
  bool ExchangeKeys(Connection& conn, std::span<KeyReadOp> ops,
                    std::span<const uint32_t> batch, IoFailure* failure);
  // *unsupported is set when the node refused the op as a whole.
  bool ExchangePrefetch(Connection& conn, const std::string& tenant,
                        const std::vector<std::string>& keys,
                        const std::vector<std::string>* tokens,
                        std::span<const uint32_t> batch,
                        std::vector<ErrorCode>& results, bool* unsupported,
                        IoFailure* failure);

  // Builds tls_ from options_, or records in tls_setup_error_ why not.
  void SetUpTls();

  struct SslCtxFree {
    void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  };
  const TcpDataClientOptions options_;
  // Set when options_.tls_ca_file is: every connection is TLS.
  std::unique_ptr<SSL_CTX, SslCtxFree> tls_;
  std::string tls_setup_error_;  // non-empty: every call fails with it
  // Only owns the sockets; it is never run because all I/O is blocking.
  asio::io_context io_;
  std::mutex mu_;
  // endpoint -> expected node id -> pool. A connection is only ever reused
  // for the node its HELLO named.
  std::unordered_map<std::string, std::unordered_map<std::string, Pool>> pools_;
};

void TcpDataClient::Impl::SetUpTls() {
  tls_.reset(SSL_CTX_new(TLS_client_method()));
  if (!tls_) {
    tls_setup_error_ = TlsErrorText();
    return;
  }
  SSL_CTX* ctx = tls_.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Partial writes let TransferAll treat SSL_write like sendmsg (it returns
  // what it moved); a moving buffer spares the HELLO loop from retrying a
  // write after WANT_WRITE with the very same pointer.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_AUTO_RETRY);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  // A node that closes a pooled connection without close_notify reads as a
  // closed peer (worth the one retry), not as a TLS error.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(ctx, options_.tls_ca_file.c_str(),
                                    nullptr) != 1) {
    tls_setup_error_ = "cannot load the data plane TLS CA file " +
                       options_.tls_ca_file + ": " + TlsErrorText();
    tls_.reset();
  }
}

Status TcpDataClient::Impl::ConnectTo(tcp::socket& socket,
                                      const tcp::endpoint& ep) {
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

Status TcpDataClient::Impl::Handshake(const Link& link,
                                      const std::string& endpoint,
                                      const std::string& node_id) {
  const int fd = link.fd;
  const auto deadline = Clock::now() + options_.handshake_timeout;
  auto fail = [&](const std::string& why) {
    return Status(ErrorCode::TRANSFER_FAIL,
                  "HELLO with " + endpoint + " (expecting node '" +
                      Printable(node_id) + "') failed: " + why);
  };
  auto timed_out = [&](const char* waiting_for) {
    return fail("timed out after " +
                std::to_string(options_.handshake_timeout.count()) +
                " ms waiting for " + waiting_for +
                " (not a kvpool data server, or one that hangs)");
  };

  std::vector<uint8_t> hello(wire::kHeaderSize);
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kHello);
  h.body_len = node_id.size();
  wire::EncodeHeader(h, hello.data());
  hello.insert(hello.end(), node_id.begin(), node_id.end());
  for (size_t sent = 0; sent < hello.size();) {
    short wants = POLLOUT;
    const ssize_t n = LinkIo(link, hello.data() + sent, hello.size() - sent,
                             /*sending=*/true, &wants);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      return fail("send: " + (err == EPROTO ? tls_error : ErrnoText(err)));
    }
    const int r = PollUntil(fd, wants, deadline);
    if (r == 0) return timed_out("the send");
    if (r < 0) return fail("poll: " + ErrnoText(errno));
  }

  // The answer: a header, then the server's node id. Its first bytes are
  // checked as they arrive, so a peer speaking another protocol (an HTTP or
  // gRPC server that got the port) is recognised without waiting for a
  // whole header it may never send.
  uint8_t magic[4];
  wire::PutLe<uint32_t>(magic, wire::kMagic);
  uint8_t raw[wire::kHeaderSize + wire::kMaxNodeIdSize];
  size_t want = wire::kHeaderSize;
  size_t got = 0;
  wire::Header rh;
  while (got < want) {
    short wants = POLLIN;
    const ssize_t n =
        LinkIo(link, raw + got, want - got, /*sending=*/false, &wants);
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (want == wire::kHeaderSize &&
          std::memcmp(raw, magic, std::min<size_t>(got, sizeof(magic))) != 0) {
        // 0x15 and 0x16 start TLS alert and handshake records: the node
        // refused our plaintext HELLO as a failed TLS handshake.
        if (link.ssl == nullptr && (raw[0] == 0x15 || raw[0] == 0x16)) {
          return fail(
              "the node requires TLS on its data plane (answered with a TLS "
              "record); configure the CA to verify it with (tls_ca_file)");
        }
        return fail("not a kvpool data server (bad magic in the answer)");
      }
      if (want == wire::kHeaderSize && got == wire::kHeaderSize) {
        rh = wire::DecodeHeader(raw);
        if (rh.version != wire::kVersion) {
          return fail("server speaks data plane version " +
                      std::to_string(rh.version) + ", expected " +
                      std::to_string(wire::kVersion));
        }
        // A refusal names no node (the server keeps its id to itself).
        if (rh.op != h.op || rh.count != 0 ||
            (rh.status == 0 && rh.body_len < wire::kMinNodeIdSize) ||
            rh.body_len > wire::kMaxNodeIdSize) {
          return fail("malformed HELLO answer");
        }
        want += static_cast<size_t>(rh.body_len);
      }
      continue;
    }
    if (n == 0) {
      return fail(got == 0 ? "connection closed without an answer (not a "
                             "kvpool data server, one of an older version, "
                             "or one that requires TLS)"
                           : "connection closed in the middle of the answer");
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      // A TLS node that fails the handshake on our HELLO may close before
      // reading all of it, which resets the connection.
      const bool maybe_tls =
          link.ssl == nullptr && got == 0 && err == ECONNRESET;
      return fail("receive: " + (err == EPROTO ? tls_error : ErrnoText(err)) +
                  (maybe_tls ? " (a node that requires TLS?)" : ""));
    }
    const int r = PollUntil(fd, wants, deadline);
    if (r == 0) return timed_out("the answer");
    if (r < 0) return fail("poll: " + ErrnoText(errno));
  }
  const std::string_view server_id(
      reinterpret_cast<const char*>(raw) + wire::kHeaderSize,
      static_cast<size_t>(rh.body_len));
  // An OK naming another node would be a broken server; refuse it too.
  if (rh.status != 0 || server_id != node_id) {
    return Status(ErrorCode::TRANSFER_FAIL,
                  "data endpoint " + endpoint +
                      " is now a different node: expected node '" +
                      Printable(node_id) + "'" +
                      (server_id.empty()
                           ? std::string(", refused")
                           : ", found node '" + Printable(server_id) + "'"));
  }
  return Status::OK();
}

Status TcpDataClient::Impl::TlsHandshake(const Link& link,
                                         const std::string& endpoint,
                                         const std::string& host) {
  const auto deadline = Clock::now() + options_.handshake_timeout;
  auto fail = [&](const std::string& why) {
    return Status(ErrorCode::TRANSFER_FAIL,
                  "TLS handshake with " + endpoint + " failed: " + why);
  };
  SSL* ssl = link.ssl;
  // The node's certificate must name the host the endpoint names: an IP
  // address is matched against its IP SANs, a name against its DNS names.
  asio::error_code ec;
  asio::ip::make_address(host, ec);
  if (!ec) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1) {
      return fail("cannot verify against address " + host);
    }
  } else {
    if (SSL_set1_host(ssl, host.c_str()) != 1 ||
        SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
      return fail("cannot verify against host name " + host);
    }
  }
  SSL_set_connect_state(ssl);
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int r = SSL_do_handshake(ssl);
    if (r == 1) return Status::OK();
    const int err = SSL_get_error(ssl, r);
    short wants;
    if (err == SSL_ERROR_WANT_READ) {
      wants = POLLIN;
    } else if (err == SSL_ERROR_WANT_WRITE) {
      wants = POLLOUT;
    } else {
      const long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        return fail("the node's certificate did not verify: " +
                    std::string(X509_verify_cert_error_string(verify)));
      }
      if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN) {
        const int e = errno;
        return fail((e == 0 ? std::string("connection closed") : ErrnoText(e)) +
                    " (is the node serving plaintext on its data plane?)");
      }
      const std::string why = TlsErrorText();
      return fail(why + (why.find("wrong version number") != std::string::npos
                             ? " (is the node serving plaintext on its data "
                               "plane?)"
                             : ""));
    }
    const int p = PollUntil(link.fd, wants, deadline);
    if (p == 0) {
      return fail("timed out after " +
                  std::to_string(options_.handshake_timeout.count()) + " ms");
    }
    if (p < 0) return fail("poll: " + ErrnoText(errno));
  }
}

Result<std::unique_ptr<TcpDataClient::Impl::Connection>>
TcpDataClient::Impl::Connect(const std::string& endpoint,
                             const std::string& node_id, uint64_t generation) {
  if (!tls_setup_error_.empty()) {
    return Status(ErrorCode::TRANSFER_FAIL, tls_setup_error_);
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
      conn->ssl.reset(SSL_new(tls_.get()));
      BIO* bio = conn->ssl ? BIO_new(NoSigpipeMethod()) : nullptr;
      if (bio == nullptr) {
        last = Status(ErrorCode::TRANSFER_FAIL,
                      "cannot set up TLS: " + TlsErrorText());
        continue;
      }
      BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(
                            conn->socket.native_handle())));
      BIO_set_init(bio, 1);
      SSL_set_bio(conn->ssl.get(), bio, bio);  // the SSL owns the BIO now
      last = TlsHandshake(conn->link(), endpoint, host);
      if (!last.ok()) continue;
    }
    // Nothing is sent or received on the connection before the server has
    // proved to be the expected node.
    last = Handshake(conn->link(), endpoint, node_id);
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

Result<std::unique_ptr<TcpDataClient::Impl::Connection>>
TcpDataClient::Impl::Take(const std::string& endpoint,
                          const std::string& node_id, bool* reused) {
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

void TcpDataClient::Impl::Give(const std::string& endpoint,
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

void TcpDataClient::Impl::DropIdle(const std::string& endpoint,
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

void TcpDataClient::Impl::Forget(const std::string& endpoint) {
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

template <typename OpT>
bool TcpDataClient::Impl::Exchange(Connection& conn, std::span<OpT> ops,
                                   std::span<const uint32_t> batch,
                                   IoFailure* failure) {
  constexpr bool kIsRead = std::is_same_v<OpT, ReadOp>;
  const Link link = conn.link();
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t payload = 0;
  for (uint32_t idx : batch) payload += ops[idx].length;

  std::vector<uint8_t> request(wire::kHeaderSize +
                               size_t{n} * wire::kRangeSize);
  wire::Header h;
  h.op = static_cast<uint16_t>(kIsRead ? wire::Op::kRead : wire::Op::kWrite);
  h.count = n;
  h.body_len = uint64_t{n} * wire::kRangeSize + (kIsRead ? 0 : payload);
  wire::EncodeHeader(h, request.data());
  for (uint32_t i = 0; i < n; ++i) {
    const OpT& op = ops[batch[i]];
    wire::EncodeRange(
        {op.segment_id, op.offset, op.length, op.grant.offset, op.grant.length,
         op.grant.token},
        request.data() + wire::kHeaderSize + i * wire::kRangeSize);
  }
  // Header, ranges and (for WRITE) every payload leave in gathered sends
  // straight from the caller's buffers.
  std::vector<iovec> iov;
  iov.reserve(kIsRead ? 1 : n + 1);
  iov.push_back(Iov(request.data(), request.size()));
  if constexpr (!kIsRead) {
    for (uint32_t idx : batch)
      iov.push_back(Iov(ops[idx].src, ops[idx].length));
  }
  return SendAndCollect<kIsRead>(link, h.op, iov, ops, batch, failure);
}

template <typename OpT>
Status TcpDataClient::Impl::Run(const std::string& endpoint,
                                const std::string& node_id,
                                std::span<OpT> ops) {
  if (Status s = CheckNodeId(node_id); !s.ok()) {
    for (OpT& op : ops) op.result = ErrorCode::INVALID_PARAMS;
    return s;
  }
  // Ops the server would reject anyway (or that would make us touch a null
  // buffer) are settled here and never sent.
  std::vector<uint32_t> sendable;
  sendable.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    OpT& op = ops[i];
    if (op.length == 0 || op.length > wire::kMaxPayload ||
        OpBuffer(op) == nullptr) {
      op.result = ErrorCode::INVALID_PARAMS;
    } else {
      op.result = ErrorCode::OK;
      sendable.push_back(static_cast<uint32_t>(i));
    }
  }
  if (sendable.empty()) return Status::OK();

  // Split into frames within the server's limits; all go over one connection.
  std::vector<std::span<const uint32_t>> batches;
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < sendable.size() && end - begin < wire::kMaxOps &&
           bytes + ops[sendable[end]].length <= wire::kMaxPayload) {
      bytes += ops[sendable[end]].length;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }

  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            return Exchange(conn, ops, batches[i], failure);
                          });
  if (!s.ok()) {
    for (OpT& op : ops) op.result = s.code();
  }
  return s;
}

template <typename F>
Status TcpDataClient::Impl::OnConnection(const std::string& endpoint,
                                         const std::string& node_id,
                                         size_t exchanges, F&& exchange) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto conn = Take(endpoint, node_id, &reused);
    if (!conn.ok()) return conn.status();
    IoFailure failure;
    bool ok = true;
    for (size_t i = 0; i < exchanges && ok; ++i) {
      ok = exchange(**conn, i, &failure);
    }
    if (ok) {
      Give(endpoint, node_id, std::move(*conn));
      return Status::OK();
    }
    // The other idle connections most likely share the failed one's fate
    // (the node restarted or died); drop them so they are not tried next.
    DropIdle(endpoint, node_id);
    // A pooled connection the node closed while it sat idle says nothing
    // about the node now: retry once on a fresh one, which must pass the
    // HELLO again (a different process may hold the port by now). Every op
    // is idempotent, so repeating a partly done batch is harmless.
    if (attempt == 0 && reused && failure.peer_closed) continue;
    return Status(ErrorCode::TRANSFER_FAIL,
                  "data transfer with node '" + Printable(node_id) + "' at " +
                      endpoint + " failed: " + failure.message);
  }
}

bool TcpDataClient::Impl::ExchangeKeys(Connection& conn,
                                       std::span<KeyReadOp> ops,
                                       std::span<const uint32_t> batch,
                                       IoFailure* failure) {
  const Link link = conn.link();
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t body_len = 0;
  for (uint32_t idx : batch) {
    body_len +=
        wire::kKeyReadFixedSize + ops[idx].tenant.size() + ops[idx].key.size();
  }
  std::vector<uint8_t> request(wire::kHeaderSize +
                               static_cast<size_t>(body_len));
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kSsdRead);
  h.count = n;
  h.body_len = body_len;
  wire::EncodeHeader(h, request.data());
  uint8_t* p = request.data() + wire::kHeaderSize;
  for (uint32_t idx : batch) {
    const KeyReadOp& op = ops[idx];
    wire::PutLe<uint64_t>(p, op.length);
    wire::PutLe<uint32_t>(p + 8, static_cast<uint32_t>(op.tenant.size()));
    wire::PutLe<uint32_t>(p + 12, static_cast<uint32_t>(op.key.size()));
    wire::PutToken(op.token.size() == wire::kTokenSize
                       ? reinterpret_cast<const uint8_t*>(op.token.data())
                       : nullptr,
                   p + 16);
    p += wire::kKeyReadFixedSize;
    std::memcpy(p, op.tenant.data(), op.tenant.size());
    p += op.tenant.size();
    std::memcpy(p, op.key.data(), op.key.size());
    p += op.key.size();
  }
  std::vector<iovec> iov(1, Iov(request.data(), request.size()));
  return SendAndCollect<true>(link, h.op, iov, ops, batch, failure);
}

Status TcpDataClient::Impl::ReadKeys(const std::string& endpoint,
                                     const std::string& node_id,
                                     std::span<KeyReadOp> ops) {
  if (Status s = CheckNodeId(node_id); !s.ok()) {
    for (KeyReadOp& op : ops) op.result = ErrorCode::INVALID_PARAMS;
    return s;
  }
  // Ops the server would refuse (and that would make it refuse the whole
  // request) are settled here and never sent.
  std::vector<uint32_t> sendable;
  sendable.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    KeyReadOp& op = ops[i];
    if (op.length == 0 || op.length > wire::kMaxPayload || op.dest == nullptr ||
        !ValidKey(op.key) || op.tenant.size() > wire::kMaxTenantSize) {
      op.result = ErrorCode::INVALID_PARAMS;
    } else {
      op.result = ErrorCode::OK;
      sendable.push_back(static_cast<uint32_t>(i));
    }
  }
  if (sendable.empty()) return Status::OK();

  // Split into requests within the frame limits and the buffer budget; an
  // op larger than the budget on its own still goes, alone.
  std::vector<std::span<const uint32_t>> batches;
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t body = 0;
    uint64_t slots = 0;
    while (end < sendable.size() && end - begin < wire::kMaxOps) {
      const KeyReadOp& op = ops[sendable[end]];
      const uint64_t desc =
          wire::kKeyReadFixedSize + op.tenant.size() + op.key.size();
      const uint64_t slot = wire::RoundUpToSsdAlign(op.length);
      if (end > begin && (body + desc > wire::kMaxKeyFrameBody ||
                          slots + slot > options_.max_ssd_read_frame_bytes)) {
        break;
      }
      body += desc;
      slots += slot;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }

  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            return ExchangeKeys(conn, ops, batches[i], failure);
                          });
  if (!s.ok()) {
    for (KeyReadOp& op : ops) op.result = s.code();
  }
  return s;
}

bool TcpDataClient::Impl::ExchangePrefetch(
    Connection& conn, const std::string& tenant,
    const std::vector<std::string>& keys,
    const std::vector<std::string>* tokens, std::span<const uint32_t> batch,
    std::vector<ErrorCode>& results, bool* unsupported, IoFailure* failure) {
  if (*unsupported) return true;  // an earlier batch learned it already
  const Link link = conn.link();
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t body_len = wire::kLenPrefixSize + tenant.size();
  for (uint32_t idx : batch)
    body_len += wire::kLenPrefixSize + keys[idx].size() + wire::kTokenSize;
  std::vector<uint8_t> request(wire::kHeaderSize +
                               static_cast<size_t>(body_len));
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kPrefetch);
  h.count = n;
  h.body_len = body_len;
  wire::EncodeHeader(h, request.data());
  uint8_t* p = request.data() + wire::kHeaderSize;
  auto put = [&p](const std::string& s) {
    wire::PutLe<uint32_t>(p, static_cast<uint32_t>(s.size()));
    p += wire::kLenPrefixSize;
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(tenant);
  for (uint32_t idx : batch) {
    put(keys[idx]);
    const bool has = tokens && idx < tokens->size() &&
                     (*tokens)[idx].size() == wire::kTokenSize;
    wire::PutToken(
        has ? reinterpret_cast<const uint8_t*>((*tokens)[idx].data()) : nullptr,
        p);
    p += wire::kTokenSize;
  }
  std::vector<iovec> iov(1, Iov(request.data(), request.size()));
  if (!TransferAll(link, iov, /*sending=*/true, "send request", failure)) {
    return false;
  }

  wire::Header rh;
  std::vector<ErrorCode> codes;
  size_t no_data = 0;
  if (!ReceiveHead(link, h.op, n, &rh, &codes, {}, &no_data, failure)) {
    return false;
  }
  if (rh.status != 0) {
    ErrorCode code = ErrorCodeFromInt(rh.status);
    // INVALID_PARAMS for the whole frame: the node has no prefetch handler
    // (it refuses keys one by one, and this client sends no bad ones).
    if (code == ErrorCode::INVALID_PARAMS) {
      *unsupported = true;
      code = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
    for (uint32_t idx : batch) results[idx] = code;
    return true;
  }
  if (rh.body_len != uint64_t{n} * wire::kResultSize) {
    return ProtocolError(failure, "body length mismatch");
  }
  for (uint32_t i = 0; i < n; ++i) results[batch[i]] = codes[i];
  return true;
}

Status TcpDataClient::Impl::Prefetch(const std::string& endpoint,
                                     const std::string& node_id,
                                     const std::string& tenant,
                                     const std::vector<std::string>& keys,
                                     const std::vector<std::string>* tokens,
                                     std::vector<ErrorCode>* results_out) {
  std::vector<ErrorCode> local;
  std::vector<ErrorCode>& results = results_out ? *results_out : local;
  results.assign(keys.size(), ErrorCode::OK);
  auto fail_all = [&](Status s) {
    std::fill(results.begin(), results.end(), s.code());
    return s;
  };
  if (Status s = CheckNodeId(node_id); !s.ok()) return fail_all(s);
  if (tenant.size() > wire::kMaxTenantSize) {
    return fail_all(Status(ErrorCode::INVALID_PARAMS,
                           "tenant of " + std::to_string(tenant.size()) +
                               " bytes, at most " +
                               std::to_string(wire::kMaxTenantSize)));
  }
  std::vector<uint32_t> sendable;
  sendable.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (ValidKey(keys[i])) {
      sendable.push_back(static_cast<uint32_t>(i));
    } else {
      results[i] = ErrorCode::INVALID_PARAMS;
    }
  }
  if (sendable.empty()) return Status::OK();

  std::vector<std::span<const uint32_t>> batches;
  const uint64_t head = wire::kLenPrefixSize + tenant.size();
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t body = head;
    while (end < sendable.size() && end - begin < wire::kMaxOps) {
      const uint64_t entry =
          wire::kLenPrefixSize + keys[sendable[end]].size() + wire::kTokenSize;
      if (body + entry > wire::kMaxKeyFrameBody) break;
      body += entry;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }

  bool unsupported = false;
  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            if (i == 0)
                              unsupported = false;  // a retry starts over
                            return ExchangePrefetch(conn, tenant, keys, tokens,
                                                    batches[i], results,
                                                    &unsupported, failure);
                          });
  if (!s.ok()) return fail_all(s);
  if (unsupported) {
    for (uint32_t idx : sendable) {
      results[idx] = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  "node '" + Printable(node_id) + "' at " + endpoint +
                      " does not serve PREFETCH");
  }
  return Status::OK();
}

TcpDataClient::TcpDataClient() : TcpDataClient(TcpDataClientOptions{}) {}

TcpDataClient::TcpDataClient(const TcpDataClientOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

TcpDataClient::~TcpDataClient() = default;

Status TcpDataClient::Read(const std::string& endpoint,
                           const std::string& expected_node_id,
                           std::span<ReadOp> ops) {
  return impl_->Run(endpoint, expected_node_id, ops);
}

Status TcpDataClient::Write(const std::string& endpoint,
                            const std::string& expected_node_id,
                            std::span<WriteOp> ops) {
  return impl_->Run(endpoint, expected_node_id, ops);
}

Status TcpDataClient::ReadKeys(const std::string& endpoint,
                               const std::string& expected_node_id,
                               std::span<KeyReadOp> ops) {
  return impl_->ReadKeys(endpoint, expected_node_id, ops);
}

Status TcpDataClient::Prefetch(const std::string& endpoint,
                               const std::string& expected_node_id,
                               const std::string& tenant,
                               const std::vector<std::string>& keys,
                               std::vector<ErrorCode>* results,
                               const std::vector<std::string>* tokens) {
  return impl_->Prefetch(endpoint, expected_node_id, tenant, keys, tokens,
                         results);
}

void TcpDataClient::Forget(const std::string& endpoint) {
  impl_->Forget(endpoint);
}

}  // namespace kvpool
