#include <gtest/gtest.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/test_util.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"
#include "transport/wire_format.h"

namespace kvpool {
namespace {

using asio::ip::tcp;

constexpr uint64_t kBigSegment = 1;
constexpr uint64_t kSmallSegment = 2;
constexpr uint64_t kBigSize = 32 << 20;
constexpr uint64_t kSmallSize = 64 << 10;
// The identity of the server under test, as a node id.
const std::string kNodeId = "host-1234-0";

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<uint8_t>(rng());
  return v;
}

// Forwards loopback connections to `target` and can cut them all at once,
// which turns a client's pooled connection stale while the server lives on.
class CuttableProxy {
 public:
  explicit CuttableProxy(uint16_t target)
      : target_(target),
        acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~CuttableProxy() {
    // Wakes the blocked accept() without touching the Asio object.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    accept_thread_.join();
    CutAll();
    for (auto& t : pumps_) t.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int accepted() {
    std::lock_guard lock(mu_);
    return static_cast<int>(links_.size());
  }
  // Both directions of every link see EOF; raw shutdown() because the
  // pump threads are blocked in reads on these sockets.
  void CutAll() {
    std::lock_guard lock(mu_);
    for (auto& link : links_) {
      ::shutdown(link.client.native_handle(), SHUT_RDWR);
      ::shutdown(link.server.native_handle(), SHUT_RDWR);
    }
  }

 private:
  struct Link {
    explicit Link(asio::io_context& io) : client(io), server(io) {}
    tcp::socket client;
    tcp::socket server;
  };

  void AcceptLoop() {
    for (;;) {
      tcp::socket client(io_);
      asio::error_code ec;
      acceptor_.accept(client, ec);
      if (ec) return;
      std::lock_guard lock(mu_);
      Link& link = links_.emplace_back(io_);
      link.client = std::move(client);
      link.server.connect({asio::ip::make_address("127.0.0.1"), target_}, ec);
      if (ec) return;
      pumps_.emplace_back([&link] { Pump(link.client, link.server); });
      pumps_.emplace_back([&link] { Pump(link.server, link.client); });
    }
  }

  static void Pump(tcp::socket& from, tcp::socket& to) {
    std::vector<uint8_t> buf(1 << 16);
    asio::error_code ec;
    for (;;) {
      const size_t n = from.read_some(asio::buffer(buf), ec);
      if (ec) break;
      asio::write(to, asio::buffer(buf.data(), n), ec);
      if (ec) break;
    }
    ::shutdown(to.native_handle(), SHUT_WR);
  }

  const uint16_t target_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::list<Link> links_;  // stable addresses for the pump threads
  std::vector<std::thread> pumps_;
};

// A loopback server that is not (or pretends to be) a kvpool data server:
// `behave` runs on each accepted connection in turn and may keep it open by
// returning true, which parks the socket until the peer is destroyed.
class FakePeer {
 public:
  using Behaviour = std::function<bool(tcp::socket&)>;
  explicit FakePeer(Behaviour behave)
      : behave_(std::move(behave)),
        acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      for (;;) {
        tcp::socket s(io_);
        asio::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        if (behave_(s)) parked_.push_back(std::move(s));
      }
    });
  }
  ~FakePeer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }
  std::string Endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  Behaviour behave_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<tcp::socket> parked_;  // only touched by thread_
  std::thread thread_;
};

// Reads a client's HELLO off `s`; returns the node id it expects, or "" if
// there was no well-formed HELLO.
std::string ReadHello(tcp::socket& s) {
  uint8_t raw[wire::kHeaderSize];
  asio::error_code ec;
  asio::read(s, asio::buffer(raw), ec);
  if (ec) return "";
  const wire::Header h = wire::DecodeHeader(raw);
  if (h.magic != wire::kMagic || h.version != wire::kVersion ||
      h.op != static_cast<uint16_t>(wire::Op::kHello) || h.count != 0 ||
      h.body_len > wire::kMaxNodeIdSize) {
    return "";
  }
  std::string id(static_cast<size_t>(h.body_len), '\0');
  asio::read(s, asio::buffer(id), ec);
  return ec ? "" : id;
}

std::vector<uint8_t> HelloFrame(const std::string& node_id, int32_t status,
                                uint16_t version = wire::kVersion) {
  wire::Header h;
  h.version = version;
  h.op = static_cast<uint16_t>(wire::Op::kHello);
  h.status = status;
  h.body_len = node_id.size();
  std::vector<uint8_t> f(wire::kHeaderSize + node_id.size());
  wire::EncodeHeader(h, f.data());
  std::memcpy(f.data() + wire::kHeaderSize, node_id.data(), node_id.size());
  return f;
}

// A fake SSD tier for the SSD_READ handler: serves values from a map and
// records how it was called.
struct FakeSsd {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::vector<uint8_t>> values;
  int calls = 0;
  size_t ops_seen = 0;
  size_t misaligned = 0;  // dests not 4096-aligned
  std::set<std::thread::id> threads;
  // Runs at the start of every call, outside `mu`.
  std::function<void()> hook;

  SsdReadHandler Handler() {
    return [this](std::span<KeyReadOp> ops) {
      if (hook) hook();
      std::lock_guard lock(mu);
      ++calls;
      ops_seen += ops.size();
      threads.insert(std::this_thread::get_id());
      for (KeyReadOp& op : ops) {
        if (reinterpret_cast<uintptr_t>(op.dest) % 4096 != 0) ++misaligned;
        auto it = values.find({op.tenant, op.key});
        if (it == values.end() || it->second.size() != op.length) {
          op.result = ErrorCode::OBJECT_NOT_FOUND;
          continue;
        }
        std::memcpy(op.dest, it->second.data(), op.length);
        op.result = ErrorCode::OK;
      }
    };
  }
};

// Records PREFETCH calls; accepts the keys in `held`.
struct FakePrefetcher {
  std::mutex mu;
  std::set<std::string> held;
  std::vector<std::pair<std::string, std::vector<std::string>>> calls;
  std::vector<bool> for_next_get;  // per call
  std::set<std::thread::id> threads;

  PrefetchHandler Handler() {
    return [this](const std::string& tenant,
                  const std::vector<std::string>& keys, bool next_get) {
      std::lock_guard lock(mu);
      calls.emplace_back(tenant, keys);
      for_next_get.push_back(next_get);
      threads.insert(std::this_thread::get_id());
      std::vector<ErrorCode> out;
      for (const auto& k : keys) {
        out.push_back(held.count(k) ? ErrorCode::OK
                                    : ErrorCode::OBJECT_NOT_FOUND);
      }
      return out;
    };
  }
};

// Runs `f` when the scope ends, however it ends (e.g. a failed ASSERT).
struct OnExit {
  std::function<void()> f;
  ~OnExit() { f(); }
};

struct RawKey {
  uint64_t length;
  std::string tenant;
  std::string key;
  std::string token = {};  // kTokenSize bytes, or empty for zeros
};

void AppendToken(std::vector<uint8_t>& body, const std::string& token) {
  uint8_t t[wire::kTokenSize] = {};
  if (token.size() == wire::kTokenSize) std::memcpy(t, token.data(), sizeof(t));
  body.insert(body.end(), t, t + sizeof(t));
}

std::vector<uint8_t> KeyFrame(wire::Op op, size_t count,
                              const std::vector<uint8_t>& body) {
  wire::Header h;
  h.op = static_cast<uint16_t>(op);
  h.count = static_cast<uint32_t>(count);
  h.body_len = body.size();
  std::vector<uint8_t> f(wire::kHeaderSize + body.size());
  wire::EncodeHeader(h, f.data());
  if (!body.empty()) {
    std::memcpy(f.data() + wire::kHeaderSize, body.data(), body.size());
  }
  return f;
}

// "<prefix><i>", built without operator+ on a literal, which trips GCC 12's
// -Wrestrict false positive.
std::string Name(const char* prefix, size_t i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}

std::vector<uint8_t> SsdReadFrame(const std::vector<RawKey>& ops) {
  std::vector<uint8_t> body;
  for (const RawKey& op : ops) {
    uint8_t fixed[16];
    wire::PutLe<uint64_t>(fixed, op.length);
    wire::PutLe<uint32_t>(fixed + 8, static_cast<uint32_t>(op.tenant.size()));
    wire::PutLe<uint32_t>(fixed + 12, static_cast<uint32_t>(op.key.size()));
    body.insert(body.end(), fixed, fixed + sizeof(fixed));
    AppendToken(body, op.token);
    body.insert(body.end(), op.tenant.begin(), op.tenant.end());
    body.insert(body.end(), op.key.begin(), op.key.end());
  }
  return KeyFrame(wire::Op::kSsdRead, ops.size(), body);
}

std::vector<uint8_t> PrefetchFrame(
    const std::string& tenant, const std::vector<std::string>& keys,
    const std::vector<std::string>& tokens = {}) {
  std::vector<uint8_t> body;
  auto put = [&body](const std::string& s) {
    uint8_t len[4];
    wire::PutLe<uint32_t>(len, static_cast<uint32_t>(s.size()));
    body.insert(body.end(), len, len + 4);
    body.insert(body.end(), s.begin(), s.end());
  };
  put(tenant);
  for (size_t i = 0; i < keys.size(); ++i) {
    put(keys[i]);
    AppendToken(body, i < tokens.size() ? tokens[i] : std::string());
  }
  return KeyFrame(wire::Op::kPrefetch, keys.size(), body);
}

// Reads a response on `s`: its header and result codes (not the data).
std::pair<wire::Header, std::vector<int32_t>> ReadResponseHead(tcp::socket& s) {
  uint8_t raw[wire::kHeaderSize];
  asio::read(s, asio::buffer(raw));
  const wire::Header rh = wire::DecodeHeader(raw);
  std::vector<uint8_t> codes_raw(size_t{rh.count} * wire::kResultSize);
  asio::read(s, asio::buffer(codes_raw));
  std::vector<int32_t> codes;
  for (uint32_t i = 0; i < rh.count; ++i) {
    codes.push_back(static_cast<int32_t>(
        wire::GetLe<uint32_t>(codes_raw.data() + i * wire::kResultSize)));
  }
  return {rh, codes};
}

class TcpDataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    big_.assign(kBigSize, 0);
    small_.assign(kSmallSize, 0);
    table_.Add(kBigSegment, {big_.data(), big_.size()});
    table_.Add(kSmallSegment, {small_.data(), small_.size()});
    server_ = std::make_unique<TcpDataServer>(&table_, kNodeId, 2);
    ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
    ASSERT_NE(server_->port(), 0);
  }

  std::string Endpoint() const {
    return "127.0.0.1:" + std::to_string(server_->port());
  }
  static std::string EndpointOf(uint16_t port) {
    return "127.0.0.1:" + std::to_string(port);
  }

  // Another server over the same segments, with the given handlers.
  std::unique_ptr<TcpDataServer> StartServer(TcpDataServerOptions options,
                                             SsdReadHandler ssd_read,
                                             PrefetchHandler prefetch) {
    auto server = std::make_unique<TcpDataServer>(&table_, kNodeId, options);
    if (ssd_read) server->SetSsdReadHandler(std::move(ssd_read));
    if (prefetch) server->SetPrefetchHandler(std::move(prefetch));
    EXPECT_TRUE(server->Start("127.0.0.1", 0).ok());
    return server;
  }

  // A segment READ on a raw socket past its HELLO: proves the stream is
  // still in sync.
  void ExpectRawReadWorks(tcp::socket& s) {
    std::memcpy(small_.data() + 8, "abcd", 4);
    wire::Header h;
    h.op = static_cast<uint16_t>(wire::Op::kRead);
    h.count = 1;
    h.body_len = wire::kRangeSize;
    asio::write(s, asio::buffer(Frame(h, {{kSmallSegment, 8, 4}})));
    uint8_t resp[wire::kHeaderSize + wire::kResultSize + 4];
    asio::read(s, asio::buffer(resp));
    const wire::Header rh = wire::DecodeHeader(resp);
    EXPECT_EQ(rh.status, 0);
    EXPECT_EQ(rh.count, 1u);
    EXPECT_EQ(rh.body_len, wire::kResultSize + 4);
    EXPECT_EQ(wire::GetLe<uint32_t>(resp + wire::kHeaderSize), 0u);
    EXPECT_EQ(
        std::memcmp(resp + wire::kHeaderSize + wire::kResultSize, "abcd", 4),
        0);
  }

  // A plain socket for speaking (or garbling) the protocol by hand; with
  // `hello`, past a successful HELLO naming the server.
  tcp::socket RawConnect(bool hello = true, uint16_t port = 0) {
    tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"),
               port != 0 ? port : server_->port()});
    if (hello) {
      asio::write(s, asio::buffer(HelloFrame(kNodeId, 0)));
      uint8_t raw[wire::kHeaderSize];
      asio::read(s, asio::buffer(raw));
      const wire::Header rh = wire::DecodeHeader(raw);
      EXPECT_EQ(rh.status, 0);
      EXPECT_EQ(rh.op, static_cast<uint16_t>(wire::Op::kHello));
      std::string id(static_cast<size_t>(rh.body_len), '\0');
      asio::read(s, asio::buffer(id));
      EXPECT_EQ(id, kNodeId);
    }
    return s;
  }

  // True once the server has closed `s` (reads hit EOF or a reset).
  static bool ServerClosed(tcp::socket& s) {
    uint8_t buf[256];
    asio::error_code ec;
    for (;;) {
      s.read_some(asio::buffer(buf), ec);
      if (ec)
        return ec == asio::error::eof || ec == asio::error::connection_reset;
    }
  }

  static std::vector<uint8_t> Frame(wire::Header h,
                                    const std::vector<wire::Range>& ranges) {
    std::vector<uint8_t> f(wire::kHeaderSize +
                           ranges.size() * wire::kRangeSize);
    wire::EncodeHeader(h, f.data());
    for (size_t i = 0; i < ranges.size(); ++i) {
      wire::EncodeRange(ranges[i],
                        f.data() + wire::kHeaderSize + i * wire::kRangeSize);
    }
    return f;
  }

  // Sends a frame the server must reject and checks it hung up on us; with
  // `hello`, on a connection past the HELLO.
  void ExpectBadFrame(const std::vector<uint8_t>& bytes, bool hello = true) {
    const uint64_t before = server_->stats().bad_frames.load();
    tcp::socket s = RawConnect(hello);
    asio::error_code ec;
    asio::write(s, asio::buffer(bytes), ec);
    EXPECT_TRUE(ServerClosed(s));
    // The counter is bumped before the close that ServerClosed observed.
    EXPECT_EQ(server_->stats().bad_frames.load(), before + 1);
  }

  // Writes then reads back `data` at `offset` of the big segment.
  void ExpectRoundTrip(TcpDataClient& client, uint64_t offset,
                       const std::vector<uint8_t>& data,
                       std::string endpoint = "") {
    if (endpoint.empty()) endpoint = Endpoint();
    WriteOp w{kBigSegment, offset, data.size(), data.data()};
    Status s = client.Write(endpoint, kNodeId, {&w, 1});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(w.result, ErrorCode::OK);
    std::vector<uint8_t> back(data.size());
    ReadOp r{kBigSegment, offset, back.size(), back.data()};
    s = client.Read(endpoint, kNodeId, {&r, 1});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(r.result, ErrorCode::OK);
    ASSERT_EQ(back, data);
  }

  asio::io_context io_;
  std::vector<uint8_t> big_;
  std::vector<uint8_t> small_;
  SegmentTable table_;
  std::unique_ptr<TcpDataServer> server_;
};

