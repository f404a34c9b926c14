// Descriptor exhaustion (issue #41, hole 5), against real processes: a
// kvpool-master whose open-file table is filled by idle TCP connections to
// its gRPC port keeps answering new clients quickly (served, or refused at
// once) and serves them again as soon as the flood is gone; idle
// connections that never speak HTTP/2 are closed after the handshake
// timeout; and the daemons raise their soft open-file limit to the hard one
// at start.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kvpool.grpc.pb.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

namespace fs = std::filesystem;
using testing::Spawn;
using testing::StopProcess;
using testing::WaitUntil;

// `n` TCP connections to 127.0.0.1:port that send nothing (a connect that
// does not complete within a second is left out).
std::vector<int> IdleConnections(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 &&
        errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      if (poll(&p, 1, 1000) != 1 ||
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        close(fd);
        continue;
      }
    }
    fds.push_back(fd);
  }
  return fds;
}

size_t OpenFds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    (void)e;
    ++n;
  }
  return n;
}

// The soft and hard "Max open files" of a process.
std::pair<uint64_t, uint64_t> FdLimits(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream rest(line.substr(std::strlen("Max open files")));
    uint64_t soft = 0, hard = 0;
    rest >> soft >> hard;
    return {soft, hard};
  }
  return {0, 0};
}

bool Alive(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

class FdExhaustionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvpool-fd-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // This process opens some hundreds of sockets.
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    hard_ = rl.rlim_max;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  void TearDown() override {
    for (int fd : flood_) close(fd);
    for (pid_t p : pids_) StopProcess(p);
    if (HasFailure()) {
      for (const auto& e : fs::directory_iterator(dir_)) {
        if (e.path().extension() != ".log") continue;
        std::ifstream log(e.path());
        std::cerr << "---- " << e.path().filename() << "\n" << log.rdbuf();
      }
    }
    fs::remove_all(dir_);
  }
  // A kvpool-master on a free port, started under `prefix` (a command
  // such as prlimit, or nothing); returns its rpc port.
  int StartMaster(std::vector<std::string> prefix = {}) {
    const fs::path port_file = dir_ / "master.port";
    prefix.push_back(std::string(KVPOOL_BIN_DIR) + "/kvpool-master");
    for (std::string a : {"--rpc_port=0", "--metrics_port=-1"})
      prefix.push_back(a);
    prefix.push_back("--port_file=" + port_file.string());
    master_ = Spawn(prefix, (dir_ / "master.log").string());
    pids_.push_back(master_);
    const int port =
        testing::WaitForPortFile(port_file, std::chrono::seconds(20));
    EXPECT_GT(port, 0);
    return port;
  }
  std::string Log(const std::string& name) {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in),
                       std::istreambuf_iterator<char>());
  }

  fs::path dir_;
  uint64_t hard_ = 0;
  pid_t master_ = -1;
  std::vector<pid_t> pids_;
  std::vector<int> flood_;
};

// One call of a client with a connection of its own (a new channel, outside
// the global subchannel pool), with a deadline.
grpc::Status FreshCall(int port, std::chrono::milliseconds deadline) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = rpc::MasterService::NewStub(
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  return stub->GetClusterStats(&ctx, req, &resp);
}

TEST_F(FdExhaustionTest,
       TheMasterKeepsAcceptingThroughAFloodOfIdleConnections) {
  if (hard_ < 2048) GTEST_SKIP() << "needs an open-file limit of 2048 here";
  const int port = StartMaster();
  ASSERT_TRUE(FreshCall(port, std::chrono::seconds(5)).ok());
  // The master's table: 256 descriptors, soft and hard.
  const rlimit low{256, 256};
  ASSERT_EQ(prlimit(master_, RLIMIT_NOFILE, &low, nullptr), 0);
  flood_ = IdleConnections(port, 400);
  EXPECT_GT(flood_.size(), 300u);
  // A new client during the flood is answered at once, served or refused
  // (its connection closed): never left waiting until its deadline.
  const auto t0 = std::chrono::steady_clock::now();
  const grpc::Status during = FreshCall(port, std::chrono::seconds(3));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(during.ok() ||
              during.error_code() == grpc::StatusCode::UNAVAILABLE)
      << during.error_code() << " " << during.error_message();
  EXPECT_LT(took, std::chrono::milliseconds(2500));
  std::printf(
      "during the flood: %s in %lld ms\n",
      during.ok() ? "served" : during.error_message().c_str(),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  // The flood gone, a new client is served within a few seconds.
  for (int fd : flood_) close(fd);
  flood_.clear();
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitUntil(
      [&] { return FreshCall(port, std::chrono::milliseconds(500)).ok(); },
      std::chrono::seconds(5)));
  std::printf("served again %lld ms after the flood closed\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t1)
                      .count()));
  EXPECT_TRUE(Alive(master_));
  // The fault was real: the master ran out of room, and said so.
  EXPECT_NE(Log("master.log").find("out of file descriptors"),
            std::string::npos);
}

