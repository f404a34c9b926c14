// The data server's resource bounds: connection limit, idle timeout, the
// per-connection and global caps on request memory.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"
#include "transport/wire_format.h"

namespace kvpool {
namespace {

using kvpool::testing::WaitUntil;
const std::string kNode = "limit-node";

int ConnectRaw(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed `fd` (a read sees EOF or a reset).
bool ClosedByServer(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char b;
  const ssize_t n = read(fd, &b, 1);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

uint64_t RssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) << 10;
  }
  return 0;
}

class DataLimitsTest : public ::testing::Test {
 protected:
  void Start(TcpDataServerOptions o) {
    mem_.assign(1 << 20, 7);
    table_.Add(1, {mem_.data(), mem_.size()});
    server_ = std::make_unique<TcpDataServer>(&table_, kNode, o);
    server_->SetSsdReadHandler([](std::span<KeyReadOp> ops) {
      for (auto& op : ops) {
        std::memset(op.dest, 'v', op.length);
        op.result = ErrorCode::OK;
      }
    });
    ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
    ep_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  // A READ through a fresh client: served (the call's status is OK).
  Status ReadOnce() {
    TcpDataClientOptions co;
    co.handshake_timeout = std::chrono::milliseconds(5000);
    TcpDataClient c(co);
    std::vector<uint8_t> out(16);
    std::vector<ReadOp> ops = {{1, 0, 16, out.data()}};
    Status s = c.Read(ep_, kNode, ops);
    if (s.ok() && ops[0].result != ErrorCode::OK) {
      return Status(ops[0].result, "op failed");
    }
    return s;
  }
  std::vector<uint8_t> mem_;
  SegmentTable table_;
  std::unique_ptr<TcpDataServer> server_;
  std::string ep_;
};

TEST_F(DataLimitsTest, AnIdleConnectionIsClosed) {
  TcpDataServerOptions o;
  o.idle_timeout_ms = 200;
  Start(o);
  int fd = ConnectRaw(server_->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ClosedByServer(fd, 10000));
  close(fd);
  EXPECT_GE(server_->stats().idle_closed.load(), 1u);
  // A pooled client connection that the server closed meanwhile is
  // replaced without failing the caller.
  TcpDataClient c;
  std::vector<uint8_t> out(16);
  std::vector<ReadOp> ops = {{1, 0, 16, out.data()}};
  ASSERT_TRUE(c.Read(ep_, kNode, ops).ok());
  const uint64_t closed = server_->stats().idle_closed.load();
  ASSERT_TRUE(
      WaitUntil([&] { return server_->stats().idle_closed.load() > closed; },
                std::chrono::milliseconds(10000)));
  ASSERT_TRUE(c.Read(ep_, kNode, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::OK);
}

TEST_F(DataLimitsTest, AtTheLimitTheLongestIdleConnectionMakesRoom) {
  TcpDataServerOptions o;
  o.max_connections = 8;
  o.idle_timeout_ms = 0;
  Start(o);
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(ConnectRaw(server_->port()));
    ASSERT_GE(idle.back(), 0);
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return server_->stats().connections_evicted.load() >= 12; },
      std::chrono::milliseconds(10000)));
  EXPECT_TRUE(ReadOnce().ok());
  EXPECT_GE(server_->stats().connections_evicted.load(), 13u);
  // The first ones were the ones closed.
  EXPECT_TRUE(ClosedByServer(idle[0], 5000));
  for (int fd : idle) close(fd);
}

// The attack of the issue: 2,000 idle sockets against a node whose
// open-file limit is 1,024. The sockets live in a child process (which only
// makes system calls after fork), the server here under the lowered limit.
TEST_F(DataLimitsTest, TwoThousandIdleSocketsDoNotLockNewClientsOut) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  if (old.rlim_max < 4096) GTEST_SKIP() << "hard nofile limit below 4096";
  rlimit low = old;
  low.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  TcpDataServerOptions o;
  o.idle_timeout_ms = 0;  // eviction alone must do it
  Start(o);
  const uint16_t port = server_->port();
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit high{4096, old.rlim_max};
    setrlimit(RLIMIT_NOFILE, &high);
    close(ready[0]);
    close(done[1]);
    int opened = 0;
    for (int i = 0; i < 2000; ++i) opened += ConnectRaw(port) >= 0;
    char c = opened == 2000 ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1);  // until the parent is done
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  // New clients are still served, and promptly.
  for (int i = 0; i < 3; ++i) {
    Status s = ReadOnce();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_GE(server_->stats().connections_evicted.load(), 1000u);
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  close(ready[0]);
  server_->Stop();
  setrlimit(RLIMIT_NOFILE, &old);
}

TEST_F(DataLimitsTest, AHugeBodyHeaderIsRefusedBeforeAnyAllocation) {
  Start(TcpDataServerOptions{});
  const uint64_t rss = RssBytes();
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) {
    int fd = ConnectRaw(server_->port());
    ASSERT_GE(fd, 0);
    // HELLO, then an SSD_READ header announcing a 64 MiB body.
    std::vector<uint8_t> f(wire::kHeaderSize + kNode.size());
    wire::Header h;
    h.op = static_cast<uint16_t>(wire::Op::kHello);
    h.body_len = kNode.size();
    wire::EncodeHeader(h, f.data());
    std::memcpy(f.data() + wire::kHeaderSize, kNode.data(), kNode.size());
    wire::Header big;
    big.op = static_cast<uint16_t>(wire::Op::kSsdRead);
    big.count = 1;
    big.body_len = uint64_t{64} << 20;
    f.resize(f.size() + wire::kHeaderSize);
    wire::EncodeHeader(big, f.data() + f.size() - wire::kHeaderSize);
    ASSERT_EQ(write(fd, f.data(), f.size()), ssize_t(f.size()));
    fds.push_back(fd);
  }
  for (int fd : fds) {
    // The HELLO answer, then the close.
    uint8_t ans[wire::kHeaderSize + 64];
    ASSERT_GT(read(fd, ans, wire::kHeaderSize + kNode.size()), 0);
    EXPECT_TRUE(ClosedByServer(fd, 5000));
    close(fd);
  }
  EXPECT_EQ(server_->stats().bad_frames.load(), 16u);
  EXPECT_LT(RssBytes(), rss + (16u << 20));
  EXPECT_TRUE(ReadOnce().ok());
}

TEST_F(DataLimitsTest, RequestsPastTheGlobalBudgetAreRefusedNotQueued) {
  TcpDataServerOptions o;
  o.max_buffered_bytes = 256 << 10;
  Start(o);
  TcpDataClient c;
  std::vector<uint8_t> big(1 << 20), small(4096);
  std::vector<KeyReadOp> ops = {{"t", "big", big.size(), big.data()}};
  ASSERT_TRUE(c.ReadKeys(ep_, kNode, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(server_->stats().budget_refusals.load(), 1u);
  std::vector<KeyReadOp> fits = {{"t", "small", small.size(), small.data()}};
  ASSERT_TRUE(c.ReadKeys(ep_, kNode, fits).ok());
  EXPECT_EQ(fits[0].result, ErrorCode::OK);
  EXPECT_EQ(small[0], 'v');
}

}  // namespace
}  // namespace kvpool
