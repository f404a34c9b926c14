// fuzz_wire_client: the data plane's client-side response decoder
// (TcpDataClient). A fake node on loopback answers the client's HELLO
// correctly, reads its request, then sends the fuzzer's bytes as the reply
// and closes.
//
// Input: byte 0 = the call (0 READ, 1 WRITE, 2 SSD_READ, 3 PREFETCH), byte
// 1 = ops in it (1 + byte % 4), then the reply bytes.
//
// Invariants checked (docs/fuzzing.md):
//  1. The call returns (the fake node closes after its reply) and writes
//     nothing outside the callers' buffers (each dest is its own heap block
//     of exactly the op's length: ASan).
//  2. For READ, WRITE and SSD_READ, a reference decoder of the reply
//     (written here from docs/data_plane.md) decides: a well-formed reply
//     (magic, version, the op echoed, a refusal with no body, or the right
//     count, a body_len equal to the codes plus the OK ops' bytes, all of
//     it present) makes the call OK with exactly the reply's result codes
//     (a refusal's status on every op); any other reply fails the call and
//     no op reads OK. (Bytes after a well-formed frame, which no server
//     sends, may fail the call.)
//  3. The dest of every OK op holds exactly its bytes of the reply.
//  4. PREFETCH gives one result per key.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp_data_client.h"
#include "transport/wire_format.h"

namespace {

using namespace kvpool;
namespace w = kvpool::wire;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", what);
  std::abort();
}

const std::string kNodeId = "fuzz-node";
constexpr uint64_t kLen = 16;  // every op moves 16 bytes

std::mutex g_mu;
std::string g_reply;  // what the fake node sends after reading a request
int g_listen = -1;
uint16_t g_port = 0;

// Reads exactly n bytes (false on EOF/error/2 s of silence).
bool ReadExact(int fd, void* buf, size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 2000) <= 0) return false;
    const ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

void SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t r = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (r <= 0) return;
    off += size_t(r);
  }
}

void FakeNode() {
  for (;;) {
    const int fd = accept4(g_listen, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    uint8_t h[w::kHeaderSize];
    if (ReadExact(fd, h, sizeof(h))) {
      const w::Header hello = w::DecodeHeader(h);
      std::string id(std::min<uint64_t>(hello.body_len, 256), '\0');
      if (ReadExact(fd, id.data(), id.size())) {
        w::Header rh;
        rh.op = uint16_t(w::Op::kHello);
        rh.body_len = kNodeId.size();
        w::EncodeHeader(rh, h);
        SendAll(fd,
                std::string(reinterpret_cast<char*>(h), sizeof(h)) + kNodeId);
        if (ReadExact(fd, h, sizeof(h))) {
          const w::Header req = w::DecodeHeader(h);
          std::vector<uint8_t> body(std::min<uint64_t>(req.body_len, 1 << 20));
          if (ReadExact(fd, body.data(), body.size())) {
            std::string reply;
            {
              std::lock_guard lock(g_mu);
              reply = g_reply;
            }
            SendAll(fd, reply);
          }
        }
      }
    }
    shutdown(fd, SHUT_WR);
    // Let the client read everything before the close.
    char sink[4096];
    pollfd pf{fd, POLLIN, 0};
    while (poll(&pf, 1, 2000) > 0 && recv(fd, sink, sizeof(sink), 0) > 0) {
    }
    close(fd);
  }
}

void Setup() {
  spdlog::set_level(spdlog::level::off);
  g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(g_listen, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(g_listen, 16) != 0) {
    Fail("cannot listen");
  }
  socklen_t len = sizeof(addr);
  getsockname(g_listen, reinterpret_cast<sockaddr*>(&addr), &len);
  g_port = ntohs(addr.sin_port);
  std::thread(FakeNode).detach();
}

// The reference decoder: nullopt-like `ok=false` for a reply the client
// must refuse.
struct Expect {
  bool ok = false;
  // Bytes follow the frame: the client may or may not have seen them (it
  // reads what the frame needs, sometimes more in one recv), so it may
  // refuse the reply; whatever it reports OK must still match.
  bool trailing = false;
  std::vector<ErrorCode> codes;
  std::vector<std::string> data;  // per op, the bytes of an OK op
};

Expect Decode(const std::string& reply, uint16_t op, uint32_t n,
              bool receives_data) {
  Expect e;
  if (reply.size() < w::kHeaderSize) return e;
  const auto* d = reinterpret_cast<const uint8_t*>(reply.data());
  const w::Header h = w::DecodeHeader(d);
  if (h.magic != w::kMagic || h.version != w::kVersion || h.op != op) return e;
  if (h.status != 0) {
    if (h.count != 0 || h.body_len != 0) return e;
    e.ok = true;
    e.trailing = reply.size() > w::kHeaderSize;
    e.codes.assign(n, ErrorCodeFromInt(h.status));
    e.data.resize(n);
    return e;
  }
  if (h.count != n) return e;
  const size_t head = w::kHeaderSize + 4 * size_t{n};
  if (reply.size() < head) return e;
  uint64_t data_len = 0;
  for (uint32_t i = 0; i < n; ++i) {
    e.codes.push_back(ErrorCodeFromInt(
        int32_t(w::GetLe<uint32_t>(d + w::kHeaderSize + 4 * i))));
    if (receives_data && e.codes.back() == ErrorCode::OK) data_len += kLen;
  }
  if (h.body_len != 4 * uint64_t{n} + data_len) return e;
  if (reply.size() < head + data_len) return e;
  size_t at = head;
  e.data.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (receives_data && e.codes[i] == ErrorCode::OK) {
      e.data[i] = reply.substr(at, kLen);
      at += kLen;
    }
  }
  e.ok = true;
  e.trailing = reply.size() > head + data_len;
  return e;
}

