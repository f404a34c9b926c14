// Masters with standbys on etcd (docs/ha.md), as real processes on
// loopback: a real etcd, two kvpool-master processes campaigning, a
// kvpool-node and a client that find the leader in etcd. The leader is
// killed (kill -9) or frozen past its lease; the standby must take over,
// the node's values must come back, and the frozen leader must serve
// nothing once it wakes. Every process is started and stopped (by PID) by
// this test. Multi-host runs (network namespaces, partitions) are in
// tests/netns/.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ha/etcd_test_process.h"
#include "ha/leader_election.h"
#include "kvpool/client.h"
#include "master/master_server.h"
#include "rpc/master_client.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using kvpool::testing::RandomBytes;
using kvpool::testing::Spawn;
using kvpool::testing::StopAndWait;
using kvpool::testing::StopProcess;
using kvpool::testing::WaitUntil;
namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0)
      .count();
}

class HaFailoverTest : public ::testing::Test {
 protected:
  HaFailoverTest()
      : dir_(fs::temp_directory_path() /
             ("kvpool-ha-" + std::to_string(getpid()))),
        etcd_(dir_ / "etcd"),
        cluster_("t" + std::to_string(getpid())),
        etcd_client_({etcd_.endpoint()}, 1000) {}
  void TearDown() override {
    for (auto& [name, m] : masters_) StopProcess(m.pid);
    StopProcess(node_pid_);
    for (pid_t p : killed_) testing::RemoveSegmentFilesOf(p);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  struct Master {
    pid_t pid = -1;
    fs::path port_file;
  };
  // A master process campaigning in `cluster_` with a 1 s lease.
  void StartMaster(const std::string& name) {
    Master m;
    m.port_file = dir_ / (name + ".port");
    fs::remove(m.port_file);
    m.pid = Spawn(
        {std::string(KVPOOL_BIN_DIR) + "/kvpool-master", "--enable_ha",
         "--etcd_endpoints=" + etcd_.endpoint(), "--cluster_id=" + cluster_,
         "--ha_lease_ttl_sec=1", "--rpc_port=0", "--metrics_port=-1",
         // Short read leases: a remounted segment takes puts
         // again after one lease (the restart rule).
         "--default_kv_lease_ttl=1000", "--put_waits_for_holders",
         "--port_file=" + m.port_file.string()},
        (dir_ / (name + ".log")).string());
    masters_[name] = m;
  }
  // The address a master's current term serves on (its port file is
  // rewritten at each term).
  std::string AddressOf(const std::string& name) {
    int port = 0;
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::ifstream f(masters_[name].port_file);
          return static_cast<bool>(f >> port) && port > 0;
        },
        std::chrono::seconds(20)));
    return "127.0.0.1:" + std::to_string(port);
  }
  std::optional<ha::LeaderInfo> Leader() {
    auto l = ha::FindLeader(&etcd_client_, ha::LeaderKey(cluster_));
    return l.ok() ? l.value() : std::nullopt;
  }
  // The name of the master etcd names as leader.
  std::string LeaderName() {
    std::string found;
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto l = Leader();
          if (!l) return false;
          for (auto& [name, m] : masters_) {
            if (m.pid > 0 && AddressOf(name) == l->address) found = name;
          }
          return !found.empty();
        },
        std::chrono::seconds(20)));
    return found;
  }
  // The last lines of every process's log, for a failure message (the
  // directory is removed at TearDown).
  std::string LogTails() const {
    std::string out;
    for (const char* name : {"a", "b", "node"}) {
      std::ifstream f(dir_ / (std::string(name) + ".log"));
      std::vector<std::string> lines;
      for (std::string line; std::getline(f, line);) lines.push_back(line);
      out += std::string("\n--- ") + name + ".log (last lines)\n";
      const size_t from = lines.size() > 15 ? lines.size() - 15 : 0;
      for (size_t i = from; i < lines.size(); ++i) out += lines[i] + "\n";
    }
    return out;
  }
  std::string EtcdAddress() const {
    return "etcd://" + etcd_.endpoint() + "/" + cluster_;
  }
  void StartNode() {
    node_pid_ =
        Spawn({std::string(KVPOOL_BIN_DIR) + "/kvpool-node",
               "--etcd_endpoints=" + etcd_.endpoint(),
               "--cluster_id=" + cluster_, "--global_segment_size=32MiB",
               "--heartbeat_interval_ms=100", "--node_id=ha-node"},
              (dir_ / "node.log").string());
  }
  std::unique_ptr<Client> ClientSeeingTheNode() {
    ClientConfig cc;
    cc.master_server_address = EtcdAddress();
    cc.rpc_timeout_ms = 3000;
    auto client = Client::Create(cc);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return nullptr;
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto s = client.value()->Stat();
          return s.ok() && s->segments.size() == 1;
        },
        std::chrono::seconds(20)));
    return std::move(client.value());
  }

  fs::path dir_;
  testing::EtcdProcess etcd_;
  std::string cluster_;
  ha::EtcdClient etcd_client_;
  std::map<std::string, Master> masters_;
  pid_t node_pid_ = -1;
  std::vector<pid_t> killed_;
};

