// TLS on the TCP data client's connections (TcpDataClientOptions::
// tls_ca_file): the context that trusts the configured CA, a session per
// connection whose socket writes never raise SIGPIPE, the handshake that
// verifies the node's certificate against the endpoint's host, and TLS
// reads and writes in the terms of send/recv. Internal to the data client.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_TLS_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_TLS_H_

#include <openssl/ssl.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "kvpool/status.h"
#include "transport/tcp_data_client_link.h"

namespace kvpool::data_client {

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// The client's TLS configuration. Built once; thread-safe afterwards (an
// SSL_CTX may be shared by the sessions of several threads).
class TlsContext {
 public:
  // Trusts the CA certificates in the PEM file `ca_file` and offers TLS
  // 1.2 or later. A file that does not load leaves setup_error() set.
  explicit TlsContext(const std::string& ca_file);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Non-empty when the context could not be built: every connection is to
  // fail with it.
  const std::string& setup_error() const { return setup_error_; }
  // A TLS session over the connected socket `fd` (which it does not own);
  // null, with *error set, if OpenSSL cannot make one.
  SslPtr NewSession(int fd, std::string* error) const;
  // The client side of the TLS handshake on a freshly connected,
  // non-blocking socket, bounded by `timeout`; verifies the node's
  // certificate against the CA and `host` (the endpoint's host: a DNS name
  // or an IP address).
  static Status Handshake(const Link& link, const std::string& endpoint,
                          const std::string& host,
                          std::chrono::milliseconds timeout);

 private:
  struct SslCtxFree {
    void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  };
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
  std::string setup_error_;
};

// One SSL_read or SSL_write of at most `n` bytes, in the terms of
// send/recv: bytes moved, 0 when the peer closed, or -1 with errno set:
// EAGAIN when OpenSSL waits for the socket (*wants says for what: on a
// blocking socket that is SO_RCVTIMEO/SO_SNDTIMEO firing), EPROTO for a
// TLS failure (described in LastTlsError()).
ssize_t TlsIo(SSL* ssl, void* p, size_t n, bool sending, short* wants);

// The reason of the last TLS failure on this thread, for the message of a
// call that failed with EPROTO from TlsIo.
const std::string& LastTlsError();

// OpenSSL's queued errors of this thread, as text (and cleared).
std::string TlsErrorText();

}  // namespace kvpool::data_client

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_TLS_H_