TcpDataClient& Client() {
  static TcpDataClient* c = [] {
    TcpDataClientOptions o;
    o.io_timeout = std::chrono::milliseconds(3000);
    o.handshake_timeout = std::chrono::milliseconds(3000);
    o.max_idle_per_endpoint = 0;  // a fresh connection per call
    return new TcpDataClient(o);
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int call = data[0] % 4;
  const uint32_t n = 1 + data[1] % 4;
  const std::string reply(reinterpret_cast<const char*>(data + 2), size - 2);
  {
    std::lock_guard lock(g_mu);
    g_reply = reply;
  }
  const std::string endpoint = "127.0.0.1:" + std::to_string(g_port);
  std::vector<std::unique_ptr<uint8_t[]>> bufs;
  for (uint32_t i = 0; i < n; ++i) {
    bufs.emplace_back(new uint8_t[kLen]);
    std::memset(bufs.back().get(), 0xEE, kLen);
  }
  Status st;
  std::vector<ErrorCode> results(n);
  uint16_t op = 0;
  if (call == 0 || call == 1) {
    std::vector<ReadOp> reads(n);
    std::vector<WriteOp> writes(n);
    for (uint32_t i = 0; i < n; ++i) {
      reads[i] = ReadOp{1, i * kLen, kLen, bufs[i].get()};
      writes[i] = WriteOp{1, i * kLen, kLen, bufs[i].get()};
    }
    if (call == 0) {
      op = 1;
      st = Client().Read(endpoint, kNodeId, reads);
      for (uint32_t i = 0; i < n; ++i) results[i] = reads[i].result;
    } else {
      op = 2;
      st = Client().Write(endpoint, kNodeId, writes);
      for (uint32_t i = 0; i < n; ++i) results[i] = writes[i].result;
    }
  } else if (call == 2) {
    op = 3;
    std::vector<KeyReadOp> ops(n);
    for (uint32_t i = 0; i < n; ++i) {
      ops[i].key = "k" + std::to_string(i);
      ops[i].length = kLen;
      ops[i].dest = bufs[i].get();
    }
    st = Client().ReadKeys(endpoint, kNodeId, ops);
    for (uint32_t i = 0; i < n; ++i) results[i] = ops[i].result;
  } else {
    std::vector<std::string> keys;
    for (uint32_t i = 0; i < n; ++i) keys.push_back("k" + std::to_string(i));
    std::vector<ErrorCode> codes;
    // The per-key codes are the answer checked; the call's status only
    // says whether any was not OK.
    Client().Prefetch(endpoint, kNodeId, "", keys, &codes).IgnoreError();
    if (codes.size() != n) Fail("PREFETCH: not one result per key");
    return 0;
  }

  const Expect e = Decode(reply, op, n, op != 2);
  if (!e.ok) {
    if (st.ok()) Fail("the client accepted a malformed reply");
    for (ErrorCode c : results) {
      if (c == ErrorCode::OK) Fail("an op reads OK from a malformed reply");
    }
    return 0;
  }
  // SSD_READ maps some frame-level refusals onto its own codes; READ and
  // WRITE report the reply's codes as they are.
  if (op != 3 && !e.trailing) {
    if (!st.ok()) Fail("the client refused a well-formed reply");
    if (results != e.codes) Fail("op results differ from the reply's codes");
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (results[i] != ErrorCode::OK) continue;
    if (e.codes[i] != ErrorCode::OK) Fail("an op OK that the reply failed");
    if (op != 2 && std::memcmp(bufs[i].get(), e.data[i].data(), kLen) != 0) {
      Fail("an OK op's dest does not hold its bytes of the reply");
    }
  }
  return 0;
}
