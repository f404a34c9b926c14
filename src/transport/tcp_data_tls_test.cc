#include <gtest/gtest.h>

#include <asio.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tests/tls_test_files.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"

namespace kvpool {
namespace {

constexpr uint64_t kSegment = 7;
constexpr uint64_t kSegmentSize = 16 << 20;
const std::string kNodeId = "tls-node-0";

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Bounded wait for a counter the server bumps after the peer may already
// have seen the connection close.
template <typename F>
bool Eventually(F&& done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class TcpDataTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tls_.ok()) GTEST_SKIP() << "the openssl command line failed";
    segment_.assign(kSegmentSize, 0);
    table_.Add(kSegment, {segment_.data(), segment_.size()});
  }

  std::unique_ptr<TcpDataServer> StartServer(
      bool tls, const std::string& host = "127.0.0.1") {
    TcpDataServerOptions options;
    if (tls) {
      options.tls_cert_file = tls_("server.pem");
      options.tls_key_file = tls_("server.key");
    }
    auto server = std::make_unique<TcpDataServer>(&table_, kNodeId, options);
    server->SetSsdReadHandler([this](std::span<KeyReadOp> ops) {
      for (KeyReadOp& op : ops) {
        const auto it = ssd_.find(op.key);
        if (it == ssd_.end() || it->second.size() != op.length) {
          op.result = ErrorCode::OBJECT_NOT_FOUND;
          continue;
        }
        std::memcpy(op.dest, it->second.data(), op.length);
        op.result = ErrorCode::OK;
      }
    });
    const Status s = server->Start(host, 0);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return server;
  }

  static TcpDataClientOptions ClientOptions(const std::string& ca) {
    TcpDataClientOptions o;
    o.tls_ca_file = ca;
    return o;
  }

  static std::string Endpoint(const TcpDataServer& server,
                              const std::string& host = "127.0.0.1") {
    return host + ":" + std::to_string(server.port());
  }

  // One small READ: the status of the call.
  Status ReadSome(TcpDataClient& client, const std::string& endpoint) {
    uint8_t buf[16];
    ReadOp r{kSegment, 0, sizeof(buf), buf};
    return client.Read(endpoint, kNodeId, {&r, 1});
  }

  TlsTestFiles tls_;
  std::vector<uint8_t> segment_;
  SegmentTable table_;
  // Set before the server starts, read-only afterwards.
  std::map<std::string, std::vector<uint8_t>> ssd_;
};

