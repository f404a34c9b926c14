#include "transport/tcp_data_client_tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <cstdint>

namespace kvpool::data_client {
namespace {

// The reason of the last TLS failure on this thread (LastTlsError).
thread_local std::string tls_error;

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

}  // namespace

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

const std::string& LastTlsError() { return tls_error; }

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

TlsContext::TlsContext(const std::string& ca_file) {
  ctx_.reset(SSL_CTX_new(TLS_client_method()));
  if (!ctx_) {
    setup_error_ = TlsErrorText();
    return;
  }
  SSL_CTX* ctx = ctx_.get();
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
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    setup_error_ = "cannot load the data plane TLS CA file " + ca_file + ": " +
                   TlsErrorText();
    ctx_.reset();
  }
}

SslPtr TlsContext::NewSession(int fd, std::string* error) const {
  SslPtr ssl(ctx_ ? SSL_new(ctx_.get()) : nullptr);
  BIO* bio = ssl ? BIO_new(NoSigpipeMethod()) : nullptr;
  if (bio == nullptr) {
    *error = "cannot set up TLS: " + TlsErrorText();
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl.get(), bio, bio);  // the SSL owns the BIO now
  return ssl;
}

Status TlsContext::Handshake(const Link& link, const std::string& endpoint,
                             const std::string& host,
                             std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
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
      return fail("timed out after " + std::to_string(timeout.count()) + " ms");
    }
    if (p < 0) return fail("poll: " + ErrnoText(errno));
  }
}

}  // namespace kvpool::data_client