TEST_F(FdExhaustionTest, IdleConnectionsAreClosedAfterTheHandshakeTimeout) {
  const int port = StartMaster();
  ASSERT_TRUE(FreshCall(port, std::chrono::seconds(5)).ok());
  const size_t base = OpenFds(master_);
  flood_ = IdleConnections(port, 100);
  ASSERT_EQ(flood_.size(), 100u);
  // (`base` may count the first call's connection, on its way out.)
  EXPECT_TRUE(WaitUntil([&] { return OpenFds(master_) >= base + 99; },
                        std::chrono::seconds(3)));
  // rpc_handshake_timeout_ms (5 s): a connection that has not sent its
  // HTTP/2 preface by then is closed, its descriptor free again.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitUntil([&] { return OpenFds(master_) <= base + 2; },
                        std::chrono::seconds(8)))
      << OpenFds(master_) << " descriptors open, " << base << " before";
  std::printf("idle connections closed after %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count()));
  // The client side sees its connection closed (after the server's
  // HTTP/2 settings, sent at accept).
  char buf[4096];
  ssize_t got = 0;
  while ((got = recv(flood_[0], buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
  }
  EXPECT_EQ(got, 0) << std::strerror(errno);
}

TEST_F(FdExhaustionTest, DaemonsRaiseTheirSoftOpenFileLimitAtStart) {
  if (hard_ <= 256) GTEST_SKIP() << "the hard limit is 256 already";
  const std::string hard = std::to_string(hard_);
  const std::vector<std::string> low = {"/usr/bin/prlimit",
                                        "--nofile=256:" + hard, "--"};
  if (!fs::exists(low[0])) GTEST_SKIP() << "no prlimit";
  const int port = StartMaster(low);
  EXPECT_EQ(FdLimits(master_), std::make_pair(hard_, hard_));
  EXPECT_NE(
      Log("master.log")
          .find("open-file limit: soft " + hard + " (was 256), hard " + hard),
      std::string::npos);

  std::vector<std::string> node = low;
  for (std::string a :
       {std::string(KVPOOL_BIN_DIR) + "/kvpool-node",
        "--master_server_address=127.0.0.1:" + std::to_string(port),
        std::string("--global_segment_size=16MiB"),
        std::string("--metrics_port=-1")})
    node.push_back(a);
  const pid_t node_pid = Spawn(node, (dir_ / "node.log").string());
  pids_.push_back(node_pid);
  std::vector<std::string> router = low;
  for (std::string a :
       {std::string(KVPOOL_BIN_DIR) + "/kvpool-router",
        "--master_server_address=127.0.0.1:" + std::to_string(port),
        std::string("--listen=127.0.0.1:0"),
        "--port_file=" + (dir_ / "router.port").string()})
    router.push_back(a);
  const pid_t router_pid = Spawn(router, (dir_ / "router.log").string());
  pids_.push_back(router_pid);
  for (const auto& [pid, log] :
       {std::pair{node_pid, "node.log"}, std::pair{router_pid, "router.log"}}) {
    EXPECT_TRUE(WaitUntil(
        [&, log = log] {
          return Log(log).find("open-file limit") != std::string::npos;
        },
        std::chrono::seconds(10)))
        << log;
    EXPECT_EQ(FdLimits(pid), std::make_pair(hard_, hard_)) << log;
  }
}

}  // namespace
}  // namespace kvpool