TEST_F(TcpDataPlaneTest, BatchedWritesThenReadsRoundTripExactly) {
  const std::vector<size_t> sizes = {1,        7,       4096,    65537,
                                     1u << 20, 3 << 20, 4 << 20, 123457};
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<WriteOp> writes;
  uint64_t offset = 3;  // deliberately unaligned
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    payloads.push_back(RandomBytes(sizes[i], static_cast<uint32_t>(i + 1)));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    writes.push_back({kBigSegment, offset, sizes[i], payloads[i].data()});
    offset += sizes[i] + 5;
    total += sizes[i];
  }
  ASSERT_LE(offset, kBigSize);

  TcpDataClient client;
  Status s = client.Write(Endpoint(), kNodeId, writes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_EQ(writes[i].result, ErrorCode::OK) << i;
    ASSERT_EQ(std::memcmp(big_.data() + writes[i].offset, payloads[i].data(),
                          sizes[i]),
              0)
        << i;
  }
  EXPECT_EQ(server_->stats().bytes_written.load(), total);

  // Read back in reverse order so destinations do not mirror segment order.
  std::vector<std::vector<uint8_t>> dests(sizes.size());
  std::vector<ReadOp> reads;
  for (size_t j = 0; j < sizes.size(); ++j) {
    const size_t i = sizes.size() - 1 - j;
    dests[i].assign(sizes[i], 0xEE);
    reads.push_back({kBigSegment, writes[i].offset, sizes[i], dests[i].data()});
  }
  s = client.Read(Endpoint(), kNodeId, reads);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(reads[i].result, ErrorCode::OK);
    EXPECT_EQ(dests[i], payloads[i]) << "size " << sizes[i];
  }
  // The server counts a read's bytes once its write completes, which the
  // client may see after the bytes themselves.
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return server_->stats().bytes_read.load() == total; },
      std::chrono::seconds(10)))
      << server_->stats().bytes_read.load() << " of " << total;
  EXPECT_EQ(server_->stats().rejected_ranges.load(), 0u);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, ZeroLengthAndNullBuffersAreInvalidParams) {
  TcpDataClient client;
  const auto data = RandomBytes(100, 7);
  std::vector<WriteOp> writes = {
      {kBigSegment, 0, 0, data.data()},
      {kBigSegment, 0, 100, nullptr},
      {kBigSegment, 200, 100, data.data()},
  };
  ASSERT_TRUE(client.Write(Endpoint(), kNodeId, writes).ok());
  EXPECT_EQ(writes[0].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(writes[1].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(writes[2].result, ErrorCode::OK);
  EXPECT_EQ(std::memcmp(big_.data() + 200, data.data(), 100), 0);

  std::vector<uint8_t> out(100);
  std::vector<ReadOp> reads = {
      {kBigSegment, 200, 0, out.data()},
      {kBigSegment, 200, 100, nullptr},
  };
  ASSERT_TRUE(client.Read(Endpoint(), kNodeId, reads).ok());
  EXPECT_EQ(reads[0].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(reads[1].result, ErrorCode::INVALID_PARAMS);
}

TEST_F(TcpDataPlaneTest, ZeroLengthRangeFromARawClientIsRejected) {
  tcp::socket s = RawConnect();
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kRead);
  h.count = 1;
  h.body_len = wire::kRangeSize;
  asio::write(s, asio::buffer(Frame(h, {{kBigSegment, 10, 0}})));
  uint8_t resp[wire::kHeaderSize + wire::kResultSize];
  asio::read(s, asio::buffer(resp));
  const wire::Header rh = wire::DecodeHeader(resp);
  EXPECT_EQ(rh.status, 0);
  EXPECT_EQ(rh.count, 1u);
  EXPECT_EQ(rh.body_len, wire::kResultSize);
  EXPECT_EQ(
      static_cast<int32_t>(wire::GetLe<uint32_t>(resp + wire::kHeaderSize)),
      ToInt(ErrorCode::INVALID_PARAMS));
}

TEST_F(TcpDataPlaneTest, BadRangesFailAloneAndTheRestOfTheBatchSucceeds) {
  TcpDataClient client;
  const auto a = RandomBytes(1000, 1);
  const auto b = RandomBytes(5000, 2);
  const auto c = RandomBytes(300, 3);
  // Rejected ops' payloads still go on the wire, so their source must be
  // readable for the full length.
  const auto x = RandomBytes(1000, 4);
  const uint64_t u64max = std::numeric_limits<uint64_t>::max();
  std::vector<WriteOp> writes = {
      {kSmallSegment, 0, a.size(), a.data()},
      // Ends one byte past the segment.
      {kSmallSegment, kSmallSize - 999, 1000, x.data()},
      // offset + length wraps around 2^64.
      {kSmallSegment, u64max - 10, 100, x.data()},
      {kSmallSegment, kSmallSize + 1, 1, x.data()},
      {999, 0, 10, x.data()},
      // Accepted ops after rejected ones prove the payload stream stayed in
      // sync: a misaligned drain would shift these bytes.
      {kSmallSegment, 2000, b.size(), b.data()},
      {kSmallSegment, kSmallSize - c.size(), c.size(), c.data()},
  };
  std::vector<uint8_t> before = small_;
  Status s = client.Write(Endpoint(), kNodeId, writes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(writes[0].result, ErrorCode::OK);
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(writes[i].result, ErrorCode::INVALID_PARAMS) << i;
  }
  EXPECT_EQ(writes[5].result, ErrorCode::OK);
  EXPECT_EQ(writes[6].result, ErrorCode::OK);
  EXPECT_EQ(server_->stats().rejected_ranges.load(), 4u);

  std::vector<uint8_t> expected = before;
  std::memcpy(expected.data(), a.data(), a.size());
  std::memcpy(expected.data() + 2000, b.data(), b.size());
  std::memcpy(expected.data() + kSmallSize - c.size(), c.data(), c.size());
  EXPECT_EQ(small_, expected);

  std::vector<uint8_t> out_a(a.size()), out_b(b.size()), junk(1000, 0x5A);
  std::vector<ReadOp> reads = {
      {kSmallSegment, kSmallSize - 999, 1000, junk.data()},
      {kSmallSegment, 0, a.size(), out_a.data()},
      {12345, 0, 1, junk.data()},
      {kSmallSegment, u64max, 1, junk.data()},
      {kSmallSegment, 2000, b.size(), out_b.data()},
  };
  s = client.Read(Endpoint(), kNodeId, reads);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(reads[0].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(reads[1].result, ErrorCode::OK);
  EXPECT_EQ(reads[2].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(reads[3].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(reads[4].result, ErrorCode::OK);
  EXPECT_EQ(out_a, a);
  EXPECT_EQ(out_b, b);
  // A rejected op's destination is left alone.
  EXPECT_EQ(junk, std::vector<uint8_t>(1000, 0x5A));
  EXPECT_EQ(server_->stats().rejected_ranges.load(), 7u);
}

TEST_F(TcpDataPlaneTest, RemovedSegmentIsRejected) {
  TcpDataClient client;
  std::vector<uint8_t> out(10);
  ReadOp r{kSmallSegment, 0, out.size(), out.data()};
  ASSERT_TRUE(client.Read(Endpoint(), kNodeId, {&r, 1}).ok());
  EXPECT_EQ(r.result, ErrorCode::OK);
  table_.Remove(kSmallSegment);
  ASSERT_TRUE(client.Read(Endpoint(), kNodeId, {&r, 1}).ok());
  EXPECT_EQ(r.result, ErrorCode::INVALID_PARAMS);
}

// A segment whose memory goes back to its owner (RemoveAndWait: the node's
// unmount of an extra segment) is waited for while a request that resolved
// it is still moving bytes: the write lands whole before the remove
// returns, and nothing later reaches the segment.
TEST_F(TcpDataPlaneTest, RemoveAndWaitWaitsForAWriteInFlight) {
  std::promise<void> resolved;
  std::once_flag once;
  TcpDataServer server(&table_, kNodeId, TcpDataServerOptions{});
  // Called right after the range resolved (and pinned its segment).
  server.SetWriteGuard([&](uint64_t, uint64_t, uint64_t) {
    std::call_once(once, [&] { resolved.set_value(); });
    return true;
  });
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  tcp::socket s = RawConnect(true, server.port());
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kWrite);
  h.count = 1;
  h.body_len = wire::kRangeSize + 8;
  asio::write(s, asio::buffer(Frame(h, {{kSmallSegment, 16, 8}})));
  asio::write(s, asio::buffer("abcd", 4));  // half the payload
  resolved.get_future().wait();
  auto removed = std::async(std::launch::async,
                            [&] { table_.RemoveAndWait(kSmallSegment); });
  EXPECT_EQ(removed.wait_for(std::chrono::milliseconds(100)),
            std::future_status::timeout);
  asio::write(s, asio::buffer("efgh", 4));
  uint8_t resp[wire::kHeaderSize + wire::kResultSize];
  asio::read(s, asio::buffer(resp));
  EXPECT_EQ(wire::GetLe<uint32_t>(resp + wire::kHeaderSize), 0u);
  removed.get();
  EXPECT_EQ(std::memcmp(small_.data() + 16, "abcdefgh", 8), 0);
  // Gone for the next request on the same connection.
  h.op = static_cast<uint16_t>(wire::Op::kRead);
  h.body_len = wire::kRangeSize;
  asio::write(s, asio::buffer(Frame(h, {{kSmallSegment, 16, 8}})));
  asio::read(s, asio::buffer(resp));
  EXPECT_EQ(
      static_cast<int32_t>(wire::GetLe<uint32_t>(resp + wire::kHeaderSize)),
      ToInt(ErrorCode::INVALID_PARAMS));
}

TEST_F(TcpDataPlaneTest, MalformedFramesCloseTheConnection) {
  std::vector<uint8_t> sentinel = small_;
  const auto read_op = static_cast<uint16_t>(wire::Op::kRead);
  const auto write_op = static_cast<uint16_t>(wire::Op::kWrite);

  // Garbage that happens to be a full header's worth of bytes.
  ExpectBadFrame(RandomBytes(wire::kHeaderSize * 3, 99));

  wire::Header h;
  h.op = read_op;
  h.count = 1;
  h.body_len = wire::kRangeSize;
  const std::vector<wire::Range> one = {{kSmallSegment, 0, 16}};

  wire::Header bad = h;
  bad.magic = 0x12345678;
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.version = 1;  // before the HELLO handshake
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.version = wire::kVersion + 1;
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.op = 77;
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.status = -1;
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.count = wire::kMaxOps + 1;
  bad.body_len = uint64_t{bad.count} * wire::kRangeSize;
  ExpectBadFrame(Frame(bad, one));

  bad = h;
  bad.body_len = wire::kRangeSize + 1;  // READ carries no payload
  ExpectBadFrame(Frame(bad, one));

  // READ asking for more than the per-frame limit in total.
  bad = h;
  bad.count = 2;
  bad.body_len = 2 * wire::kRangeSize;
  ExpectBadFrame(
      Frame(bad, {{kBigSegment, 0, wire::kMaxPayload}, {kBigSegment, 0, 1}}));

  // WRITE whose body is shorter than its own ranges.
  bad = h;
  bad.op = write_op;
  bad.count = 2;
  bad.body_len = wire::kRangeSize;
  ExpectBadFrame(Frame(bad, one));

  // WRITE announcing a payload over the limit.
  bad = h;
  bad.op = write_op;
  bad.body_len = wire::kRangeSize + wire::kMaxPayload + 1;
  ExpectBadFrame(Frame(bad, one));

  // WRITE whose ranges do not add up to its payload; the payload is sent
  // too, and must not land in the segment.
  bad = h;
  bad.op = write_op;
  bad.body_len = wire::kRangeSize + 15;
  std::vector<uint8_t> frame = Frame(bad, one);
  frame.resize(frame.size() + 15, 0xCC);
  ExpectBadFrame(frame);

  EXPECT_EQ(small_, sentinel);
  EXPECT_EQ(server_->stats().bytes_written.load(), 0u);
  EXPECT_EQ(server_->stats().bad_frames.load(), 12u);

  // The server is still healthy for well-behaved clients.
  TcpDataClient client;
  ExpectRoundTrip(client, 4096, RandomBytes(100000, 5));
}

TEST_F(TcpDataPlaneTest, PeerClosingMidFrameIsNotABadFrame) {
  {
    tcp::socket s = RawConnect();
    const uint8_t half[10] = {'K', 'V', 'D', 'P'};
    asio::write(s, asio::buffer(half));
  }
  TcpDataClient client;
  ExpectRoundTrip(client, 0, RandomBytes(1000, 6));
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, SsdReadIsRefusedCleanlyAndTheStreamStaysInSync) {
  // The fixture's server has neither an SSD read nor a prefetch handler:
  // both ops get a frame-level INVALID_PARAMS, whatever their body holds.
  tcp::socket s = RawConnect();
  wire::Header h;
  for (const wire::Op op : {wire::Op::kSsdRead, wire::Op::kPrefetch,
                            wire::Op::kPrefetchForNextGet}) {
    h.op = static_cast<uint16_t>(op);
    h.count = 1;
    h.body_len = 10;
    std::vector<uint8_t> frame = Frame(h, {});
    frame.resize(frame.size() + 10, 'k');
    asio::write(s, asio::buffer(frame));
    uint8_t resp[wire::kHeaderSize];
    asio::read(s, asio::buffer(resp));
    wire::Header rh = wire::DecodeHeader(resp);
    EXPECT_EQ(rh.magic, wire::kMagic);
    EXPECT_EQ(rh.op, h.op);
    EXPECT_EQ(rh.status, ToInt(ErrorCode::INVALID_PARAMS));
    EXPECT_EQ(rh.count, 0u);
    EXPECT_EQ(rh.body_len, 0u);
  }
  wire::Header rh;

  // Same connection, a normal READ next.
  std::memcpy(small_.data() + 8, "abcd", 4);
  h.op = static_cast<uint16_t>(wire::Op::kRead);
  h.body_len = wire::kRangeSize;
  asio::write(s, asio::buffer(Frame(h, {{kSmallSegment, 8, 4}})));
  uint8_t resp2[wire::kHeaderSize + wire::kResultSize + 4];
  asio::read(s, asio::buffer(resp2));
  rh = wire::DecodeHeader(resp2);
  EXPECT_EQ(rh.status, 0);
  EXPECT_EQ(rh.count, 1u);
  EXPECT_EQ(rh.body_len, wire::kResultSize + 4);
  EXPECT_EQ(wire::GetLe<uint32_t>(resp2 + wire::kHeaderSize), 0u);
  EXPECT_EQ(
      std::memcmp(resp2 + wire::kHeaderSize + wire::kResultSize, "abcd", 4), 0);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, SsdReadServesEachKeyIntoItsDestination) {
  FakeSsd ssd;
  const std::vector<size_t> sizes = {1,    7,     4095,          4096,
                                     4097, 65541, (4 << 20) + 3, 100};
  std::vector<std::string> tenants;
  for (size_t i = 0; i < sizes.size(); ++i) {
    // Tenants are passed through as given, the empty one too.
    tenants.push_back(i % 3 == 0 ? "" : (i % 3 == 1 ? "default" : "t2"));
    ssd.values[{tenants[i], Name("key-", i)}] =
        RandomBytes(sizes[i], static_cast<uint32_t>(50 + i));
  }
  auto server = StartServer({}, ssd.Handler(), nullptr);
  const std::string ep = EndpointOf(server->port());

  std::vector<std::vector<uint8_t>> dests;
  std::vector<KeyReadOp> ops;
  for (size_t i = 0; i < sizes.size(); ++i) {
    dests.emplace_back(sizes[i], 0xEE);
  }
  std::vector<uint8_t> missing(64, 0x5A), wrong_size(99, 0x5A),
      other_tenant(100, 0x5A);
  // Reversed order, with misses in between.
  for (size_t j = 0; j < sizes.size(); ++j) {
    const size_t i = sizes.size() - 1 - j;
    ops.push_back({tenants[i], Name("key-", i), sizes[i], dests[i].data()});
    if (j == 2) ops.push_back({"", "no-such-key", 64, missing.data()});
    if (j == 4) ops.push_back({"t2", "key-7", 99, wrong_size.data()});
  }
  ops.push_back({"other", "key-7", 100, other_tenant.data()});

  TcpDataClient client;
  Status s = client.ReadKeys(ep, kNodeId, ops);
  ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t total = 0;
  for (const KeyReadOp& op : ops) {
    if (op.key == "no-such-key" || op.length == 99 || op.tenant == "other") {
      EXPECT_EQ(op.result, ErrorCode::OBJECT_NOT_FOUND) << op.key;
      continue;
    }
    EXPECT_EQ(op.result, ErrorCode::OK) << op.key;
    total += op.length;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(dests[i], (ssd.values[{tenants[i], Name("key-", i)}]))
        << "size " << sizes[i];
  }
  // A failed op's destination is left alone.
  EXPECT_EQ(missing, std::vector<uint8_t>(64, 0x5A));
  EXPECT_EQ(wrong_size, std::vector<uint8_t>(99, 0x5A));
  EXPECT_EQ(other_tenant, std::vector<uint8_t>(100, 0x5A));
  {
    std::lock_guard lock(ssd.mu);
    EXPECT_EQ(ssd.calls, 1);  // one request, one handler call
    EXPECT_EQ(ssd.ops_seen, ops.size());
    EXPECT_EQ(ssd.misaligned, 0u);
  }

  // Ops the server would refuse are settled locally, never sent.
  std::vector<uint8_t> out(8);
  std::vector<KeyReadOp> bad = {
      {"", "key-1", 0, out.data()},
      {"", "key-1", 7, nullptr},
      {"", "", 7, out.data()},
      {"", std::string(wire::kMaxKeySize + 1, 'k'), 7, out.data()},
      {std::string(wire::kMaxTenantSize + 1, 't'), "key-1", 7, out.data()},
      {"default", "key-1", 7, out.data()},
  };
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, bad).ok());
  for (size_t i = 0; i + 1 < bad.size(); ++i) {
    EXPECT_EQ(bad[i].result, ErrorCode::INVALID_PARAMS) << i;
  }
  EXPECT_EQ(bad.back().result, ErrorCode::OK);
  out.resize(7);
  EXPECT_EQ(out, (ssd.values[{"default", "key-1"}]));
  {
    std::lock_guard lock(ssd.mu);
    EXPECT_EQ(ssd.ops_seen, ops.size() + 1);
  }
  // Counted once a response is out, so the last one may still lag; the
  // second answer on the same (pooled) connection proves the first one's
  // bytes are in.
  const uint64_t counted = server->stats().ssd_bytes_read.load();
  EXPECT_TRUE(counted == total || counted == total + 7) << counted;
  EXPECT_EQ(server->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, SsdReadBatchesOverTheBufferBudgetAreSplit) {
  FakeSsd ssd;
  std::vector<std::vector<uint8_t>> dests;
  std::vector<KeyReadOp> ops;
  for (int i = 0; i < 40; ++i) {
    const std::string key = Name("k", i);
    ssd.values[{"t", key}] = RandomBytes(5000 + i, 60 + i);
    dests.emplace_back(5000 + i, 0);
  }
  for (int i = 0; i < 40; ++i) {
    ops.push_back({"t", Name("k", i), 5000u + i, dests[i].data()});
  }
  auto server = StartServer({}, ssd.Handler(), nullptr);
  TcpDataClientOptions options;
  options.max_ssd_read_frame_bytes = 64 << 10;  // 8 ops of 8 KiB slots
  TcpDataClient client(options);
  ASSERT_TRUE(client.ReadKeys(EndpointOf(server->port()), kNodeId, ops).ok());
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(ops[i].result, ErrorCode::OK);
    EXPECT_EQ(dests[i], (ssd.values[{"t", Name("k", i)}]));
  }
  std::lock_guard lock(ssd.mu);
  EXPECT_EQ(ssd.calls, 5);
  EXPECT_EQ(ssd.misaligned, 0u);
}

TEST_F(TcpDataPlaneTest, SsdReadHandlerRunsOffTheIoThreads) {
  // One I/O thread: were the handler run on it, nothing else could be
  // served while it blocks.
  FakeSsd ssd;
  ssd.values[{"t", "k"}] = RandomBytes(5000, 70);
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::once_flag first_call;
  ssd.hook = [&] {
    std::call_once(first_call, [&] { entered.set_value(); });
    released.wait();
  };
  FakePrefetcher prefetcher;  // runs on the I/O thread, by design
  prefetcher.held = {"k"};
  TcpDataServerOptions options;
  options.io_threads = 1;
  auto server = StartServer(options, ssd.Handler(), prefetcher.Handler());
  const std::string ep = EndpointOf(server->port());

  TcpDataClient client;
  std::vector<uint8_t> out(5000, 0);
  KeyReadOp op{"t", "k", out.size(), out.data()};
  Status read_status;
  std::thread reader([&] {
    read_status = client.ReadKeys(ep, kNodeId, {&op, 1});
  });
  bool release_set = false;
  OnExit cleanup{[&] {
    if (!release_set) release.set_value();
    reader.join();
  }};
  entered.get_future().wait();

  // The handler is blocked now; the I/O thread still serves a segment
  // round trip and a PREFETCH on other connections.
  TcpDataClientOptions bounded;
  bounded.io_timeout = std::chrono::seconds(10);
  TcpDataClient other(bounded);
  ExpectRoundTrip(other, 0, RandomBytes(1000, 71), ep);
  std::vector<ErrorCode> results;
  Status s = other.Prefetch(ep, kNodeId, "t", {"k"}, &results);
  EXPECT_TRUE(s.ok()) << s.ToString();

  release.set_value();
  release_set = true;
  reader.join();
  cleanup.f = [] {};
  ASSERT_TRUE(read_status.ok()) << read_status.ToString();
  EXPECT_EQ(op.result, ErrorCode::OK);
  EXPECT_EQ(out, (ssd.values[{"t", "k"}]));

  std::lock_guard lock_ssd(ssd.mu);
  std::lock_guard lock_prefetch(prefetcher.mu);
  ASSERT_EQ(prefetcher.threads.size(), 1u);  // the one I/O thread
  ASSERT_EQ(ssd.threads.size(), 1u);
  EXPECT_NE(*ssd.threads.begin(), *prefetcher.threads.begin());
  EXPECT_EQ(ssd.threads.count(std::this_thread::get_id()), 0u);
}

TEST_F(TcpDataPlaneTest, SsdReadOverTheLimitsIsRefusedAndTheConnectionStays) {
  FakeSsd ssd;
  ssd.values[{"t", "a"}] = RandomBytes(600 << 10, 80);
  ssd.values[{"t", "b"}] = RandomBytes(600 << 10, 81);
  ssd.values[{"t", "c"}] = RandomBytes(1, 82);
  TcpDataServerOptions options;
  options.max_ssd_read_bytes = 1 << 20;
  auto server = StartServer(options, ssd.Handler(), nullptr);
  CuttableProxy proxy(server->port());  // counts the client's connections
  const std::string ep = EndpointOf(proxy.port());
  TcpDataClient client;

  // 1.2 MiB in total: refused as a whole, nothing handed to the handler.
  std::vector<uint8_t> a(600 << 10, 0x5A), b(600 << 10, 0x5A);
  std::vector<KeyReadOp> ops = {{"t", "a", a.size(), a.data()},
                                {"t", "b", b.size(), b.data()}};
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, ops).ok());
  for (const auto& op : ops) EXPECT_EQ(op.result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(a, std::vector<uint8_t>(600 << 10, 0x5A));

  // The limit counts each op's 4096-aligned slot: 300 one-byte values take
  // 1.2 MiB of buffer, 256 of them exactly 1 MiB.
  std::vector<uint8_t> bytes(300, 0);
  std::vector<KeyReadOp> small;
  for (int i = 0; i < 300; ++i) small.push_back({"t", "c", 1, &bytes[i]});
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, small).ok());
  for (const auto& op : small) EXPECT_EQ(op.result, ErrorCode::INVALID_PARAMS);
  small.resize(256);
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, small).ok());
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(small[i].result, ErrorCode::OK);
    EXPECT_EQ(bytes[i], (ssd.values[{"t", "c"}][0]));
  }

  // The same connection serves a request within the limit, and segments.
  ops.resize(1);
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::OK);
  EXPECT_EQ(a, (ssd.values[{"t", "a"}]));
  ExpectRoundTrip(client, 0, RandomBytes(1000, 83), ep);
  EXPECT_EQ(proxy.accepted(), 1);

  // Keys and tenants of bad length (which this client never sends) are
  // refused the same way, on a connection that stays in sync.
  tcp::socket s = RawConnect(/*hello=*/true, server->port());
  for (const auto& bad : std::vector<std::vector<RawKey>>{
           {{1, "t", "c"}, {1, "t", ""}},
           {{1, "t", std::string(wire::kMaxKeySize + 1, 'k')}},
           {{1, std::string(wire::kMaxTenantSize + 1, 't'), "c"}},
           {{wire::kMaxPayload + 1, "t", "c"}},
       }) {
    asio::write(s, asio::buffer(SsdReadFrame(bad)));
    auto [rh, codes] = ReadResponseHead(s);
    EXPECT_EQ(rh.op, static_cast<uint16_t>(wire::Op::kSsdRead));
    EXPECT_EQ(rh.status, ToInt(ErrorCode::INVALID_PARAMS));
    EXPECT_EQ(rh.count, 0u);
    EXPECT_EQ(rh.body_len, 0u);
  }
  // A zero-length op is refused alone; the longest key and tenant are fine.
  asio::write(
      s, asio::buffer(SsdReadFrame({{0, "t", "c"},
                                    {1, "t", "c"},
                                    {1, std::string(wire::kMaxTenantSize, 't'),
                                     std::string(wire::kMaxKeySize, 'k')}})));
  auto [rh, codes] = ReadResponseHead(s);
  EXPECT_EQ(rh.status, 0);
  EXPECT_EQ(codes, (std::vector<int32_t>{ToInt(ErrorCode::INVALID_PARAMS), 0,
                                         ToInt(ErrorCode::OBJECT_NOT_FOUND)}));
  ASSERT_EQ(rh.body_len, 3 * wire::kResultSize + 1);
  uint8_t value = 0;
  asio::read(s, asio::buffer(&value, 1));
  EXPECT_EQ(value, (ssd.values[{"t", "c"}][0]));
  ExpectRawReadWorks(s);
  EXPECT_EQ(server->stats().bad_frames.load(), 0u);

  // A descriptor that runs past the body is malformed: the server hangs up.
  std::vector<uint8_t> cut = SsdReadFrame({{1, "t", "c"}});
  wire::PutLe<uint32_t>(cut.data() + wire::kHeaderSize + 12, 2);  // key_len
  tcp::socket s2 = RawConnect(/*hello=*/true, server->port());
  asio::write(s2, asio::buffer(cut));
  EXPECT_TRUE(ServerClosed(s2));
  EXPECT_EQ(server->stats().bad_frames.load(), 1u);
}