TEST_F(HaFailoverTest, AKilledLeaderIsReplacedAndNoAcknowledgedKeyIsLost) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  StartMaster("a");
  StartMaster("b");
  const std::string first = LeaderName();
  ASSERT_FALSE(first.empty());
  const uint64_t first_epoch = Leader()->epoch;
  StartNode();
  auto client = ClientSeeingTheNode();
  ASSERT_NE(client, nullptr);

  std::map<std::string, std::string> acked;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "k" + std::to_string(i);
    std::string value = RandomBytes(64 << 10, i);
    if (client->Put(key, value).ok()) acked[key] = std::move(value);
  }
  ASSERT_EQ(acked.size(), 40u);

  const auto t0 = SteadyClock::now();
  kill(masters_[first].pid, SIGKILL);
  waitpid(masters_[first].pid, nullptr, 0);
  masters_[first].pid = -1;

  // Every acknowledged key comes back, with its bytes; nothing that is
  // read is ever wrong on the way.
  size_t wrong = 0;
  std::map<std::string, bool> back;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& [key, value] : acked) {
          if (back[key]) continue;
          auto got = client->Get(key);
          if (got.ok()) {
            back[key] = true;
            if (got.value() != value) ++wrong;
          }
        }
        return std::all_of(back.begin(), back.end(),
                           [](const auto& kv) { return kv.second; }) &&
               back.size() == acked.size();
      },
      std::chrono::seconds(30)))
      << "keys back: " << back.size();
  const double all_gets_ms = MsSince(t0);
  EXPECT_EQ(wrong, 0u);

  // And puts work again (after the remount's lease rule).
  ASSERT_TRUE(WaitUntil([&] { return client->Put("after", "v").ok(); },
                        std::chrono::seconds(30)));
  const double first_put_ms = MsSince(t0);
  auto now_leader = Leader();
  ASSERT_TRUE(now_leader.has_value());
  EXPECT_GT(now_leader->epoch, first_epoch);
  EXPECT_EQ(now_leader->address, AddressOf(first == "a" ? "b" : "a"));
  EXPECT_GE(client->counters().put_retries_on_new_leader +
                client->counters().put_retries,
            0u);
  std::printf(
      "failover: every key readable after %.0f ms, puts after %.0f ms "
      "(lease 1 s)\n",
      all_gets_ms, first_put_ms);

  // The killed one comes back as a standby; the leader stays.
  StartMaster(first);
  const std::string again = AddressOf(first);
  MasterClient direct(again, 2000);
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  Status s =
      direct.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp);
  EXPECT_EQ(s.code(), ErrorCode::RPC_FAIL);
  EXPECT_NE(s.message().find("standby"), std::string::npos) << s.ToString();
  EXPECT_EQ(Leader()->epoch, now_leader->epoch);
}

