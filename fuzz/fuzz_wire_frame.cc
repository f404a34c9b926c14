// fuzz_wire_frame: the data plane's server-side frame decoder. The decoder
// is not a pure function (it is the TcpDataServer's Asio session), so each
// input is sent over loopback to a real in-process TcpDataServer serving two
// small segments, each between PROT_NONE guard pages; the harness then
// half-closes and reads until the server closes.
//
// Input: byte 0 = flags (bit 0: the harness sends a valid HELLO first; bit
// 1: talk to the server that has no SSD_READ/PREFETCH handlers), then the
// bytes of the request stream.
//
// Invariants checked (docs/fuzzing.md):
//  1. The server never crashes and never touches a byte outside its
//     segments (the guard pages fault, ASan watches the rest).
//  2. The server answers or closes: after the half-close the connection
//     ends within 10 s.
//  3. The reply stream is exactly what a reference model of the protocol
//     (docs/data_plane.md, written here from the spec independently of the
//     server) predicts for the request stream: per frame the header (op
//     echoed, count, status, body_len), every result code (an op is OK iff
//     its range lies inside a known segment and is non-empty), the READ
//     bytes and the handlers' SSD bytes; a malformed frame gets no reply
//     and ends the connection. (When the server closes with request bytes
//     unread, the kernel may reset the connection: the replies received
//     must then be a prefix of the model's, and the model must say the
//     server closes.)
//  4. The segments afterwards hold exactly the bytes the model's accepted
//     WRITE ops put there, nothing else changed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/segment_table.h"
#include "transport/tcp_data_server.h"
#include "transport/wire_format.h"

namespace {

using namespace kvpool;
namespace w = kvpool::wire;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", what);
  std::abort();
}

constexpr size_t kPage = 4096;
const char kNodeId[] = "fuzz-node";
constexpr uint64_t kMaxSsdRead = 1 << 20;
struct Seg {
  uint64_t id;
  uint64_t size;
  uint8_t* base = nullptr;
  std::vector<uint8_t> initial, shadow;
};
Seg g_segs[2] = {{1, 4 * kPage}, {2, kPage}};

uint8_t SsdByte(const std::string& key, uint64_t j) {
  return uint8_t(key[0] + j * 31);
}

// The SSD read handler: keys starting with 'm' miss, 'x' are left unset
// (INTERNAL_ERROR), others read as SsdByte.
void SsdRead(std::span<KeyReadOp> ops) {
  for (KeyReadOp& op : ops) {
    if (op.key[0] == 'x') continue;
    if (op.key[0] == 'm') {
      op.result = ErrorCode::OBJECT_NOT_FOUND;
      continue;
    }
    for (uint64_t j = 0; j < op.length; ++j) op.dest[j] = SsdByte(op.key, j);
    op.result = ErrorCode::OK;
  }
}
ErrorCode SsdCode(const std::string& key) {
  return key[0] == 'x'   ? ErrorCode::INTERNAL_ERROR
         : key[0] == 'm' ? ErrorCode::OBJECT_NOT_FOUND
                         : ErrorCode::OK;
}

// The prefetch handler: 'm' keys are not here; for tenant "short" it
// answers only the first half of the keys (the rest read INTERNAL_ERROR).
std::vector<ErrorCode> Prefetch(const std::string& tenant,
                                const std::vector<std::string>& keys, bool) {
  std::vector<ErrorCode> out;
  for (const auto& k : keys) {
    out.push_back(k[0] == 'm' ? ErrorCode::OBJECT_NOT_FOUND : ErrorCode::OK);
  }
  if (tenant == "short") out.resize(keys.size() / 2);
  return out;
}

SegmentTable g_table;
std::unique_ptr<TcpDataServer> g_with, g_without;

