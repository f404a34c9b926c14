// A raw TCP client for the HTTP limit tests: it does what httplib::Client
// will not, such as sending half a request, or far too much of one, and it
// shows exactly how and when the server closes.
#ifndef KVPOOL_TESTS_RAW_HTTP_CLIENT_H_
#define KVPOOL_TESTS_RAW_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kvpool::testing {

class RawHttpClient {
 public:
  struct Reply {
    std::string data;
    bool closed = false;  // EOF or a reset before the timeout
    bool reset = false;
  };

  explicit RawHttpClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      Close();
    }
  }
  ~RawHttpClient() { Close(); }
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const { return fd_ >= 0; }

  // False once the server has closed or reset the connection.
  bool Send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Sends `chunk` `times` times; false as soon as the server stops taking it.
  bool SendRepeated(std::string_view chunk, size_t times) {
    for (size_t i = 0; i < times; ++i) {
      if (!Send(chunk)) return false;
    }
    return true;
  }

  // Half-closes: the server reads EOF after the request, as from a client
  // that has nothing more to send.
  void FinishSending() { ::shutdown(fd_, SHUT_WR); }

  // Reads until the server closes or `timeout` passes.
  Reply ReadUntilClose(std::chrono::milliseconds timeout) {
    Reply r;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[16384];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return r;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        r.data.append(buf, static_cast<size_t>(n));
        continue;
      }
      r.closed = true;
      r.reset = n < 0 && errno == ECONNRESET;
      return r;
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// 414 for "HTTP/1.1 414 URI Too Long\r\n...", -1 if `response` is not one.
inline int HttpStatus(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return -1;
  return std::atoi(response.substr(9, 3).c_str());
}

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_RAW_HTTP_CLIENT_H_
