#include "common/bounded_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <string_view>

#include "common/thread_name.h"

namespace kvpool {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Waits are cut into slices this long, so that Stop() and a connection
// waiting for a worker are noticed without a wakeup channel per connection.
constexpr int kPollSliceMs = 20;
// What the compiled httplib accepts per line, CRLF included (its
// CPPHTTPLIB_HEADER_MAX_LENGTH and CPPHTTPLIB_REQUEST_URI_MAX_LENGTH).
constexpr size_t kLibraryLineMax = 8192;
constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kNpos = std::string::npos;

// httplib's accept loop hands each socket to a TaskQueue; running it inline
// lets process_and_close_socket decide between the queue and a 503 with the
// socket in hand, which httplib's ThreadPool (an unbounded list of closures)
// cannot.
class InlineTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

// The shape of the router's errors ({"error", "code"}), so that a client of
// either server parses a refusal like any other error. `message` is ours and
// needs no JSON escaping.
std::string RefusalResponse(int status, const std::string& message) {
  const std::string body =
      "{\"error\":\"" + message + "\",\"code\":\"" +
      (status == 503 ? "UNAVAILABLE_IN_CURRENT_STATUS" : "INVALID_PARAMS") +
      "\"}";
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " +
                  ReasonPhrase(status) +
                  "\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  r += "\r\n";
  r += body;
  return r;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view TrimSpaceTab(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Rounded up, so that a wait never ends before its deadline.
int MsUntil(Clock::time_point t) {
  const auto left = t - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::string Ms(int ms) { return std::to_string(ms) + " ms"; }

void IpAndPort(const sockaddr_storage& a, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

}  // namespace

// One accepted socket, as httplib reads and writes it. The head of each
// request is buffered here in full, and checked, before httplib sees a byte
// of it; after the head, reads are capped at the body the head declared.
class BoundedHttpServer::Connection : public httplib::Stream {
 public:
  enum class Wait { kReady, kTimeout, kGaveUp, kStopped, kError };
  enum class Head { kReady, kClosed, kSilentTimeout, kRefused };

  Connection(int fd, const HttpLimits& limits,
             const std::atomic<bool>& stopping)
      : fd_(fd),
        limits_(limits),
        stopping_(stopping),
        buf_(limits.max_request_line_bytes + limits.max_header_bytes + 2 +
             kReadChunk) {}

  // Between requests on a kept-alive connection: false when it should close
  // (idle too long, `give_up`, Stop()).
  bool AwaitNextRequest(const std::function<bool()>& give_up) {
    if (end_ > begin_) return true;  // pipelined
    const auto deadline =
        Clock::now() + milliseconds(limits_.keep_alive_timeout_ms);
    return WaitFd(POLLIN, deadline, &give_up) == Wait::kReady;
  }

  void BeginRequest(Clock::time_point read_deadline) {
    read_deadline_ = read_deadline;
    write_started_ = false;
    timed_out_ = false;
    line_end_ = kNpos;
    line_start_ = scan_ = head_left_ = body_left_ = 0;
    chunked_ = false;
    refusal_ = 0;
    refusal_message_.clear();
  }

  Head ReadHead() {
    for (;;) {
      if (ScanHead()) return refusal_ != 0 ? Head::kRefused : Head::kReady;
      switch (FillBuffer()) {
        case Fill::kOk:
          continue;
        case Fill::kTimeout:
          timed_out_ = true;
          if (end_ == begin_) return Head::kSilentTimeout;
          Refuse(408, "request head not received within " +
                          Ms(limits_.read_timeout_ms));
          return Head::kRefused;
        case Fill::kClosed:
          return Head::kClosed;
      }
    }
  }

  // After httplib is done with a request: true if the connection stands at
  // the start of the next one. A declared body httplib did not read (a GET
  // with one, say) is skipped, under the request's deadline.
  bool FinishRequest() {
    if (broken_ || refusal_ != 0 || head_left_ > 0 || chunked_) return false;
    while (body_left_ > 0) {
      if (begin_ == end_ && FillBuffer() != Fill::kOk) return false;
      const size_t n = std::min(body_left_, end_ - begin_);
      begin_ += n;
      body_left_ -= n;
    }
    return true;
  }

  // Sends the refusal that ReadHead() or read() recorded, then reads and
  // drops what the client still sends until the request's deadline: closing
  // with unread data makes the kernel send a reset, and a client that is
  // still sending (a long URI) might then never read the status. The clock
  // is checked as well as readiness, since a fast sender is always ready.
  void SendRefusal() {
    const std::string r = RefusalResponse(refusal_, refusal_message_);
    write_started_ = false;
    for (size_t off = 0; off < r.size();) {
      const ssize_t n = Send(r.data() + off, r.size() - off);
      if (n <= 0) return;
      off += size_t(n);
    }
    ::shutdown(fd_, SHUT_WR);
    while (Clock::now() < read_deadline_ &&
           WaitFd(POLLIN, read_deadline_) == Wait::kReady) {
      const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
      if (n == 0) return;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return;
      }
    }
  }

  int refusal() const { return refusal_; }
  bool chunked() const { return chunked_; }
  bool timed_out() const { return timed_out_; }

  // httplib::Stream
  bool is_readable() const override {
    return end_ > begin_ || WaitFd(POLLIN, read_deadline_) == Wait::kReady;
  }
  bool is_writable() const override {
    const auto deadline =
        write_started_ ? write_deadline_
                       : Clock::now() + milliseconds(limits_.write_timeout_ms);
    return WaitFd(POLLOUT, deadline) == Wait::kReady;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (refusal_ != 0 || broken_) return -1;
    if (size == 0) return 0;
    size_t allowed;
    if (head_left_ > 0) {
      allowed = std::min(size, head_left_);
    } else if (body_left_ > 0) {
      allowed = std::min(size, body_left_);
    } else if (chunked_) {
      Refuse(413, "chunked body larger than " +
                      std::to_string(limits_.max_body_bytes) + " bytes");
      return -1;
    } else {
      // Neither Content-Length nor chunked: the body is empty (RFC 9112
      // 6.3), where httplib would read a POST's body until the peer closes.
      return 0;
    }
    for (;;) {
      if (end_ > begin_) {
        const size_t n = std::min(allowed, end_ - begin_);
        std::memcpy(ptr, buf_.data() + begin_, n);
        begin_ += n;
        (head_left_ > 0 ? head_left_ : body_left_) -= n;
        return ssize_t(n);
      }
      if (head_left_ == 0 && allowed >= kReadChunk) {
        // A large body goes straight into httplib's buffer.
        const Wait w = WaitFd(POLLIN, read_deadline_);
        if (w == Wait::kTimeout) return BodyTimeout();
        if (w != Wait::kReady) return Broken(-1);
        const ssize_t n = ::recv(fd_, ptr, allowed, MSG_DONTWAIT);
        if (n > 0) {
          body_left_ -= size_t(n);
          return n;
        }
        if (n == 0) return Broken(0);
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          continue;
        }
        return Broken(-1);
      }
      switch (FillBuffer()) {
        case Fill::kOk:
          continue;
        case Fill::kTimeout:
          return BodyTimeout();
        case Fill::kClosed:
          return Broken(0);
      }
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    // Once a limit refused the request, SendRefusal() answers it; httplib's
    // own reply to the failed read (a bare 400) is dropped.
    if (refusal_ != 0 || broken_) return -1;
    return Send(ptr, size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = 0;
    ip.clear();
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      IpAndPort(a, ip, port);
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = 0;
    ip.clear();
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      IpAndPort(a, ip, port);
    }
  }
  socket_t socket() const override { return fd_; }

 private:
  enum class Fill { kOk, kTimeout, kClosed };

  // Polls in slices until `events`, the deadline, `give_up` or Stop(). A
  // socket that is ready counts even after the deadline: a request that sat
  // complete in the kernel while its connection queued is still served.
  Wait WaitFd(short events, Clock::time_point deadline,
              const std::function<bool()>* give_up = nullptr) const {
    for (;;) {
      if (stopping_.load(std::memory_order_relaxed)) return Wait::kStopped;
      if (give_up != nullptr && (*give_up)()) return Wait::kGaveUp;
      const int left = MsUntil(deadline);
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, std::min(left, kPollSliceMs));
      if (r > 0) return Wait::kReady;  // errors show in the recv/send after
      if (r < 0 && errno != EINTR) return Wait::kError;
      if (left == 0) return Wait::kTimeout;
    }
  }

  // Appends what the socket has to buf_, waiting until the read deadline.
  Fill FillBuffer() {
    if (begin_ == end_) begin_ = end_ = 0;
    if (buf_.size() - end_ < kReadChunk && begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    for (;;) {
      const Wait w = WaitFd(POLLIN, read_deadline_);
      if (w == Wait::kTimeout) return Fill::kTimeout;
      if (w != Wait::kReady) return Fill::kClosed;
      const ssize_t n =
          ::recv(fd_, buf_.data() + end_, buf_.size() - end_, MSG_DONTWAIT);
      if (n > 0) {
        end_ += size_t(n);
        return Fill::kOk;
      }
      if (n == 0) return Fill::kClosed;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Fill::kClosed;
      }
    }
  }

  // Looks through the newly buffered bytes for the end of the request line
  // and of the head; true once the head is complete or refused. Offsets are
  // relative to begin_, which a FillBuffer() compaction keeps valid.
  bool ScanHead() {
    const char* p = buf_.data() + begin_;
    const size_t n = end_ - begin_;
    while (scan_ < n) {
      const void* q = std::memchr(p + scan_, '\n', n - scan_);
      if (q == nullptr) {
        scan_ = n;
        break;
      }
      const size_t nl = size_t(static_cast<const char*>(q) - p);
      const size_t len = nl - line_start_;  // '\r' included, '\n' not
      if (line_end_ == kNpos) {
        const size_t text = len > 0 && p[nl - 1] == '\r' ? len - 1 : len;
        if (text > limits_.max_request_line_bytes) return RequestLineTooLong();
        line_end_ = nl;
      } else {
        if (len + 1 > kLibraryLineMax) return HeaderLineTooLong();
        if (nl - line_end_ > limits_.max_header_bytes) return HeadersTooLong();
        // httplib ends the head only at a CRLF line (bare LF lines it skips).
        if (len == 1 && p[line_start_] == '\r') {
          head_left_ = nl + 1;
          ParseHead(p);
          return true;
        }
      }
      line_start_ = scan_ = nl + 1;
    }
    // Incomplete: refuse as soon as the limit can no longer be met, which is
    // what keeps the buffer small.
    if (line_end_ == kNpos) {
      if (n - line_start_ > limits_.max_request_line_bytes + 1) {
        return RequestLineTooLong();
      }
    } else {
      if (n - (line_end_ + 1) > limits_.max_header_bytes) {
        return HeadersTooLong();
      }
      if (n - line_start_ + 1 > kLibraryLineMax) return HeaderLineTooLong();
    }
    return false;
  }

  bool RequestLineTooLong() {
    Refuse(414, "request line longer than " +
                    std::to_string(limits_.max_request_line_bytes) + " bytes");
    return true;
  }
  bool HeadersTooLong() {
    Refuse(431, "headers longer than " +
                    std::to_string(limits_.max_header_bytes) + " bytes");
    return true;
  }
  bool HeaderLineTooLong() {
    Refuse(431, "header line longer than " + std::to_string(kLibraryLineMax) +
                    " bytes");
    return true;
  }

  // Reads the framing headers of the complete head at `p` and sets the body
  // httplib may read. Header names are matched as httplib matches them (the
  // text before ':', any case) and values must be plain, since httplib would
  // URL-decode them: what is checked here is what httplib acts on.
  void ParseHead(const char* p) {
    int cl_count = 0, te_count = 0, ce_count = 0;
    std::string_view cl, te, ce;
    size_t start = line_end_ + 1;
    const size_t end = head_left_ - 2;  // the blank line
    while (start < end) {
      const size_t nl = size_t(
          static_cast<const char*>(std::memchr(p + start, '\n', end - start)) -
          p);
      std::string_view line(p + start, nl - start);
      start = nl + 1;
      if (line.empty() || line.back() != '\r') continue;  // httplib skips it
      line.remove_suffix(1);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view name = line.substr(0, colon);
      if (name.find_first_of(" \t") != std::string_view::npos) {
        Refuse(400, "whitespace in a header name");
        return;
      }
      const std::string_view value = TrimSpaceTab(line.substr(colon + 1));
      if (EqualsNoCase(name, "Content-Length")) {
        ++cl_count;
        cl = value;
      } else if (EqualsNoCase(name, "Transfer-Encoding")) {
        ++te_count;
        te = value;
      } else if (EqualsNoCase(name, "Content-Encoding")) {
        ++ce_count;
        ce = value;
      }
    }
    if (te_count > 0) {
      if (te_count > 1 || !EqualsNoCase(te, "chunked")) {
        Refuse(501, "Transfer-Encoding other than chunked");
        return;
      }
      if (cl_count > 0) {
        Refuse(400, "both Content-Length and Transfer-Encoding");
        return;
      }
      chunked_ = true;
      body_left_ = limits_.max_body_bytes;
    } else if (cl_count > 0) {
      if (cl_count > 1) {
        Refuse(400, "more than one Content-Length");
        return;
      }
      if (cl.empty() || cl.size() > 19 ||
          cl.find_first_not_of("0123456789") != std::string_view::npos) {
        Refuse(400, "Content-Length is not a number");
        return;
      }
      const uint64_t len = std::stoull(std::string(cl));
      if (len > limits_.max_body_bytes) {
        Refuse(413, "body larger than " +
                        std::to_string(limits_.max_body_bytes) + " bytes");
        return;
      }
      body_left_ = size_t(len);
    }
    // httplib inflates gzip, deflate and br bodies without a bound on the
    // result, so a 4 KiB body could become gigabytes.
    if ((chunked_ || body_left_ > 0) && ce_count > 0 &&
        !(ce_count == 1 && EqualsNoCase(ce, "identity"))) {
      Refuse(415, "Content-Encoding is not accepted");
    }
  }

  ssize_t Send(const char* ptr, size_t size) {
    if (!write_started_) {
      write_started_ = true;
      write_deadline_ = Clock::now() + milliseconds(limits_.write_timeout_ms);
    }
    for (;;) {
      const Wait w = WaitFd(POLLOUT, write_deadline_);
      if (w == Wait::kTimeout) timed_out_ = true;
      if (w != Wait::kReady) return Broken(-1);
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Broken(-1);
      }
    }
  }

  void Refuse(int status, std::string message) {
    refusal_ = status;
    refusal_message_ = std::move(message);
  }
  ssize_t BodyTimeout() {
    timed_out_ = true;
    Refuse(408, "request not received within " + Ms(limits_.read_timeout_ms));
    return -1;
  }
  ssize_t Broken(ssize_t ret) {
    broken_ = true;
    return ret;
  }

  const int fd_;
  const HttpLimits& limits_;
  const std::atomic<bool>& stopping_;
  std::vector<char> buf_;
  size_t begin_ = 0;  // buf_[begin_, end_) is read but not yet consumed
  size_t end_ = 0;

  Clock::time_point read_deadline_;
  Clock::time_point write_deadline_;
  bool write_started_ = false;
  bool timed_out_ = false;
  bool broken_ = false;  // EOF or a socket error: the connection is done

  // Head scan state, relative to begin_.
  size_t line_end_ = kNpos;  // the request line's '\n'
  size_t line_start_ = 0;
  size_t scan_ = 0;

  size_t head_left_ = 0;  // head bytes httplib has yet to read
  size_t body_left_ = 0;  // body bytes httplib may still read
  bool chunked_ = false;
  int refusal_ = 0;  // HTTP status of a refusal, 0 if none
  std::string refusal_message_;
};

BoundedHttpServer::BoundedHttpServer(const HttpLimits& limits)
    : limits_(limits) {}

BoundedHttpServer::~BoundedHttpServer() { Stop(); }

Status BoundedHttpServer::Start(const std::string& host, int port) {
  const HttpLimits& l = limits_;
  std::string bad;
  if (l.max_request_line_bytes < 16 || l.max_request_line_bytes > (1 << 20)) {
    bad = "max_request_line_bytes must be in [16, 1 MiB]";
  } else if (l.max_header_bytes < 64 || l.max_header_bytes > (1 << 20)) {
    bad = "max_header_bytes must be in [64, 1 MiB]";
  } else if (l.read_timeout_ms <= 0 || l.write_timeout_ms <= 0 ||
             l.keep_alive_timeout_ms < 0) {
    bad = "timeouts must be positive (keep_alive_timeout_ms may be 0)";
  } else if (l.keep_alive_max_requests < 1) {
    bad = "keep_alive_max_requests must be at least 1";
  } else if (l.worker_threads < 1 || l.worker_threads > 4096) {
    bad = "worker_threads must be in [1, 4096]";
  } else if (l.listen_backlog < 1) {
    bad = "listen_backlog must be at least 1";
  }
  if (!bad.empty()) return Status(ErrorCode::INVALID_PARAMS, "HTTP: " + bad);

  // Our Connection enforces these; httplib also puts the timeouts on the
  // socket and advertises the keep-alive pair in its Keep-Alive header
  // (rounded down to seconds, so that a client never counts on more).
  set_read_timeout(l.read_timeout_ms / 1000, (l.read_timeout_ms % 1000) * 1000);
  set_write_timeout(l.write_timeout_ms / 1000,
                    (l.write_timeout_ms % 1000) * 1000);
  set_keep_alive_max_count(l.keep_alive_max_requests);
  set_keep_alive_timeout(l.keep_alive_timeout_ms / 1000);
  set_payload_max_length(l.max_body_bytes);
  new_task_queue = [] { return new InlineTaskQueue; };

  if (port == 0) {
    port_ = bind_to_any_port(host.c_str());
  } else {
    port_ = bind_to_port(host.c_str(), port) ? port : -1;
  }
  if (port_ <= 0) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot bind HTTP on " + host + ":" + std::to_string(port));
  }
  // A second listen() on a listening socket only changes its backlog.
  ::listen(svr_sock_, l.listen_backlog);
  for (size_t i = 0; i < l.worker_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  accept_thread_ = std::thread([this] {
    SetThreadName("kvpool-http-acc");
    listen_after_bind();
  });
  return Status::OK();
}

void BoundedHttpServer::Stop() {
  // Not httplib's stop(): it does nothing until the accept thread has marked
  // the server running, so a Stop() right after Start() would hang the join.
  const socket_t s = svr_sock_.exchange(INVALID_SOCKET);
  if (s != INVALID_SOCKET) {
    ::shutdown(s, SHUT_RDWR);
    ::close(s);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  std::deque<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
    queued_ = 0;
  }
  for (const Pending& p : left) ::close(p.fd);
}

HttpServerStats BoundedHttpServer::stats() const {
  HttpServerStats s;
  s.accepted = accepted_.load();
  s.rejected_busy = rejected_busy_.load();
  s.refused = refused_.load();
  s.timed_out = timed_out_.load();
  s.requests = requests_.load();
  s.active = active_.load();
  s.queued = queued_.load();
  return s;
}

bool BoundedHttpServer::Pressure() const {
  return queued_.load(std::memory_order_relaxed) >
         idle_.load(std::memory_order_relaxed);
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  accepted_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Idle workers are about to take what is queued, so they add room.
    if (!stopping_ &&
        queue_.size() < limits_.max_queued_connections + idle_.load()) {
      queue_.push_back({sock, Clock::now()});
      queued_ = queue_.size();
      cv_.notify_one();
      return true;
    }
  }
  // On the accept thread, so nothing here may block. What the client already
  // sent is read first: closing with unread data would send a reset, which
  // can discard the 503 before the client reads it.
  rejected_busy_.fetch_add(1);
  char sink[4096];
  for (int i = 0; i < 4 && ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT) > 0;
       ++i) {
  }
  const std::string r = RefusalResponse(
      503, "busy: " + std::to_string(limits_.worker_threads) + " workers and " +
               std::to_string(limits_.max_queued_connections) +
               " queued connections in use");
  ::send(sock, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  ::close(sock);
  return true;
}