void Setup() {
  spdlog::set_level(spdlog::level::off);
  // [guard][seg 1][guard][seg 2][guard]
  const size_t total = 3 * kPage + g_segs[0].size + g_segs[1].size;
  auto* p = static_cast<uint8_t*>(
      mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) Fail("mmap");
  uint8_t* at = p + kPage;
  for (Seg& s : g_segs) {
    if (mprotect(at, s.size, PROT_READ | PROT_WRITE) != 0) Fail("mprotect");
    s.base = at;
    s.initial.resize(s.size);
    for (uint64_t i = 0; i < s.size; ++i) s.initial[i] = uint8_t(i * 7 + s.id);
    g_table.Add(s.id, SegmentView{s.base, s.size});
    at += s.size + kPage;
  }
  TcpDataServerOptions o;
  o.io_threads = 1;
  o.ssd_read_threads = 1;
  o.max_ssd_read_bytes = kMaxSsdRead;
  o.idle_timeout_ms = 0;
  g_with = std::make_unique<TcpDataServer>(&g_table, kNodeId, o);
  g_with->SetSsdReadHandler(SsdRead);
  g_with->SetPrefetchHandler(Prefetch);
  g_without = std::make_unique<TcpDataServer>(&g_table, kNodeId, o);
  if (!g_with->Start("127.0.0.1", 0).ok() ||
      !g_without->Start("127.0.0.1", 0).ok()) {
    Fail("cannot start the data servers");
  }
}

// ---- the reference model ----

struct Model {
  bool handlers;
  std::string out;      // expected reply bytes
  bool closes = false;  // the server ends the connection on purpose
  void Header(uint16_t op, uint32_t count, ErrorCode status, uint64_t body) {
    uint8_t h[w::kHeaderSize];
    w::Header hh;
    hh.op = op;
    hh.count = count;
    hh.status = ToInt(status);
    hh.body_len = body;
    w::EncodeHeader(hh, h);
    out.append(reinterpret_cast<char*>(h), sizeof(h));
  }
  void Code(ErrorCode c) {
    uint8_t b[4];
    w::PutLe<uint32_t>(b, uint32_t(ToInt(c)));
    out.append(reinterpret_cast<char*>(b), 4);
  }
};

Seg* Resolve(uint64_t id, uint64_t off, uint64_t len) {
  for (Seg& s : g_segs) {
    if (s.id == id) {
      if (off > s.size || len > s.size - off) return nullptr;
      return &s;
    }
  }
  return nullptr;
}