TEST_F(TcpDataTlsTest, ReadWriteAndSsdReadRoundTripOverTls) {
  ssd_["a"] = RandomBytes(5000, 1);
  ssd_["b"] = RandomBytes(1 << 20, 2);
  auto server = StartServer(/*tls=*/true);
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  const std::string ep = Endpoint(*server);

  // Sizes that straddle TLS records (16 KiB) and the partial-write path.
  const std::vector<size_t> sizes = {1, 4096, 16385, 65537, 1 << 20, 5 << 20};
  std::vector<std::vector<uint8_t>> data;
  std::vector<WriteOp> writes;
  uint64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    data.push_back(RandomBytes(sizes[i], 10 + static_cast<uint32_t>(i)));
    writes.push_back({kSegment, offset, sizes[i], data.back().data()});
    offset += sizes[i] + 3;
  }
  // Several calls on the pooled connection: one batch, then one op each.
  Status s = client.Write(ep, kNodeId, writes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const WriteOp& w : writes) ASSERT_EQ(w.result, ErrorCode::OK);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(std::memcmp(segment_.data() + writes[i].offset, data[i].data(),
                          sizes[i]),
              0);
  }
  std::vector<std::vector<uint8_t>> back(sizes.size());
  std::vector<ReadOp> reads;
  for (size_t i = 0; i < sizes.size(); ++i) {
    back[i].assign(sizes[i], 0);
    reads.push_back({kSegment, writes[i].offset, sizes[i], back[i].data()});
  }
  s = client.Read(ep, kNodeId, reads);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(reads[i].result, ErrorCode::OK);
    ASSERT_EQ(back[i], data[i]) << "op " << i;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> one(sizes[i]);
    ReadOp r{kSegment, writes[i].offset, sizes[i], one.data()};
    ASSERT_TRUE(client.Read(ep, kNodeId, {&r, 1}).ok());
    ASSERT_EQ(r.result, ErrorCode::OK);
    ASSERT_EQ(one, data[i]);
  }

  std::vector<uint8_t> a(5000), b(1 << 20), miss(10);
  std::vector<KeyReadOp> keys(3);
  keys[0].key = "a", keys[0].length = a.size(), keys[0].dest = a.data();
  keys[1].key = "b", keys[1].length = b.size(), keys[1].dest = b.data();
  keys[2].key = "c", keys[2].length = miss.size(), keys[2].dest = miss.data();
  for (int round = 0; round < 3; ++round) {
    s = client.ReadKeys(ep, kNodeId, keys);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(keys[0].result, ErrorCode::OK);
    ASSERT_EQ(keys[1].result, ErrorCode::OK);
    ASSERT_EQ(keys[2].result, ErrorCode::OBJECT_NOT_FOUND);
    ASSERT_EQ(a, ssd_["a"]);
    ASSERT_EQ(b, ssd_["b"]);
  }
  // An op the node does not serve is refused inside TLS, the stream in sync.
  std::vector<ErrorCode> results;
  EXPECT_EQ(client.Prefetch(ep, kNodeId, "", {"a"}, &results).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_TRUE(ReadSome(client, ep).ok());

  EXPECT_EQ(server->stats().tls_handshake_failures.load(), 0u);
  EXPECT_EQ(server->stats().bad_frames.load(), 0u);
  EXPECT_EQ(server->stats().ssd_bytes_read.load(), 3 * (a.size() + b.size()));
}

TEST_F(TcpDataTlsTest, ConcurrentCallsEachGetTheirOwnTlsConnection) {
  auto server = StartServer(/*tls=*/true);
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  const std::string ep = Endpoint(*server);
  constexpr int kThreads = 4;
  constexpr size_t kSize = 256 << 10;
  std::vector<std::vector<uint8_t>> data;
  for (int t = 0; t < kThreads; ++t)
    data.push_back(RandomBytes(kSize, 100 + t));
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t off = uint64_t(t) * kSize;
      std::vector<uint8_t> back(kSize);
      for (int i = 0; i < 20; ++i) {
        WriteOp w{kSegment, off, kSize, data[t].data()};
        ReadOp r{kSegment, off, kSize, back.data()};
        if (!client.Write(ep, kNodeId, {&w, 1}).ok() ||
            w.result != ErrorCode::OK ||
            !client.Read(ep, kNodeId, {&r, 1}).ok() ||
            r.result != ErrorCode::OK || back != data[t]) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
}

TEST_F(TcpDataTlsTest, PlaintextClientAgainstTlsServerFailsCleanly) {
  auto server = StartServer(/*tls=*/true);
  const std::string ep = Endpoint(*server);
  TcpDataClient plain;
  uint8_t buf[16];
  ReadOp r{kSegment, 0, sizeof(buf), buf};
  const Status s = plain.Read(ep, kNodeId, {&r, 1});
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL) << s.ToString();
  EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("requires TLS"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(Eventually(
      [&] { return server->stats().tls_handshake_failures.load() >= 1; }));
  // The server keeps serving TLS clients.
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  const Status ok = ReadSome(client, ep);
  EXPECT_TRUE(ok.ok()) << ok.ToString();
}

TEST_F(TcpDataTlsTest, TlsClientAgainstPlaintextServerFailsCleanly) {
  auto server = StartServer(/*tls=*/false);
  const std::string ep = Endpoint(*server);
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  uint8_t buf[16];
  ReadOp r{kSegment, 0, sizeof(buf), buf};
  const Status s = client.Read(ep, kNodeId, {&r, 1});
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL) << s.ToString();
  EXPECT_EQ(r.result, ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("plaintext"), std::string::npos) << s.ToString();
  TcpDataClient plain;
  EXPECT_TRUE(ReadSome(plain, ep).ok());
}