void BoundedHttpServer::WorkerLoop() {
  SetThreadName("kvpool-http");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) return;
    const Pending p = queue_.front();
    queue_.pop_front();
    queued_ = queue_.size();
    ++active_;
    lock.unlock();
    Serve(p.fd, p.accepted);
    lock.lock();
    --active_;
  }
}

void BoundedHttpServer::Serve(int fd, Clock::time_point accepted) {
  using Head = Connection::Head;
  Connection conn(fd, limits_, stopping_);
  const milliseconds read_timeout(limits_.read_timeout_ms);
  const std::function<bool()> give_up = [this] { return Pressure(); };
  for (size_t served = 0; served < limits_.keep_alive_max_requests; ++served) {
    // The first request's time counts from accept, so a connection that
    // queued behind slow ones has no fresh allowance to spend.
    Clock::time_point deadline = accepted + read_timeout;
    if (served > 0) {
      if (!conn.AwaitNextRequest(give_up)) break;
      deadline = Clock::now() + read_timeout;
    }
    conn.BeginRequest(deadline);
    const Head head = conn.ReadHead();
    if (head == Head::kSilentTimeout) timed_out_.fetch_add(1);
    if (head == Head::kSilentTimeout || head == Head::kClosed) break;
    if (head == Head::kReady) {
      // Keep-alive only while no one waits for this worker.
      const bool last = served + 1 == limits_.keep_alive_max_requests ||
                        conn.chunked() || Pressure() || stopping_;
      bool closed = false;
      requests_.fetch_add(1);
      const bool ok = process_request(conn, last, closed, nullptr);
      if (conn.refusal() == 0) {
        if (conn.timed_out()) timed_out_.fetch_add(1);
        if (!ok || closed || last || !conn.FinishRequest()) break;
        continue;
      }
    }
    (conn.refusal() == 408 ? timed_out_ : refused_).fetch_add(1);
    conn.SendRefusal();
    break;
  }
  ::close(fd);
}

}  // namespace kvpool