// Runs the model over `in`; fills m->out and m->closes.
void RunModel(const std::string& in, Model* m) {
  const auto* d = reinterpret_cast<const uint8_t*>(in.data());
  size_t pos = 0;
  bool greeted = false;
  auto left = [&] { return in.size() - pos; };
  for (;;) {
    if (left() < w::kHeaderSize) return;  // EOF (mid-header or between)
    const w::Header h = w::DecodeHeader(d + pos);
    pos += w::kHeaderSize;
    const uint64_t ranges_len = uint64_t{h.count} * w::kRangeSize;
    bool bad = h.magic != w::kMagic || h.version != w::kVersion ||
               h.status != 0 || h.count > w::kMaxOps;
    if (!bad) {
      switch (h.op) {
        case 1:
          bad = h.body_len != ranges_len;
          break;
        case 2:
          bad = h.body_len < ranges_len ||
                h.body_len - ranges_len > w::kMaxPayload;
          break;
        case 3:
        case 5:
          bad = h.body_len > w::kMaxKeyFrameBody;
          break;
        case 4:
          bad = h.count != 0 || h.body_len < 1 || h.body_len > 256;
          break;
        default:
          bad = true;
      }
    }
    if (!bad && (h.op == 4) == greeted) bad = true;
    if (bad) {
      m->closes = true;
      return;
    }
    if (h.op == 4) {
      if (left() < h.body_len) return;
      const std::string id(in.data() + pos, h.body_len);
      pos += h.body_len;
      if (id == kNodeId) {
        m->Header(4, 0, ErrorCode::OK, id.size());
        m->out += id;
        greeted = true;
        continue;
      }
      m->Header(4, 0, ErrorCode::SEGMENT_NOT_FOUND, 0);
      m->closes = true;
      return;
    }
    if (h.op == 3 || h.op == 5) {
      if (!m->handlers) {
        // Refused cleanly once the body has been skipped.
        if (left() < h.body_len) return;
        pos += h.body_len;
        m->Header(h.op, 0, ErrorCode::INVALID_PARAMS, 0);
        continue;
      }
      if (left() < h.body_len) return;
      const std::string body(in.data() + pos, h.body_len);
      pos += h.body_len;
      const auto* b = reinterpret_cast<const uint8_t*>(body.data());
      size_t p = 0;
      std::vector<ErrorCode> codes(h.count, ErrorCode::OK);
      std::string data;
      if (h.op == 3) {
        bool over = false;
        uint64_t slots = 0;
        std::vector<std::pair<std::string, uint64_t>> ok;  // key, length
        for (uint32_t i = 0; i < h.count; ++i) {
          if (body.size() - p < w::kKeyReadFixedSize) {
            m->closes = true;
            return;
          }
          const uint64_t length = w::GetLe<uint64_t>(b + p);
          const uint32_t tl = w::GetLe<uint32_t>(b + p + 8);
          const uint32_t kl = w::GetLe<uint32_t>(b + p + 12);
          p += w::kKeyReadFixedSize;
          if (body.size() - p < uint64_t{tl} + kl) {
            m->closes = true;
            return;
          }
          const std::string key(body.data() + p + tl, kl);
          p += size_t{tl} + kl;
          if (over) continue;
          if (tl > w::kMaxTenantSize || kl == 0 || kl > w::kMaxKeySize ||
              length > w::kMaxPayload) {
            over = true;
            continue;
          }
          slots += w::RoundUpToSsdAlign(length);
          if (length == 0) {
            codes[i] = ErrorCode::INVALID_PARAMS;
            continue;
          }
          codes[i] = SsdCode(key);
          if (codes[i] == ErrorCode::OK) ok.emplace_back(key, length);
        }
        if (p != body.size()) {
          m->closes = true;
          return;
        }
        if (over || slots > kMaxSsdRead) {
          m->Header(3, 0, ErrorCode::INVALID_PARAMS, 0);
          continue;
        }
        for (const auto& [key, length] : ok) {
          for (uint64_t j = 0; j < length; ++j) data += char(SsdByte(key, j));
        }
      } else {
        auto take = [&](std::string* s) {
          if (body.size() - p < 4) return false;
          const uint32_t n = w::GetLe<uint32_t>(b + p);
          p += 4;
          if (body.size() - p < n) return false;
          s->assign(body.data() + p, n);
          p += n;
          return true;
        };
        std::string tenant;
        if (!take(&tenant)) {
          m->closes = true;
          return;
        }
        std::vector<std::string> keys;
        std::vector<int> which(h.count, -1);
        for (uint32_t i = 0; i < h.count; ++i) {
          std::string key;
          if (!take(&key) || body.size() - p < w::kTokenSize) {
            m->closes = true;
            return;
          }
          p += w::kTokenSize;
          if (tenant.size() > w::kMaxTenantSize || key.empty() ||
              key.size() > w::kMaxKeySize) {
            codes[i] = ErrorCode::INVALID_PARAMS;
            continue;
          }
          which[i] = int(keys.size());
          keys.push_back(key);
        }
        if (p != body.size()) {
          m->closes = true;
          return;
        }
        const size_t answered =
            tenant == "short" ? keys.size() / 2 : keys.size();
        for (uint32_t i = 0; i < h.count; ++i) {
          if (which[i] < 0) continue;
          const size_t j = size_t(which[i]);
          codes[i] = j >= answered       ? ErrorCode::INTERNAL_ERROR
                     : keys[j][0] == 'm' ? ErrorCode::OBJECT_NOT_FOUND
                                         : ErrorCode::OK;
        }
      }
      m->Header(h.op, h.count, ErrorCode::OK,
                4 * uint64_t{h.count} + data.size());
      for (ErrorCode c : codes) m->Code(c);
      m->out += data;
      continue;
    }
    // READ / WRITE.
    if (left() < ranges_len) return;
    std::vector<w::Range> ranges(h.count);
    uint64_t total = 0;
    for (uint32_t i = 0; i < h.count; ++i) {
      ranges[i] = w::DecodeRange(d + pos + i * w::kRangeSize);
      if (ranges[i].length > w::kMaxPayload ||
          total + ranges[i].length > w::kMaxPayload) {
        m->closes = true;
        return;
      }
      total += ranges[i].length;
    }
    pos += ranges_len;
    if (h.op == 2 && total != h.body_len - ranges_len) {
      m->closes = true;
      return;
    }
    std::vector<Seg*> target(h.count);
    for (uint32_t i = 0; i < h.count; ++i) {
      const w::Range& r = ranges[i];
      target[i] =
          r.length == 0 ? nullptr : Resolve(r.segment_id, r.offset, r.length);
    }
    if (h.op == 1) {
      std::string data;
      for (uint32_t i = 0; i < h.count; ++i) {
        if (!target[i]) continue;
        data.append(reinterpret_cast<const char*>(target[i]->shadow.data() +
                                                  ranges[i].offset),
                    ranges[i].length);
      }
      m->Header(1, h.count, ErrorCode::OK, 4 * uint64_t{h.count} + data.size());
      for (uint32_t i = 0; i < h.count; ++i) {
        m->Code(target[i] ? ErrorCode::OK : ErrorCode::INVALID_PARAMS);
      }
      m->out += data;
      continue;
    }
    // WRITE payloads, in order; bytes that arrived before the end land.
    for (uint32_t i = 0; i < h.count; ++i) {
      const uint64_t n = std::min<uint64_t>(ranges[i].length, left());
      if (target[i]) {
        std::memcpy(target[i]->shadow.data() + ranges[i].offset, d + pos, n);
      }
      pos += n;
      if (n < ranges[i].length) return;  // EOF mid-payload
    }
    m->Header(2, h.count, ErrorCode::OK, 4 * uint64_t{h.count});
    for (uint32_t i = 0; i < h.count; ++i) {
      m->Code(target[i] ? ErrorCode::OK : ErrorCode::INVALID_PARAMS);
    }
  }
}