TEST_F(TcpDataTlsTest, ClientTrustingAnotherCaFailsTheHandshake) {
  auto server = StartServer(/*tls=*/true);
  const std::string ep = Endpoint(*server);
  TcpDataClient wrong(ClientOptions(tls_("other_ca.pem")));
  const Status s = ReadSome(wrong, ep);
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL) << s.ToString();
  EXPECT_NE(s.message().find("certificate"), std::string::npos) << s.ToString();
  EXPECT_TRUE(Eventually(
      [&] { return server->stats().tls_handshake_failures.load() >= 1; }));
  TcpDataClient right(ClientOptions(tls_("ca.pem")));
  EXPECT_TRUE(ReadSome(right, ep).ok());
}

TEST_F(TcpDataTlsTest, CertificateMustNameTheEndpointHost) {
  // Listens on every address: 127.0.0.2 reaches it too, but the certificate
  // names only 127.0.0.1 and localhost.
  auto server = StartServer(/*tls=*/true, "0.0.0.0");
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  const Status by_ip = ReadSome(client, Endpoint(*server));
  EXPECT_TRUE(by_ip.ok()) << by_ip.ToString();
  const Status by_name = ReadSome(client, Endpoint(*server, "localhost"));
  EXPECT_TRUE(by_name.ok()) << by_name.ToString();
  const Status other = ReadSome(client, Endpoint(*server, "127.0.0.2"));
  EXPECT_EQ(other.code(), ErrorCode::TRANSFER_FAIL) << other.ToString();
  EXPECT_NE(other.message().find("certificate"), std::string::npos)
      << other.ToString();
}

TEST_F(TcpDataTlsTest, SilentPeerIsClosedAfterTheHandshakeTimeout) {
  TcpDataServerOptions options;
  options.tls_cert_file = tls_("server.pem");
  options.tls_key_file = tls_("server.key");
  options.tls_handshake_timeout_ms = 200;
  options.idle_timeout_ms = 0;  // only the handshake timeout can close it
  TcpDataServer server(&table_, kNodeId, options);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), server.port()});
  const auto start = std::chrono::steady_clock::now();
  uint8_t buf[64];
  asio::error_code ec;
  while (!ec) s.read_some(asio::buffer(buf), ec);  // blocks until closed
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset)
      << ec.message();
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_TRUE(Eventually(
      [&] { return server.stats().tls_handshake_failures.load() == 1; }));
  TcpDataClient client(ClientOptions(tls_("ca.pem")));
  EXPECT_TRUE(ReadSome(client, Endpoint(server)).ok());
}

TEST_F(TcpDataTlsTest, BadConfigurationIsRefused) {
  TcpDataServerOptions only_cert;
  only_cert.tls_cert_file = tls_("server.pem");
  TcpDataServer a(&table_, kNodeId, only_cert);
  EXPECT_EQ(a.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);

  TcpDataServerOptions missing;
  missing.tls_cert_file = tls_("nope.pem");
  missing.tls_key_file = tls_("server.key");
  TcpDataServer b(&table_, kNodeId, missing);
  EXPECT_EQ(b.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);

  TcpDataServerOptions wrong_key;
  wrong_key.tls_cert_file = tls_("server.pem");
  wrong_key.tls_key_file = tls_("client.key");
  TcpDataServer c(&table_, kNodeId, wrong_key);
  EXPECT_EQ(c.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);

  auto server = StartServer(/*tls=*/true);
  TcpDataClient client(ClientOptions(tls_("nope.pem")));
  const Status s = ReadSome(client, Endpoint(*server));
  EXPECT_EQ(s.code(), ErrorCode::TRANSFER_FAIL);
  EXPECT_NE(s.message().find("CA file"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace kvpool