TEST_F(TcpDataPlaneTest,
       SsdReadWithoutHandlerFailsEveryOpAndSegmentsStillWork) {
  // The fixture's server has no SSD read handler (an older or SSD-less node).
  CuttableProxy proxy(server_->port());
  const std::string ep = EndpointOf(proxy.port());
  TcpDataClient client;
  std::vector<uint8_t> a(10, 0x5A), b(4096, 0x5A);
  std::vector<KeyReadOp> ops = {{"t", "a", a.size(), a.data()},
                                {"", "b", b.size(), b.data()}};
  Status s = client.ReadKeys(ep, kNodeId, ops);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const auto& op : ops) EXPECT_NE(op.result, ErrorCode::OK);
  EXPECT_EQ(a, std::vector<uint8_t>(10, 0x5A));
  EXPECT_EQ(b, std::vector<uint8_t>(4096, 0x5A));
  ExpectRoundTrip(client, 0, RandomBytes(2000, 90), ep);
  EXPECT_EQ(proxy.accepted(), 1);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
  EXPECT_EQ(server_->stats().ssd_bytes_read.load(), 0u);
}

// A get's kick goes as PREFETCH_FOR_NEXT_GET: same body, same answers, and
// the handler is told (its promotions are for the next get).
TEST_F(TcpDataPlaneTest, PrefetchForTheNextGetReachesTheHandlerAsSuch) {
  FakePrefetcher prefetcher;
  prefetcher.held = {"k1"};
  auto server = StartServer({}, nullptr, prefetcher.Handler());
  const std::string ep = EndpointOf(server->port());
  TcpDataClient client;
  std::vector<ErrorCode> results;
  ASSERT_TRUE(client
                  .Prefetch(ep, kNodeId, "t", {"k1", "k2"}, &results, nullptr,
                            /*for_next_get=*/true)
                  .ok());
  EXPECT_EQ(results, (std::vector<ErrorCode>{ErrorCode::OK,
                                             ErrorCode::OBJECT_NOT_FOUND}));
  ASSERT_TRUE(client.Prefetch(ep, kNodeId, "t", {"k1"}, &results).ok());
  std::lock_guard lock(prefetcher.mu);
  ASSERT_EQ(prefetcher.calls.size(), 2u);
  EXPECT_EQ(prefetcher.calls[0].second, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(prefetcher.for_next_get, (std::vector<bool>{true, false}));
}

TEST_F(TcpDataPlaneTest, PrefetchIsAnsweredPerKey) {
  FakePrefetcher prefetcher;
  prefetcher.held = {"k1", "k3", std::string(wire::kMaxKeySize, 'L')};
  auto server = StartServer({}, nullptr, prefetcher.Handler());
  const std::string ep = EndpointOf(server->port());
  TcpDataClient client;

  const std::vector<std::string> keys = {
      "k1",
      "k2",
      "",
      "k3",
      std::string(wire::kMaxKeySize + 1, 'x'),
      std::string(wire::kMaxKeySize, 'L')};
  std::vector<ErrorCode> results;
  Status s = client.Prefetch(ep, kNodeId, "tenant-a", keys, &results);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(results,
            (std::vector<ErrorCode>{ErrorCode::OK, ErrorCode::OBJECT_NOT_FOUND,
                                    ErrorCode::INVALID_PARAMS, ErrorCode::OK,
                                    ErrorCode::INVALID_PARAMS, ErrorCode::OK}));
  // The empty tenant goes through as given; null results are allowed.
  s = client.Prefetch(ep, kNodeId, "", {"k3"}, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  {
    std::lock_guard lock(prefetcher.mu);
    ASSERT_EQ(prefetcher.calls.size(), 2u);
    EXPECT_EQ(prefetcher.calls[0].first, "tenant-a");
    EXPECT_EQ(prefetcher.calls[0].second,
              (std::vector<std::string>{"k1", "k2", "k3", keys[5]}));
    EXPECT_EQ(prefetcher.calls[1].first, "");
    EXPECT_EQ(prefetcher.calls[1].second, std::vector<std::string>{"k3"});
    EXPECT_EQ(prefetcher.for_next_get, (std::vector<bool>{false, false}));
  }
  EXPECT_EQ(server->stats().prefetch_keys.load(), 5u);

  // Nothing to send: no round trip at all.
  ASSERT_TRUE(client.Prefetch(ep, kNodeId, "t", {""}, &results).ok());
  EXPECT_EQ(results, std::vector<ErrorCode>{ErrorCode::INVALID_PARAMS});
  s = client.Prefetch(ep, kNodeId, std::string(wire::kMaxTenantSize + 1, 't'),
                      {"k1"}, &results);
  EXPECT_EQ(s.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(results, std::vector<ErrorCode>{ErrorCode::INVALID_PARAMS});

  // A raw client's bad keys are refused one by one, a bad tenant for all.
  tcp::socket raw = RawConnect(/*hello=*/true, server->port());
  asio::write(raw, asio::buffer(PrefetchFrame("t", {"k1", "", "k2"})));
  auto [rh, codes] = ReadResponseHead(raw);
  EXPECT_EQ(rh.status, 0);
  EXPECT_EQ(rh.body_len, 3 * wire::kResultSize);
  EXPECT_EQ(codes, (std::vector<int32_t>{0, ToInt(ErrorCode::INVALID_PARAMS),
                                         ToInt(ErrorCode::OBJECT_NOT_FOUND)}));
  asio::write(raw, asio::buffer(PrefetchFrame(
                       std::string(wire::kMaxTenantSize + 1, 't'), {"k1"})));
  auto [rh2, codes2] = ReadResponseHead(raw);
  EXPECT_EQ(rh2.status, 0);
  EXPECT_EQ(codes2, std::vector<int32_t>{ToInt(ErrorCode::INVALID_PARAMS)});
  ExpectRawReadWorks(raw);
  {
    std::lock_guard lock(prefetcher.mu);
    EXPECT_EQ(prefetcher.calls.size(), 3u);
  }
  // Trailing bytes after the keys make the frame malformed.
  std::vector<uint8_t> frame = PrefetchFrame("t", {"k1"});
  frame.push_back('x');
  wire::PutLe<uint64_t>(frame.data() + 16, frame.size() - wire::kHeaderSize);
  tcp::socket raw2 = RawConnect(/*hello=*/true, server->port());
  asio::write(raw2, asio::buffer(frame));
  EXPECT_TRUE(ServerClosed(raw2));
  EXPECT_EQ(server->stats().bad_frames.load(), 1u);
}

TEST_F(TcpDataPlaneTest,
       PrefetchWithoutHandlerIsUnavailableAndTheConnectionStays) {
  CuttableProxy proxy(server_->port());
  const std::string ep = EndpointOf(proxy.port());
  TcpDataClient client;
  std::vector<ErrorCode> results;
  Status s = client.Prefetch(ep, kNodeId, "t", {"k1", "", "k2"}, &results);
  EXPECT_EQ(s.code(), ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) << s.ToString();
  EXPECT_EQ(results,
            (std::vector<ErrorCode>{ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                                    ErrorCode::INVALID_PARAMS,
                                    ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS}));
  ExpectRoundTrip(client, 0, RandomBytes(3000, 91), ep);
  s = client.Prefetch(ep, kNodeId, "t", {"k1"}, &results);
  EXPECT_EQ(s.code(), ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  ExpectRoundTrip(client, 0, RandomBytes(3000, 92), ep);
  EXPECT_EQ(proxy.accepted(), 1);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, WrongExpectedNodeFailsSsdReadAndPrefetch) {
  FakeSsd ssd;
  ssd.values[{"t", "k"}] = RandomBytes(100, 93);
  FakePrefetcher prefetcher;
  prefetcher.held = {"k"};
  auto server = StartServer({}, ssd.Handler(), prefetcher.Handler());
  const std::string ep = EndpointOf(server->port());
  TcpDataClient client;
  // A connection to the right node is pooled first; it must not be reused.
  std::vector<uint8_t> out(100, 0x5A);
  KeyReadOp op{"t", "k", out.size(), out.data()};
  ASSERT_TRUE(client.ReadKeys(ep, kNodeId, {&op, 1}).ok());
  ASSERT_EQ(op.result, ErrorCode::OK);
  std::fill(out.begin(), out.end(), 0x5A);

  std::vector<KeyReadOp> ops = {{"t", "k", out.size(), out.data()},
                                {"t", "", 1, out.data()}};
  Status s = client.ReadKeys(ep, "other-node", ops);
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("different node"), std::string::npos)
      << s.message();
  for (const auto& o : ops) EXPECT_EQ(o.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(out, std::vector<uint8_t>(100, 0x5A));

  std::vector<ErrorCode> results;
  s = client.Prefetch(ep, "other-node", "t", {"k", ""}, &results);
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("different node"), std::string::npos)
      << s.message();
  EXPECT_EQ(results, (std::vector<ErrorCode>{ErrorCode::TRANSFER_FAIL,
                                             ErrorCode::TRANSFER_FAIL}));
  // Bad node ids are refused before connecting.
  s = client.Prefetch(ep, "", "t", {"k"}, &results);
  EXPECT_EQ(s.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(client.ReadKeys(ep, "", ops).code(), ErrorCode::INVALID_PARAMS);

  EXPECT_EQ(server->stats().identity_mismatches.load(), 2u);
  {
    std::lock_guard lock(ssd.mu);
    EXPECT_EQ(ssd.calls, 1);
  }
  {
    std::lock_guard lock(prefetcher.mu);
    EXPECT_TRUE(prefetcher.calls.empty());
  }
}

TEST_F(TcpDataPlaneTest, StopWithAnSsdReadInFlightCompletes) {
  // The handler is still running (and another request may be queued) when
  // Stop begins; Stop waits for the running one and drops the rest.
  FakeSsd ssd;
  ssd.values[{"t", "k"}] = RandomBytes(100, 94);
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::once_flag first_call;
  ssd.hook = [&] {
    std::call_once(first_call, [&] { entered.set_value(); });
    released.wait();
  };
  TcpDataServerOptions options;
  options.ssd_read_threads = 1;
  auto server = StartServer(options, ssd.Handler(), nullptr);
  const std::string ep = EndpointOf(server->port());
  std::vector<std::thread> readers;
  std::vector<Status> statuses(2);
  std::vector<std::vector<uint8_t>> outs(2, std::vector<uint8_t>(100));
  std::vector<KeyReadOp> ops(2);
  TcpDataClient client;
  bool release_set = false;
  OnExit cleanup{[&] {
    if (!release_set) release.set_value();
    for (auto& t : readers) t.join();
  }};
  for (int i = 0; i < 2; ++i) {
    ops[i] = {"t", "k", 100, outs[i].data()};
    readers.emplace_back([&, i] {
      statuses[i] = client.ReadKeys(ep, kNodeId, {&ops[i], 1});
    });
  }
  entered.get_future().wait();
  std::thread stopper([&] { server->Stop(); });
  release.set_value();
  release_set = true;
  stopper.join();
  for (auto& t : readers) t.join();
  readers.clear();
  for (int i = 0; i < 2; ++i) {
    // Served before the stop, or cut off by it.
    if (statuses[i].ok()) {
      EXPECT_EQ(ops[i].result, ErrorCode::OK);
      EXPECT_EQ(outs[i], (ssd.values[{"t", "k"}]));
    } else {
      EXPECT_EQ(statuses[i].code(), ErrorCode::TRANSFER_FAIL);
    }
  }
  // And it serves again after a restart.
  ASSERT_TRUE(server->Start("127.0.0.1", 0).ok());
  std::vector<uint8_t> out(100, 0);
  KeyReadOp op{"t", "k", out.size(), out.data()};
  ASSERT_TRUE(
      client.ReadKeys(EndpointOf(server->port()), kNodeId, {&op, 1}).ok());
  EXPECT_EQ(op.result, ErrorCode::OK);
}

TEST_F(TcpDataPlaneTest, BatchesOverTheOpLimitAreSplit) {
  const size_t n = wire::kMaxOps + 4464;  // two frames
  const auto data = RandomBytes(n * 16, 11);
  std::vector<WriteOp> writes(n);
  for (size_t i = 0; i < n; ++i) {
    writes[i] = {kBigSegment, i * 16, 16, data.data() + i * 16};
  }
  TcpDataClient client;
  ASSERT_TRUE(client.Write(Endpoint(), kNodeId, writes).ok());
  for (const auto& w : writes) ASSERT_EQ(w.result, ErrorCode::OK);

  std::vector<uint8_t> out(n * 16);
  std::vector<ReadOp> reads(n);
  for (size_t i = 0; i < n; ++i) {
    // Reversed op order: each op must still land in its own destination.
    const size_t j = n - 1 - i;
    reads[i] = {kBigSegment, j * 16, 16, out.data() + j * 16};
  }
  ASSERT_TRUE(client.Read(Endpoint(), kNodeId, reads).ok());
  for (const auto& r : reads) ASSERT_EQ(r.result, ErrorCode::OK);
  EXPECT_EQ(out, data);
}

TEST_F(TcpDataPlaneTest, DeadEndpointIsTransferFail) {
  TcpDataClient client;
  const std::string old_endpoint = Endpoint();
  // Leaves a pooled connection behind, which the stop turns stale.
  ExpectRoundTrip(client, 0, RandomBytes(4096, 8));
  server_->Stop();
  server_->Stop();  // idempotent

  std::vector<uint8_t> out(4096);
  std::vector<ReadOp> reads = {{kBigSegment, 0, 4096, out.data()},
                               {kBigSegment, 0, 0, out.data()}};
  Status s = client.Read(old_endpoint, kNodeId, reads);
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find(old_endpoint), std::string::npos) << s.message();
  EXPECT_EQ(reads[0].result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(reads[1].result, ErrorCode::TRANSFER_FAIL);

  // Nothing pooled any more: a fresh connect is refused.
  const auto data = RandomBytes(10, 9);
  WriteOp w{kBigSegment, 0, data.size(), data.data()};
  s = client.Write(old_endpoint, kNodeId, {&w, 1});
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("connect"), std::string::npos) << s.message();
  EXPECT_EQ(w.result, ErrorCode::TRANSFER_FAIL);

  // The same server object serves again after a restart (on a new port).
  ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
  EXPECT_EQ(server_->Start("127.0.0.1", 0).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  ExpectRoundTrip(client, 100, RandomBytes(70000, 10));
}

TEST_F(TcpDataPlaneTest, StalePooledConnectionIsRetriedOnANewOne) {
  CuttableProxy proxy(server_->port());
  const std::string endpoint = "127.0.0.1:" + std::to_string(proxy.port());
  TcpDataClient client;
  ExpectRoundTrip(client, 0, RandomBytes(3000, 15), endpoint);
  EXPECT_EQ(proxy.accepted(), 1);
  proxy.CutAll();
  // The pooled connection is dead; the call must still succeed, on a new one.
  ExpectRoundTrip(client, 0, RandomBytes(5000, 16), endpoint);
  EXPECT_EQ(proxy.accepted(), 2);
}

TEST_F(TcpDataPlaneTest, StalledServerTimesOut) {
  // Passes the HELLO, then never reads or answers: the kernel buffers the
  // request and the client waits for a response that never comes.
  FakePeer stalled([](tcp::socket& s) {
    if (ReadHello(s) != kNodeId) return false;
    asio::error_code ec;
    asio::write(s, asio::buffer(HelloFrame(kNodeId, 0)), ec);
    return true;
  });
  TcpDataClientOptions options;
  options.io_timeout = std::chrono::milliseconds(200);
  TcpDataClient client(options);
  std::vector<uint8_t> out(64);
  ReadOp r{kBigSegment, 0, out.size(), out.data()};
  const auto start = std::chrono::steady_clock::now();
  Status s = client.Read(stalled.Endpoint(), kNodeId, {&r, 1});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("receive response"), std::string::npos)
      << s.message();
  EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_GE(took, std::chrono::milliseconds(150));
  EXPECT_LT(took, std::chrono::seconds(20));
}

TEST_F(TcpDataPlaneTest, WrongExpectedNodeIsRefusedAndBuffersStayUntouched) {
  const auto stored = RandomBytes(8192, 21);
  std::memcpy(big_.data(), stored.data(), stored.size());
  TcpDataClient client;
  // A pooled connection to the right node must not serve another node id.
  ExpectRoundTrip(client, 100000, RandomBytes(1000, 22));
  // (bytes_read is counted once a response is out, so it may still lag.)
  const uint64_t written_before = server_->stats().bytes_written.load();

  std::vector<uint8_t> out(4096, 0x5A);
  std::vector<ReadOp> reads = {{kBigSegment, 0, 4096, out.data()},
                               {kBigSegment, 4096, 0, out.data()}};
  Status s = client.Read(Endpoint(), "other-node", reads);
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  for (const char* part : {"different node", "'other-node'", "refused"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  }
  // The refusal does not give the node's id away.
  EXPECT_EQ(s.message().find(kNodeId), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(Endpoint()), std::string::npos) << s.message();
  for (const auto& r : reads) EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0x5A));

  const auto data = RandomBytes(4096, 23);
  WriteOp w{kBigSegment, 0, data.size(), data.data()};
  s = client.Write(Endpoint(), "host-1234-1", {&w, 1});
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("different node"), std::string::npos)
      << s.message();
  EXPECT_EQ(w.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(std::memcmp(big_.data(), stored.data(), stored.size()), 0);

  EXPECT_EQ(server_->stats().identity_mismatches.load(), 2u);
  EXPECT_EQ(server_->stats().bytes_written.load(), written_before);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);

  // The server keeps serving clients that expect it, the same client too.
  ExpectRoundTrip(client, 0, RandomBytes(5000, 24));
  TcpDataClient other;
  ExpectRoundTrip(other, 0, RandomBytes(5000, 25));
}

TEST_F(TcpDataPlaneTest, PortTakenOverByAnotherNodeIsNeverServed) {
  // What a SIGKILLed node leaves behind: clients with pooled connections and
  // stale locations, and its port free for the next process. The new node
  // has a segment with the same id, holding other bytes.
  TcpDataClient client;
  const uint16_t port = server_->port();
  ExpectRoundTrip(client, 0, RandomBytes(4096, 26));
  server_->Stop();
  std::vector<uint8_t> impostor_bytes(kBigSize, 0x77);
  SegmentTable impostor_table;
  impostor_table.Add(kBigSegment,
                     {impostor_bytes.data(), impostor_bytes.size()});
  TcpDataServer impostor(&impostor_table, "host-1234-1");
  ASSERT_TRUE(impostor.Start("127.0.0.1", port).ok());

  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  std::vector<uint8_t> out(4096, 0x5A);
  ReadOp r{kBigSegment, 0, out.size(), out.data()};
  Status s = client.Read(endpoint, kNodeId, {&r, 1});
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("different node"), std::string::npos)
      << s.message();
  EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0x5A));
  const auto data = RandomBytes(4096, 27);
  WriteOp w{kBigSegment, 0, data.size(), data.data()};
  EXPECT_EQ(client.Write(endpoint, kNodeId, {&w, 1}).code(),
            ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(impostor_bytes, std::vector<uint8_t>(kBigSize, 0x77));
  EXPECT_EQ(impostor.stats().identity_mismatches.load(), 2u);

  // Clients that know the new node reach it at the same endpoint.
  r.result = ErrorCode::INTERNAL_ERROR;
  ASSERT_TRUE(client.Read(endpoint, "host-1234-1", {&r, 1}).ok());
  EXPECT_EQ(r.result, ErrorCode::OK);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0x77));
}

