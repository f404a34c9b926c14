#include "transport/tcp_data_client_hello.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "transport/tcp_data_client_tls.h"
#include "transport/wire_format.h"

namespace kvpool::data_client {

namespace {

// Each step below returns why it failed (what the call's message says after
// "failed: "), or an empty string.

std::string TimedOut(std::chrono::milliseconds timeout,
                     const char* waiting_for) {
  return "timed out after " + std::to_string(timeout.count()) +
         " ms waiting for " + waiting_for +
         " (not a kvpool data server, or one that hangs)";
}

std::string SendHello(const Link& link, const std::string& node_id,
                      Clock::time_point deadline,
                      std::chrono::milliseconds timeout) {
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
      return "send: " + (err == EPROTO ? LastTlsError() : ErrnoText(err));
    }
    const int r = PollUntil(link.fd, wants, deadline);
    if (r == 0) return TimedOut(timeout, "the send");
    if (r < 0) return "poll: " + ErrnoText(errno);
  }
  return std::string();
}

// The first `got` bytes of an answer (fewer than a header) must start like
// one: a peer speaking another protocol (an HTTP or gRPC server that got
// the port) is recognised without waiting for a whole header it may never
// send.
std::string CheckAnswerStart(const Link& link, const uint8_t* raw, size_t got) {
  uint8_t magic[4];
  wire::PutLe<uint32_t>(magic, wire::kMagic);
  if (std::memcmp(raw, magic, std::min<size_t>(got, sizeof(magic))) == 0) {
    return std::string();
  }
  // 0x15 and 0x16 start TLS alert and handshake records: the node refused
  // our plaintext HELLO as a failed TLS handshake.
  if (link.ssl == nullptr && (raw[0] == 0x15 || raw[0] == 0x16)) {
    return "the node requires TLS on its data plane (answered with a TLS "
           "record); configure the CA to verify it with (tls_ca_file)";
  }
  return "not a kvpool data server (bad magic in the answer)";
}

std::string CheckAnswerHeader(const wire::Header& rh) {
  if (rh.version != wire::kVersion) {
    return "server speaks data plane version " + std::to_string(rh.version) +
           ", expected " + std::to_string(wire::kVersion);
  }
  // A refusal names no node (the server keeps its id to itself).
  if (rh.op != static_cast<uint16_t>(wire::Op::kHello) || rh.count != 0 ||
      (rh.status == 0 && rh.body_len < wire::kMinNodeIdSize) ||
      rh.body_len > wire::kMaxNodeIdSize) {
    return "malformed HELLO answer";
  }
  return std::string();
}

// The answer: a header (into *rh), then the server's node id (into
// *server_id), each checked as its bytes arrive.
std::string ReceiveAnswer(const Link& link, Clock::time_point deadline,
                          std::chrono::milliseconds timeout, wire::Header* rh,
                          std::string* server_id) {
  uint8_t raw[wire::kHeaderSize + wire::kMaxNodeIdSize];
  size_t want = wire::kHeaderSize;
  size_t got = 0;
  while (got < want) {
    short wants = POLLIN;
    const ssize_t n =
        LinkIo(link, raw + got, want - got, /*sending=*/false, &wants);
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (want == wire::kHeaderSize) {
        std::string why = CheckAnswerStart(link, raw, got);
        if (why.empty() && got == wire::kHeaderSize) {
          *rh = wire::DecodeHeader(raw);
          why = CheckAnswerHeader(*rh);
          want += static_cast<size_t>(rh->body_len);
        }
        if (!why.empty()) return why;
      }
      continue;
    }
    if (n == 0) {
      return got == 0 ? "connection closed without an answer (not a "
                        "kvpool data server, one of an older version, "
                        "or one that requires TLS)"
                      : "connection closed in the middle of the answer";
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      // A TLS node that fails the handshake on our HELLO may close before
      // reading all of it, which resets the connection.
      const bool maybe_tls =
          link.ssl == nullptr && got == 0 && err == ECONNRESET;
      return "receive: " + (err == EPROTO ? LastTlsError() : ErrnoText(err)) +
             (maybe_tls ? " (a node that requires TLS?)" : "");
    }
    const int r = PollUntil(link.fd, wants, deadline);
    if (r == 0) return TimedOut(timeout, "the answer");
    if (r < 0) return "poll: " + ErrnoText(errno);
  }
  server_id->assign(reinterpret_cast<const char*>(raw) + wire::kHeaderSize,
                    static_cast<size_t>(rh->body_len));
  return std::string();
}

}  // namespace

Status ExchangeHello(const Link& link, const std::string& endpoint,
                     const std::string& node_id,
                     std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  wire::Header rh;
  std::string server_id;
  std::string why = SendHello(link, node_id, deadline, timeout);
  if (why.empty())
    why = ReceiveAnswer(link, deadline, timeout, &rh, &server_id);
  if (!why.empty()) {
    return Status(ErrorCode::TRANSFER_FAIL,
                  "HELLO with " + endpoint + " (expecting node '" +
                      Printable(node_id) + "') failed: " + why);
  }
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

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  return out;
}

}  // namespace kvpool::data_client