// Sends `in`, half-closes, reads until the server closes. *reset when the
// connection ended in a reset rather than a clean close.
std::string Exchange(uint16_t port, const std::string& in, bool* reset) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Fail("connect to the data server");
  }
  // Closing with unread replies must not block or linger.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t sent = 0;
  bool shut = false;
  std::string got;
  *reset = false;
  for (;;) {
    if (sent == in.size() && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, short(POLLIN | (shut ? 0 : POLLOUT)), 0};
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) Fail("the server neither answered nor closed");
    const int ms = int(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)
            .count());
    if (poll(&p, 1, ms) < 0 && errno != EINTR) Fail("poll");
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        got.append(buf, size_t(n));
        continue;
      }
      if (n == 0) break;
      if (errno == ECONNRESET || errno == EPIPE) {
        *reset = true;
        break;
      }
      if (errno != EINTR && errno != EAGAIN) Fail("recv");
    }
    if (!shut && (p.revents & POLLOUT)) {
      const ssize_t n = send(fd, in.data() + sent, in.size() - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += size_t(n);
      } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        // The server closed on purpose; what it sent before still counts.
        sent = in.size();
        shut = true;
        *reset = true;
      }
    }
  }
  close(fd);
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool hello = data[0] & 1;
  const bool handlers = !(data[0] & 2);
  std::string in;
  if (hello) {
    uint8_t h[w::kHeaderSize];
    w::Header hh;
    hh.op = uint16_t(w::Op::kHello);
    hh.body_len = sizeof(kNodeId) - 1;
    w::EncodeHeader(hh, h);
    in.append(reinterpret_cast<char*>(h), sizeof(h));
    in += kNodeId;
  }
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);

  for (Seg& s : g_segs) {
    std::memcpy(s.base, s.initial.data(), s.size);
    s.shadow = s.initial;
  }
  Model m{handlers};
  RunModel(in, &m);
  bool reset = false;
  const std::string got =
      Exchange((handlers ? g_with : g_without)->port(), in, &reset);
  if (reset) {
    if (!m.closes) Fail("connection reset where the model expects no close");
    if (got.size() > m.out.size() || m.out.compare(0, got.size(), got) != 0) {
      Fail("replies before a reset are not a prefix of the model's");
    }
  } else if (got != m.out) {
    std::fprintf(stderr, "got %zu reply bytes, model %zu\n", got.size(),
                 m.out.size());
    Fail("the reply stream differs from the model's");
  }
  for (const Seg& s : g_segs) {
    if (std::memcmp(s.base, s.shadow.data(), s.size) != 0) {
      Fail("segment bytes differ from what the accepted WRITEs put there");
    }
  }
  return 0;
}