TEST_F(TcpDataPlaneTest, RawHelloForAnotherNodeGetsAnErrorThenTheClose) {
  tcp::socket s = RawConnect(/*hello=*/false);
  asio::write(s, asio::buffer(HelloFrame("someone-else", 0)));
  uint8_t raw[wire::kHeaderSize];
  asio::read(s, asio::buffer(raw));
  const wire::Header rh = wire::DecodeHeader(raw);
  EXPECT_EQ(rh.magic, wire::kMagic);
  EXPECT_EQ(rh.version, wire::kVersion);
  EXPECT_EQ(rh.op, static_cast<uint16_t>(wire::Op::kHello));
  EXPECT_EQ(rh.count, 0u);
  EXPECT_EQ(rh.status, ToInt(ErrorCode::SEGMENT_NOT_FOUND));
  // A guess that missed learns nothing: the answer names no node.
  EXPECT_EQ(rh.body_len, 0u);
  EXPECT_TRUE(ServerClosed(s));
  EXPECT_EQ(server_->stats().identity_mismatches.load(), 1u);
  EXPECT_EQ(server_->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, RequestsBeforeHelloAndBadHellosAreMalformed) {
  const std::vector<uint8_t> sentinel = small_;
  wire::Header read;
  read.op = static_cast<uint16_t>(wire::Op::kRead);
  read.count = 1;
  read.body_len = wire::kRangeSize;
  ExpectBadFrame(Frame(read, {{kSmallSegment, 0, 16}}), /*hello=*/false);

  wire::Header write = read;
  write.op = static_cast<uint16_t>(wire::Op::kWrite);
  write.body_len = wire::kRangeSize + 16;
  std::vector<uint8_t> frame = Frame(write, {{kSmallSegment, 0, 16}});
  frame.resize(frame.size() + 16, 0xCC);
  ExpectBadFrame(frame, /*hello=*/false);

  // Empty and over-long node ids, a count, a status, an old version.
  ExpectBadFrame(HelloFrame("", 0), /*hello=*/false);
  ExpectBadFrame(HelloFrame(std::string(wire::kMaxNodeIdSize + 1, 'n'), 0),
                 /*hello=*/false);
  frame = HelloFrame(kNodeId, 0);
  wire::PutLe<uint32_t>(frame.data() + 8, 1);  // count
  ExpectBadFrame(frame, /*hello=*/false);
  ExpectBadFrame(HelloFrame(kNodeId, -1), /*hello=*/false);
  ExpectBadFrame(HelloFrame(kNodeId, 0, /*version=*/1), /*hello=*/false);
  // HELLO only opens a connection.
  ExpectBadFrame(HelloFrame(kNodeId, 0), /*hello=*/true);

  EXPECT_EQ(server_->stats().bad_frames.load(), 8u);
  EXPECT_EQ(server_->stats().identity_mismatches.load(), 0u);
  EXPECT_EQ(small_, sentinel);
  TcpDataClient client;
  ExpectRoundTrip(client, 0, RandomBytes(1000, 28));
}

TEST_F(TcpDataPlaneTest, SilentPeerFailsWithinTheHandshakeTimeout) {
  // Accepts and holds the connection but never answers, like a server of
  // another protocol that waits for its client to speak first.
  FakePeer silent([](tcp::socket&) { return true; });
  TcpDataClient client;  // default timeouts: 2 s handshake, 30 s I/O
  const TcpDataClientOptions defaults;
  ASSERT_LT(defaults.handshake_timeout, defaults.io_timeout);
  std::vector<uint8_t> out(64, 0x5A);
  ReadOp r{kBigSegment, 0, out.size(), out.data()};
  auto start = std::chrono::steady_clock::now();
  Status s = client.Read(silent.Endpoint(), kNodeId, {&r, 1});
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HELLO"), std::string::npos) << s.message();
  EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(out, std::vector<uint8_t>(64, 0x5A));
  EXPECT_GE(took, defaults.handshake_timeout - std::chrono::milliseconds(50));
  EXPECT_LT(took, defaults.handshake_timeout + std::chrono::seconds(3));
  EXPECT_LT(took, defaults.io_timeout);

  // The handshake timeout is its own knob.
  TcpDataClientOptions options;
  options.handshake_timeout = std::chrono::milliseconds(300);
  TcpDataClient quick(options);
  const auto data = RandomBytes(64, 29);
  WriteOp w{kBigSegment, 0, data.size(), data.data()};
  start = std::chrono::steady_clock::now();
  s = quick.Write(silent.Endpoint(), kNodeId, {&w, 1});
  took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(w.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST_F(TcpDataPlaneTest, PeerAnsweringGarbageFailsFast) {
  struct Case {
    const char* name;
    FakePeer::Behaviour behave;
    const char* expect;  // in the message
  };
  auto answer = [](std::vector<uint8_t> bytes, bool keep_open) {
    return [bytes, keep_open](tcp::socket& s) {
      // The whole HELLO is read first, so a close is a clean FIN.
      ReadHello(s);
      asio::error_code ec;
      asio::write(s, asio::buffer(bytes), ec);
      return keep_open;
    };
  };
  auto text = [](const std::string& t) {
    return std::vector<uint8_t>(t.begin(), t.end());
  };
  std::vector<uint8_t> old_version = HelloFrame(kNodeId, 0, /*version=*/1);
  std::vector<uint8_t> bad_length = HelloFrame(kNodeId, 0);
  wire::PutLe<uint64_t>(bad_length.data() + 16, uint64_t{1} << 40);
  std::vector<uint8_t> wrong_op = HelloFrame(kNodeId, 0);
  wire::PutLe<uint16_t>(wrong_op.data() + 6,
                        static_cast<uint16_t>(wire::Op::kRead));
  const std::vector<Case> cases = {
      // An HTTP/1 server answering a request it cannot parse, connection
      // kept open: recognised from its first bytes, not by a timeout.
      {"http", answer(text("HTTP/1.1 400 Bad Request\r\n"), true),
       "not a kvpool data server"},
      {"short garbage", answer(text("K?"), true), "not a kvpool data server"},
      {"binary garbage", answer(RandomBytes(4096, 30), false),
       "not a kvpool data server"},
      {"closes", answer({}, false), "closed without an answer"},
      {"old version", answer(old_version, true), "version 1"},
      {"huge body", answer(bad_length, true), "malformed"},
      {"wrong op", answer(wrong_op, true), "malformed"},
      // A broken server that says OK but names another node.
      {"ok for another node", answer(HelloFrame("host-9", 0), true),
       "different node"},
  };
  TcpDataClientOptions options;
  options.handshake_timeout = std::chrono::seconds(5);
  TcpDataClient client(options);
  for (const Case& c : cases) {
    FakePeer peer(c.behave);
    std::vector<uint8_t> out(64, 0x5A);
    std::vector<ReadOp> reads = {{kBigSegment, 0, 32, out.data()},
                                 {kBigSegment, 32, 32, out.data() + 32}};
    const auto start = std::chrono::steady_clock::now();
    Status s = client.Read(peer.Endpoint(), kNodeId, reads);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL) << c.name;
    EXPECT_NE(s.message().find(c.expect), std::string::npos)
        << c.name << ": " << s.message();
    for (const auto& r : reads) {
      EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL) << c.name;
    }
    EXPECT_EQ(out, std::vector<uint8_t>(64, 0x5A)) << c.name;
    EXPECT_LT(took, options.handshake_timeout) << c.name;
  }
}

// The client reads a response's header, codes and (for a lone op) data with
// as few receives as it can. Whatever way the bytes are cut, it must take a
// good answer whole and refuse a bad one.
TEST_F(TcpDataPlaneTest, LoneReadResponsesAreTakenWholeOrRefused) {
  const std::vector<uint8_t> payload = RandomBytes(32, 41);
  // Answers the HELLO, reads one READ request, then writes `pieces`.
  auto serve = [](std::vector<std::vector<uint8_t>> pieces) {
    return [pieces](tcp::socket& s) {
      if (ReadHello(s) != kNodeId) return false;
      asio::error_code ec;
      asio::write(s, asio::buffer(HelloFrame(kNodeId, 0)), ec);
      uint8_t raw[wire::kHeaderSize];
      asio::read(s, asio::buffer(raw), ec);
      std::vector<uint8_t> ranges(wire::DecodeHeader(raw).count *
                                  wire::kRangeSize);
      asio::read(s, asio::buffer(ranges), ec);
      for (const auto& p : pieces) asio::write(s, asio::buffer(p), ec);
      return true;  // keep the connection open: no EOF to lean on
    };
  };
  auto head = [](int32_t status, uint32_t count, uint64_t body_len) {
    wire::Header h;
    h.op = static_cast<uint16_t>(wire::Op::kRead);
    h.status = status;
    h.count = count;
    h.body_len = body_len;
    std::vector<uint8_t> b(wire::kHeaderSize);
    wire::EncodeHeader(h, b.data());
    return b;
  };
  auto code = [](ErrorCode c) {
    std::vector<uint8_t> b(wire::kResultSize);
    wire::PutLe<uint32_t>(b.data(), static_cast<uint32_t>(c));
    return b;
  };
  auto cat = [](std::vector<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  const auto ok_head = head(0, 1, wire::kResultSize + payload.size());
  const std::vector<uint8_t> first_half(payload.begin(), payload.begin() + 16);
  const std::vector<uint8_t> second_half(payload.begin() + 16, payload.end());
  const std::vector<uint8_t> head_a(ok_head.begin(), ok_head.begin() + 10);
  const std::vector<uint8_t> head_b(ok_head.begin() + 10, ok_head.end());
  struct Case {
    const char* name;
    std::vector<std::vector<uint8_t>> pieces;
    ErrorCode call;  // expected status of the call
    ErrorCode op;    // expected result of the op
  };
  const std::vector<Case> cases = {
      {"one write",
       {cat({ok_head, code(ErrorCode::OK), payload})},
       ErrorCode::OK,
       ErrorCode::OK},
      {"cut everywhere",
       {head_a, head_b, code(ErrorCode::OK), first_half, second_half},
       ErrorCode::OK,
       ErrorCode::OK},
      {"data with the codes, then the rest",
       {cat({ok_head, code(ErrorCode::OK), first_half}), second_half},
       ErrorCode::OK,
       ErrorCode::OK},
      {"op refused",
       {cat({head(0, 1, 4), code(ErrorCode::INVALID_PARAMS)})},
       ErrorCode::OK,
       ErrorCode::INVALID_PARAMS},
      {"frame refused",
       {head(static_cast<int32_t>(ErrorCode::INVALID_PARAMS), 0, 0)},
       ErrorCode::OK,
       ErrorCode::INVALID_PARAMS},
      {"data for a refused op",
       {cat({head(0, 1, 4 + payload.size()), code(ErrorCode::INVALID_PARAMS),
             payload})},
       ErrorCode::TRANSFER_FAIL,
       ErrorCode::TRANSFER_FAIL},
      {"body on a refused frame",
       {cat({head(static_cast<int32_t>(ErrorCode::INVALID_PARAMS), 0, 0),
             payload})},
       ErrorCode::TRANSFER_FAIL,
       ErrorCode::TRANSFER_FAIL},
  };
  TcpDataClientOptions options;
  options.io_timeout = std::chrono::milliseconds(3000);
  for (const Case& c : cases) {
    FakePeer peer(serve(c.pieces));
    TcpDataClient client(options);
    std::vector<uint8_t> out(payload.size(), 0x5A);
    ReadOp op{kBigSegment, 0, out.size(), out.data()};
    Status s = client.Read(peer.Endpoint(), kNodeId, {&op, 1});
    EXPECT_EQ(s.code(), c.call) << c.name << ": " << s.ToString();
    EXPECT_EQ(op.result, c.op) << c.name;
    if (c.op == ErrorCode::OK) {
      EXPECT_EQ(out, payload) << c.name;
    }
  }
}

TEST_F(TcpDataPlaneTest, NodeIdsMustBeOneTo256Bytes) {
  TcpDataServer nameless(&table_, "");
  EXPECT_EQ(nameless.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);
  TcpDataServer verbose(&table_, std::string(wire::kMaxNodeIdSize + 1, 'x'));
  EXPECT_EQ(verbose.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);

  const std::string longest(wire::kMaxNodeIdSize, 'x');
  TcpDataServer server(&table_, longest);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  EXPECT_EQ(server.node_id(), longest);
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  TcpDataClient client;
  std::vector<uint8_t> out(16, 0x5A);
  for (const std::string& bad :
       {std::string(), std::string(wire::kMaxNodeIdSize + 1, 'x')}) {
    ReadOp r{kBigSegment, 0, out.size(), out.data()};
    EXPECT_EQ(client.Read(endpoint, bad, {&r, 1}).code(),
              ErrorCode::INVALID_PARAMS);
    EXPECT_EQ(r.result, ErrorCode::INVALID_PARAMS);
  }
  EXPECT_EQ(out, std::vector<uint8_t>(16, 0x5A));
  ReadOp r{kBigSegment, 0, out.size(), out.data()};
  ASSERT_TRUE(client.Read(endpoint, longest, {&r, 1}).ok());
  EXPECT_EQ(r.result, ErrorCode::OK);
  EXPECT_EQ(out, std::vector<uint8_t>(16, 0));
}

TEST_F(TcpDataPlaneTest, MalformedEndpointIsInvalidParams) {
  TcpDataClient client;
  std::vector<uint8_t> out(8);
  for (const char* ep : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0",
                         "127.0.0.1:70000", ":80", "127.0.0.1:12x"}) {
    ReadOp r{kBigSegment, 0, out.size(), out.data()};
    EXPECT_EQ(client.Read(ep, kNodeId, {&r, 1}).code(),
              ErrorCode::INVALID_PARAMS)
        << ep;
    EXPECT_EQ(r.result, ErrorCode::INVALID_PARAMS) << ep;
  }
}

TEST_F(TcpDataPlaneTest, ForgetDropsConnectionsButCallsStillWork) {
  TcpDataClient client;
  ExpectRoundTrip(client, 0, RandomBytes(1000, 12));
  client.Forget(Endpoint());
  client.Forget("10.0.0.1:1");  // never used: a no-op
  ExpectRoundTrip(client, 0, RandomBytes(1000, 13));
}

TEST_F(TcpDataPlaneTest, ConcurrentClientsFromManyThreads) {
  constexpr int kThreads = 6;
  constexpr int kIterations = 40;
  constexpr uint64_t kSlice = kBigSize / kThreads;
  TcpDataClient shared;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TcpDataClient own;
      // Half the threads share one client (and so its pool).
      TcpDataClient& client = t % 2 == 0 ? shared : own;
      std::mt19937 rng(t);
      for (int it = 0; it < kIterations; ++it) {
        const size_t n = 1 + rng() % 4;
        std::vector<std::vector<uint8_t>> data;
        std::vector<WriteOp> writes;
        uint64_t offset = t * kSlice;
        for (size_t i = 0; i < n; ++i) {
          const size_t len = 1 + rng() % (256 << 10);
          data.push_back(RandomBytes(len, rng()));
          writes.push_back({kBigSegment, offset, len, data.back().data()});
          offset += len;
        }
        Status s = client.Write(Endpoint(), kNodeId, writes);
        std::vector<std::vector<uint8_t>> out(n);
        std::vector<ReadOp> reads;
        for (size_t i = 0; i < n; ++i) {
          out[i].resize(data[i].size());
          reads.push_back(
              {kBigSegment, writes[i].offset, out[i].size(), out[i].data()});
        }
        if (s.ok()) s = client.Read(Endpoint(), kNodeId, reads);
        if (!s.ok()) {
          failures[t] = s.ToString();
          return;
        }
        for (size_t i = 0; i < n; ++i) {
          if (writes[i].result != ErrorCode::OK ||
              reads[i].result != ErrorCode::OK || out[i] != data[i]) {
            failures[t] = "mismatch at iteration " + std::to_string(it);
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << t;
}

// Connections are spread over the I/O threads, one context each: every
// thread must serve the connections it is given, also after all of its
// earlier ones have closed (an idle context must not stop running).
TEST_F(TcpDataPlaneTest, EveryIoThreadServesItsConnections) {
  constexpr int kIoThreads = 3;
  auto server = StartServer(TcpDataServerOptions{.io_threads = kIoThreads},
                            nullptr, nullptr);
  const std::string endpoint = EndpointOf(server->port());
  TcpDataClientOptions quick;
  quick.io_timeout = std::chrono::milliseconds(3000);
  for (int wave = 0; wave < 2; ++wave) {
    // Each client holds its own connection: kIoThreads * 2 of them land on
    // every context twice.
    std::vector<std::unique_ptr<TcpDataClient>> clients;
    for (int i = 0; i < kIoThreads * 2; ++i) {
      clients.push_back(std::make_unique<TcpDataClient>(quick));
      ExpectRoundTrip(*clients.back(), uint64_t(i) * 4096,
                      RandomBytes(3000 + i, uint32_t(wave * 100 + i)),
                      endpoint);
    }
    // And all of them again, interleaved, while every connection is open.
    for (int i = 0; i < kIoThreads * 2; ++i) {
      ExpectRoundTrip(*clients[i], uint64_t(i) * 4096,
                      RandomBytes(5000, uint32_t(wave * 100 + 50 + i)),
                      endpoint);
    }
  }  // the clients close their connections before the next wave
  EXPECT_EQ(server->stats().bad_frames.load(), 0u);
}

TEST_F(TcpDataPlaneTest, StopWhileClientsAreConnectedCompletes) {
  TcpDataClient client;
  ExpectRoundTrip(client, 0, RandomBytes(100, 14));
  tcp::socket idle = RawConnect();
  // A session blocked mid-frame must not keep Stop from returning.
  const uint8_t partial[5] = {'K', 'V'};
  asio::write(idle, asio::buffer(partial));
  server_->Stop();
  EXPECT_TRUE(ServerClosed(idle));
}

}  // namespace
}  // namespace kvpool
