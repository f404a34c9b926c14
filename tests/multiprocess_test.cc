// kvpool-master and two kvpool-node processes on loopback: one node is
// killed with SIGKILL; its keys must become clean misses while the rest of
// the pool keeps working. Every process is started and stopped (by PID) by
// this test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvpool/client.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;
namespace fs = std::filesystem;

pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

void StopProcess(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  int status = 0;
  if (!WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                 std::chrono::seconds(10))) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
}

class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("kvpool-mp-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t p : pids_) StopProcess(p);
    // A SIGKILLed node cannot unlink its segment file.
    for (pid_t p : killed_) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
        if (e.path().filename().string().rfind(
                "kvpool-" + std::to_string(p) + "-", 0) == 0) {
          fs::remove(e.path(), ec);
        }
      }
    }
    fs::remove_all(dir_);
  }
  fs::path dir_;
  std::vector<pid_t> pids_;
  std::vector<pid_t> killed_;
};

TEST_F(MultiProcessTest, KilledNodeKeysBecomeMissesOthersKeepWorking) {
  const std::string bin = KVPOOL_BIN_DIR;
  fs::path port_file = dir_ / "master.port";
  // Knobs from a config file (same names as the flags), one from a flag.
  fs::path config = dir_ / "master.toml";
  std::ofstream(config) << "rpc_port = 0\nmetrics_port = -1\nclient_ttl = 1\n";
  pid_t master = Spawn({bin + "/kvpool-master", "--config=" + config.string(),
                        "--port_file=" + port_file.string()});
  pids_.push_back(master);
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(port_file); },
                        std::chrono::seconds(20)));
  int port = 0;
  std::ifstream(port_file) >> port;
  ASSERT_GT(port, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);

  std::vector<pid_t> nodes;
  for (const char* id : {"node-a", "node-b"}) {
    pid_t p =
        Spawn({bin + "/kvpool-node", "--master_server_address=" + address,
               "--global_segment_size=32MiB", "--heartbeat_interval_ms=100",
               std::string("--node_id=") + id});
    pids_.push_back(p);
    nodes.push_back(p);
  }
  ClientConfig cc;
  cc.master_server_address = address;
  cc.transport = TransportMode::kTcp;
  auto client = Client::Create(cc).value();
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto s = client->Stat();
        return s.ok() && s->segments.size() == 2;
      },
      std::chrono::seconds(20)));

  std::vector<std::string> on_a, on_b;
  for (int i = 0; i < 10; ++i) {
    for (const char* id : {"node-a", "node-b"}) {
      ReplicateConfig rc;
      rc.preferred_segment = id;
      std::string key = std::string(id) + "-key-" + std::to_string(i);
      ASSERT_TRUE(client->Put(key, RandomBytes(100 * 1024, i), rc).ok());
      (id[5] == 'a' ? on_a : on_b).push_back(key);
    }
  }
  kill(nodes[1], SIGKILL);
  waitpid(nodes[1], nullptr, 0);
  killed_.push_back(nodes[1]);
  pids_.erase(std::find(pids_.begin(), pids_.end(), nodes[1]));

  // Before the master notices, reads of the dead node fail cleanly (no hang,
  // no wrong bytes); after client_ttl they are plain misses.
  auto early = client->Get(on_b[0]);
  EXPECT_TRUE(!early.ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        return client->Get(on_b[0]).code() == ErrorCode::OBJECT_NOT_FOUND;
      },
      std::chrono::seconds(15)));
  for (const auto& k : on_b)
    EXPECT_EQ(client->Get(k).code(), ErrorCode::OBJECT_NOT_FOUND);
  for (int i = 0; i < 10; ++i) {
    auto r = client->Get(on_a[i]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(100 * 1024, i));
  }
  ASSERT_TRUE(client->Put("after-crash", "still works").ok());
  EXPECT_EQ(client->Get("after-crash").value(), "still works");
  EXPECT_EQ(client->Stat()->segments.size(), 1u);
}

}  // namespace
}  // namespace kvpool