TEST_F(HaFailoverTest, AFrozenLeaderServesNothingOnceItsLeaseIsOver) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  StartMaster("a");
  StartMaster("b");
  const std::string first = LeaderName();
  ASSERT_FALSE(first.empty());
  const std::string first_address = AddressOf(first);
  const uint64_t first_epoch = Leader()->epoch;
  StartNode();
  auto client = ClientSeeingTheNode();
  ASSERT_NE(client, nullptr);
  const std::string value = RandomBytes(100 << 10, 7);
  // On failure, say whether leadership moved meanwhile: a put refused here
  // has been seen once under load and its cause is not yet known.
  const Status first_put = client->Put("frozen", value);
  ASSERT_TRUE(first_put.ok())
      << first_put.ToString() << "; leader epoch " << first_epoch << " -> "
      << (Leader() ? Leader()->epoch : 0) << LogTails();

  // SIGSTOP: a leader that stalls (or is cut off) past its lease.
  ASSERT_TRUE(StopAndWait(masters_[first].pid));
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto l = Leader();
        return l && l->epoch > first_epoch;
      },
      std::chrono::seconds(20)));
  const double elected_ms = MsSince(t0);
  ASSERT_TRUE(WaitUntil([&] { return client->Get("frozen").ok(); },
                        std::chrono::seconds(30)));
  std::printf(
      "frozen leader: successor elected after %.0f ms, the value "
      "readable after %.0f ms\n",
      elected_ms, MsSince(t0));
  EXPECT_EQ(client->Get("frozen").value(), value);

  // It wakes up still holding a server on its old address: it must refuse
  // every call there (and soon stop listening), never answer as leader.
  kill(masters_[first].pid, SIGCONT);
  MasterClient direct(first_address, 2000);
  for (int i = 0; i < 3; ++i) {
    rpc::ClusterStatsRequest req;
    rpc::ClusterStatsResponse resp;
    Status s =
        direct.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp);
    ASSERT_FALSE(s.ok()) << "the old leader answered call " << i;
  }
  std::printf("old leader refused 3 calls by %.0f ms\n", MsSince(t0));
  // It is a standby again, behind the new leader, with a new term's server.
  ASSERT_TRUE(WaitUntil(
      [&] {
        MasterClient standby(AddressOf(first), 1000);
        rpc::ClusterStatsRequest req;
        rpc::ClusterStatsResponse resp;
        Status s = standby.Call(&rpc::MasterService::Stub::GetClusterStats, req,
                                &resp);
        return s.message().find("standby; the leader is") != std::string::npos;
      },
      std::chrono::seconds(20)));
  std::printf("old leader a standby by %.0f ms\n", MsSince(t0));
  EXPECT_EQ(client->Get("frozen").value(), value);
  EXPECT_TRUE(WaitUntil([&] { return client->Put("later", "v").ok(); },
                        std::chrono::seconds(30)));
  std::printf("put by %.0f ms\n", MsSince(t0));
}

// The gate and the epochs in-process: a reply carries the leader's epoch,
// a node that has seen a newer one makes the master step down, and a
// client refuses a reply of an older epoch.
class FixedGate : public ServingGate {
 public:
  uint64_t ServingEpoch() const override { return epoch.load(); }
  std::string NotServingReason() const override { return "standby; test"; }
  void SupersededBy(uint64_t e) override {
    superseded_by = e;
    epoch = 0;
  }
  std::atomic<uint64_t> epoch{5};
  std::atomic<uint64_t> superseded_by{0};
};

TEST(ServingGateTest, RepliesCarryTheEpochAndANewerOneEndsTheTerm) {
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  MasterServer server(mc);
  auto gate = std::make_shared<FixedGate>();
  server.set_gate(gate);
  ASSERT_TRUE(server.Start().ok());
  MasterClient c(server.address(), 2000);

  rpc::HeartbeatRequest hb;
  hb.set_node_id("nobody");
  hb.set_known_epoch(5);
  rpc::HeartbeatResponse hr;
  ASSERT_TRUE(c.Call(&rpc::MasterService::Stub::Heartbeat, hb, &hr).ok());
  EXPECT_EQ(hr.epoch(), 5u);
  EXPECT_EQ(ErrorCodeFromInt(hr.error_code()), ErrorCode::CLIENT_NOT_FOUND);

  hb.set_known_epoch(9);
  Status s = c.Call(&rpc::MasterService::Stub::Heartbeat, hb, &hr);
  EXPECT_EQ(s.code(), ErrorCode::RPC_FAIL);
  EXPECT_EQ(gate->superseded_by.load(), 9u);
  // Closed for everything now.
  rpc::ClusterStatsRequest sr;
  rpc::ClusterStatsResponse sp;
  s = c.Call(&rpc::MasterService::Stub::GetClusterStats, sr, &sp);
  EXPECT_EQ(s.code(), ErrorCode::RPC_FAIL);
  EXPECT_NE(s.message().find("not serving: standby; test"), std::string::npos)
      << s.ToString();
  server.Stop();
}

