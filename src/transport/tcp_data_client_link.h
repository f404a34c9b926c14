// Blocking I/O on one connection of the TCP data client, plain or through
// TLS (tcp_data_client_tls.h). Each wait is bounded by the socket's
// SO_SNDTIMEO/SO_RCVTIMEO (the stall timeout) or by an explicit deadline,
// so a hung or vanished node cannot block a caller forever. Internal to
// the data client.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_LINK_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_LINK_H_

#include <openssl/ssl.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvpool::data_client {

using Clock = std::chrono::steady_clock;

// A connection's byte stream: the socket, read and written through `ssl`
// when the connection is TLS.
struct Link {
  int fd = -1;
  SSL* ssl = nullptr;
};

// Why an exchange failed. Only a failure on a connection that had sat in the
// pool and died in a way a closed peer explains is worth one retry.
struct IoFailure {
  std::string message;
  bool peer_closed = false;
};

std::string ErrnoText(int err);

// Waits until `fd` is ready for `events` or `deadline` has passed. Returns
// > 0 when ready (or in error, which the next send/recv reports), 0 on
// timeout, < 0 on a poll error (errno set).
int PollUntil(int fd, short events, Clock::time_point deadline);

// send(2)/recv(2) on `link`, through TLS if it has an SSL. *wants is the
// poll event to wait for after EAGAIN.
ssize_t LinkIo(const Link& link, void* p, size_t n, bool sending, short* wants);

// Moves every byte of `iov` with sendmsg/recvmsg on a blocking socket whose
// SO_SNDTIMEO/SO_RCVTIMEO bound each wait. Asio's own blocking operations
// fall back to an unbounded poll() when those timeouts fire, so they cannot
// enforce the stall timeout; the raw calls also take up to IOV_MAX buffers
// per syscall instead of Asio's 64. `iov` is consumed in place. On failure
// *failure says why, prefixed with `what`.
bool TransferAll(const Link& link, std::vector<iovec>& iov, bool sending,
                 const char* what, IoFailure* failure);

// Receives into the concatenation of buf[0, len) and extra[0, extra_len),
// from byte *got on, until at least `min` bytes are in: each recvmsg takes
// what has arrived, never past the end of the two, so nothing beyond what
// the caller knows to expect is consumed.
bool ReceiveAtLeast(const Link& link, uint8_t* buf, size_t len, uint8_t* extra,
                    size_t extra_len, size_t min, size_t* got, const char* what,
                    IoFailure* failure);

// An iovec over `len` bytes at `p` (iovec has no const).
template <typename Buf>
iovec Iov(Buf* p, uint64_t len) {
  return iovec{const_cast<uint8_t*>(p), static_cast<size_t>(len)};
}

}  // namespace kvpool::data_client

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_LINK_H_
