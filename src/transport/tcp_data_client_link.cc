#include "transport/tcp_data_client_link.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "transport/tcp_data_client_tls.h"

namespace kvpool::data_client {
namespace {

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
    } else if (err == EPROTO && !LastTlsError().empty()) {
      failure->message += LastTlsError();
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

}  // namespace

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

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

ssize_t LinkIo(const Link& link, void* p, size_t n, bool sending,
               short* wants) {
  if (link.ssl != nullptr) return TlsIo(link.ssl, p, n, sending, wants);
  *wants = sending ? POLLOUT : POLLIN;
  return sending ? ::send(link.fd, p, n, MSG_NOSIGNAL)
                 : ::recv(link.fd, p, n, 0);
}

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

}  // namespace kvpool::data_client