TEST(ServingGateTest, AClientRefusesRepliesOfAnOlderEpoch) {
  MasterClient c("127.0.0.1:1", 100);
  EXPECT_TRUE(c.AcceptEpoch(0));  // no HA: always
  EXPECT_TRUE(c.AcceptEpoch(7));
  EXPECT_EQ(c.known_epoch(), 7u);
  EXPECT_TRUE(c.AcceptEpoch(7));
  EXPECT_FALSE(c.AcceptEpoch(6));
  EXPECT_TRUE(c.AcceptEpoch(0));
  EXPECT_TRUE(c.AcceptEpoch(8));
  EXPECT_EQ(c.known_epoch(), 8u);
}

TEST(ServingGateTest, ABadEtcdAddressFailsEveryCallClearly) {
  MasterClient c("etcd://nohostport/x", 100);
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  Status s = c.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp);
  EXPECT_EQ(s.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(s.message().find("host:port"), std::string::npos) << s.ToString();
}

// Every reply of a master behind a gate carries its epoch (kvpool-epoch);
// a client that follows the leader refuses one older than it has seen.
TEST_F(HaFailoverTest, AReplyOfAnOlderEpochIsRefused) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  MasterServer server(mc);
  auto gate = std::make_shared<FixedGate>();
  server.set_gate(gate);
  ASSERT_TRUE(server.Start().ok());
  // This server leads, as far as etcd says, under the key's revision.
  ASSERT_TRUE(etcd_client_.Put(ha::LeaderKey(cluster_), server.address()).ok());
  auto leader = Leader();
  ASSERT_TRUE(leader.has_value());
  gate->epoch = leader->epoch;

  MasterClient c(EtcdAddress(), 1000);
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  ASSERT_TRUE(
      c.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp).ok());
  EXPECT_EQ(c.known_epoch(), leader->epoch);
  EXPECT_EQ(c.address(), server.address());

  // The same server now answers as a deposed leader would.
  gate->epoch = leader->epoch - 1;
  Status s = c.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp);
  EXPECT_EQ(s.code(), ErrorCode::RPC_FAIL);
  EXPECT_NE(s.message().find("older epoch"), std::string::npos) << s.ToString();
  EXPECT_EQ(c.known_epoch(), leader->epoch);
  server.Stop();
}

// A call that meets a dead leader still named in etcd (its lease not yet
// over) waits within its timeout for etcd to name the successor, and
// succeeds there: before, its wait-for-ready retry on the dead leader ended
// in DEADLINE_EXCEEDED and the call failed.
TEST_F(HaFailoverTest, ACallOnADeadLeaderWaitsForItsSuccessor) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  MasterServer successor(mc);
  ASSERT_TRUE(successor.Start().ok());
  const std::string key = ha::LeaderKey(cluster_);
  const std::string dead =
      "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  ASSERT_TRUE(etcd_client_.Put(key, dead).ok());
  MasterClient c(EtcdAddress(), 4000);
  // The scenario, not a synchronisation: the dead leader's key stays 1.5 s
  // (its lease running out), then the successor's replaces it.
  std::thread failover([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ASSERT_TRUE(etcd_client_.Delete(key).ok());
    ASSERT_TRUE(etcd_client_.Put(key, successor.address()).ok());
  });
  rpc::ClusterStatsRequest req;
  rpc::ClusterStatsResponse resp;
  Status s = c.Call(&rpc::MasterService::Stub::GetClusterStats, req, &resp);
  failover.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.address(), successor.address());
  EXPECT_EQ(c.leader_changes(), 1u);
  successor.Stop();
}

}  // namespace
}  // namespace kvpool
