// kvpool-master and two kvpool-node processes on loopback: one node is
// killed with SIGKILL; its keys must become clean misses while the rest of
// the pool keeps working. Every process is started and stopped (by PID) by
// this test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "kvpool/client.h"
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

// Whether a get returned exactly `want` (without printing megabytes of
// bytes when it did not).
::testing::AssertionResult Holds(const Result<std::string>& got,
                                 const std::string& want) {
  if (!got.ok())
    return ::testing::AssertionFailure() << got.status().ToString();
  if (got.value() != want) {
    return ::testing::AssertionFailure()
           << "other bytes (" << got.value().size() << " bytes, want "
           << want.size() << ")";
  }
  return ::testing::AssertionSuccess();
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
    for (pid_t p : killed_) testing::RemoveSegmentFilesOf(p);
    fs::remove_all(dir_);
  }
  // A master with `config` (TOML) on a free port; returns its address.
  std::string StartMaster(const std::string& config_text, pid_t* pid,
                          const std::string& log = "") {
    fs::path port_file = dir_ / "master.port";
    fs::remove(port_file);
    fs::path config = dir_ / "master.toml";
    std::ofstream(config) << config_text;
    *pid = Spawn(
        {std::string(KVPOOL_BIN_DIR) + "/kvpool-master",
         "--config=" + config.string(), "--port_file=" + port_file.string()},
        log);
    pids_.push_back(*pid);
    EXPECT_TRUE(WaitUntil([&] { return fs::exists(port_file); },
                          std::chrono::seconds(20)));
    int port = 0;
    std::ifstream(port_file) >> port;
    EXPECT_GT(port, 0);
    return "127.0.0.1:" + std::to_string(port);
  }
  pid_t StartNode(const std::string& id, const std::string& master) {
    pid_t p = Spawn({std::string(KVPOOL_BIN_DIR) + "/kvpool-node",
                     "--master_server_address=" + master,
                     "--global_segment_size=32MiB",
                     "--heartbeat_interval_ms=100", "--node_id=" + id});
    pids_.push_back(p);
    return p;
  }
  std::unique_ptr<Client> TcpClientSeeing(const std::string& master,
                                          size_t segments) {
    ClientConfig cc;
    cc.master_server_address = master;
    cc.transport = TransportMode::kTcp;
    auto client = Client::Create(cc).value();
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto s = client->Stat();
          return s.ok() && s->segments.size() == segments;
        },
        std::chrono::seconds(20)));
    return client;
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
  std::vector<pid_t> killed_;
};

TEST_F(MultiProcessTest, MasterAndNodeExitCleanlyOnSigterm) {
  // The master blocked SIGTERM only after MasterServer::Start had made its
  // gRPC and housekeeping threads, which kept it unblocked: the kernel gave
  // the signal to one of them and its default action killed the master
  // (status "killed by SIGTERM") instead of the clean Stop of the sigwait
  // thread. Found by `kvpool bench soak`.
  pid_t master = 0;
  const std::string address =
      StartMaster("rpc_port = 0\nmetrics_port = -1\n", &master);
  pid_t node = StartNode("node-a", address);
  auto client = TcpClientSeeing(address, 1);
  // What this test checks is the clean exit below; the put only gives the
  // processes some state. Under a loaded `ctest -j2` a put made a few ms
  // after the node reported "serving" was refused in 2 of 3 full runs (an
  // open finding, see the closing note of stop 30); each refusal is printed.
  ASSERT_TRUE(WaitUntil(
      [&] {
        Status put = client->Put("k", "v");
        if (!put.ok()) std::cerr << "put refused: " << put.ToString() << "\n";
        return put.ok();
      },
      std::chrono::seconds(20)));
  client.reset();
  for (pid_t p : {node, master}) {
    kill(p, SIGTERM);
    int status = 0;
    ASSERT_TRUE(WaitUntil([&] { return waitpid(p, &status, WNOHANG) == p; },
                          std::chrono::seconds(20)));
    EXPECT_TRUE(WIFEXITED(status)) << "pid " << p << " status " << status;
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0);
    }
    pids_.erase(std::find(pids_.begin(), pids_.end(), p));
  }
}

TEST_F(MultiProcessTest, PausedMasterDropsNoNodeWhenItResumes) {
  // client_ttl 1 s, master stopped for 3 s: without the liveness clock the
  // first check after SIGCONT declared both nodes dead and dropped every key.
  pid_t master = 0;
  const std::string log = (dir_ / "master.log").string();
  const std::string address = StartMaster(
      "rpc_port = 0\nmetrics_port = -1\nclient_ttl = 1\n", &master, log);
  StartNode("node-a", address);
  StartNode("node-b", address);
  auto client = TcpClientSeeing(address, 2);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        client->Put("k" + std::to_string(i), RandomBytes(4096, i)).ok());
  }
  ASSERT_TRUE(StopAndWait(master));
  // The pause itself is what is tested: its length is the point, not a
  // synchronisation.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  kill(master, SIGCONT);
  auto logged = [&] {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    return text.find("had not run for over a second") != std::string::npos;
  };
  ASSERT_TRUE(WaitUntil(logged, std::chrono::seconds(20)));
  EXPECT_EQ(client->Stat()->segments.size(), 2u);
  for (int i = 0; i < 20; ++i) {
    auto r = client->Get("k" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(4096, i));
  }
}

TEST_F(MultiProcessTest, CachedLeaseNeverReadsAnotherValueAfterMasterRestart) {
  // The lease cache keeps a get of "A" off the master for the lease. A
  // restarted master knows nothing of that lease: it must not place a new
  // value where A's bytes are until such a lease has run out.
  pid_t master = 0;
  const std::string cfg =
      "metrics_port = -1\nclient_ttl = 2\ndefault_kv_lease_ttl = 3000\n";
  const std::string address = StartMaster("rpc_port = 0\n" + cfg, &master);
  StartNode("node-a", address);
  auto writer = TcpClientSeeing(address, 1);
  ClientConfig cc;
  cc.master_server_address = address;
  cc.transport = TransportMode::kTcp;
  cc.lease_cache = true;
  auto reader = Client::Create(cc).value();
  const std::string a = RandomBytes(1 << 20, 1), b = RandomBytes(1 << 20, 2);
  ASSERT_TRUE(writer->Put("A", a).ok());
  ASSERT_EQ(reader->Get("A").value(), a);  // lease cached from here

  kill(master, SIGKILL);
  waitpid(master, nullptr, 0);
  pids_.erase(std::find(pids_.begin(), pids_.end(), master));
  const std::string port = address.substr(address.rfind(':') + 1);
  StartMaster("rpc_port = " + port + "\n" + cfg, &master);
  // The node remounts; its segment is held for the lease period, so B's
  // put cannot take A's range (it fails cleanly, or lands after the hold).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto st = writer->Stat();
        return st.ok() && st->segments.size() == 1;
      },
      std::chrono::seconds(30)));
  bool b_written = false;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto g = reader->Get("A");  // cached until its lease ends
        EXPECT_TRUE(!g.ok() || g.value() == a) << "A read B's bytes";
        if (!b_written) {
          Status s = writer->Put("B", b);
          EXPECT_TRUE(s.ok() || s.code() == ErrorCode::NO_AVAILABLE_HANDLE ||
                      s.code() == ErrorCode::RPC_FAIL)
              << s.ToString();
          b_written = s.ok();
        }
        return b_written;
      },
      std::chrono::seconds(30)));
  // The node re-registered A: the new master serves it from the same range.
  EXPECT_TRUE(Holds(reader->Get("A"), a));
  EXPECT_EQ(reader->counters().lease_cache_resets, 1u);
  EXPECT_TRUE(Holds(writer->Get("B"), b));
}

TEST_F(MultiProcessTest, GetOfAHungNodeFailsWithinTheDataTimeout) {
  pid_t master = 0;
  const std::string address = StartMaster(
      "rpc_port = 0\nmetrics_port = -1\nclient_ttl = 60\n", &master);
  pid_t node = StartNode("node-a", address);
  TcpClientSeeing(address, 1);
  ClientConfig cc;
  cc.master_server_address = address;
  cc.transport = TransportMode::kTcp;
  cc.data_io_timeout_ms = 1000;
  cc.data_connect_timeout_ms = 1000;
  auto client = Client::Create(cc).value();
  ASSERT_TRUE(client->Put("k", RandomBytes(4096, 7)).ok());
  ASSERT_EQ(client->Get("k").value(), RandomBytes(4096, 7));  // pooled conn
  ASSERT_TRUE(StopAndWait(node));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client->Get("k");
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  kill(node, SIGCONT);
  EXPECT_FALSE(r.ok());
  // The limit is 1 s of no progress (30 s by default); generous slack for a
  // loaded machine, far below the default.
  EXPECT_LT(sec, 10.0);
  // The node is back: the next get works again.
  ASSERT_TRUE(WaitUntil([&] { return client->Get("k").ok(); },
                        std::chrono::seconds(20)));
  ClientConfig bad;
  bad.master_server_address = address;
  bad.data_io_timeout_ms = 0;
  EXPECT_EQ(Client::Create(bad).code(), ErrorCode::INVALID_PARAMS);
}

TEST_F(MultiProcessTest, PutsAvoidACrashedNodeBeforeItIsDeclaredDead) {
  // client_ttl 60 s: the master still lists the crashed node (and it is the
  // emptiest), so without the retry most puts failed on it.
  pid_t master = 0;
  const std::string address = StartMaster(
      "rpc_port = 0\nmetrics_port = -1\nclient_ttl = 60\n", &master);
  StartNode("node-a", address);
  pid_t b = StartNode("node-b", address);
  auto client = TcpClientSeeing(address, 2);
  ASSERT_TRUE(client->Put("warm", RandomBytes(4096, 0)).ok());
  kill(b, SIGKILL);
  waitpid(b, nullptr, 0);
  killed_.push_back(b);
  pids_.erase(std::find(pids_.begin(), pids_.end(), b));
  for (int i = 0; i < 40; ++i) {
    Status s = client->Put("p" + std::to_string(i), RandomBytes(64 << 10, i));
    EXPECT_TRUE(s.ok()) << i << ": " << s.ToString();
  }
  // Only the first put that met the dead node needed a retry: the master
  // avoids it for every put from then on.
  EXPECT_GE(client->counters().put_retries, 1u);
  EXPECT_LE(client->counters().put_retries, 2u);
  for (int i = 0; i < 40; ++i) {
    auto r = client->Get("p" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r.value(), RandomBytes(64 << 10, i));
  }
}

TEST_F(MultiProcessTest, SharedMemoryPutsNeverAcknowledgeADeadNodesBytes) {
  // Issue #41, hole 1: a node killed with -9 leaves its segment file, and
  // a same-host client's mapping of it, behind. Puts copied into it were
  // acknowledged, then lost when the master declared the node dead (9 of
  // 40, up to every other put). client_ttl 2 s: the node is still listed
  // (and chosen) while the puts run, and dropped before they are read.
  pid_t master = 0;
  const std::string address =
      StartMaster("rpc_port = 0\nmetrics_port = -1\nclient_ttl = 2\n", &master);
  StartNode("node-a", address);
  pid_t b = StartNode("node-b", address);
  TcpClientSeeing(address, 2);  // both serving
  ClientConfig cc;
  cc.master_server_address = address;
  cc.transport = TransportMode::kShm;
  auto client = Client::Create(cc).value();
  ASSERT_TRUE(client->Put("warm", RandomBytes(4096, 0)).ok());
  kill(b, SIGKILL);
  waitpid(b, nullptr, 0);
  killed_.push_back(b);
  pids_.erase(std::find(pids_.begin(), pids_.end(), b));
  constexpr int kPuts = 40;
  int acknowledged = 0;
  std::vector<bool> acked(kPuts, false);
  for (int i = 0; i < kPuts; ++i) {
    Status s = client->Put("p" + std::to_string(i), RandomBytes(64 << 10, i));
    acked[i] = s.ok();
    acknowledged += s.ok();
  }
  EXPECT_EQ(acknowledged, kPuts);  // the retry places them on node-a
  EXPECT_GE(client->counters().put_retries, 1u);
  EXPECT_GE(client->counters().shm_writes_owner_gone, 1u);
  // Once the dead node is dropped, every acknowledged value is still there.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto st = client->Stat();
        return st.ok() && st->segments.size() == 1;
      },
      std::chrono::seconds(20)));
  int lost = 0;
  for (int i = 0; i < kPuts; ++i) {
    if (!acked[i]) continue;
    auto r = client->Get("p" + std::to_string(i));
    if (!r.ok()) {
      ++lost;
      continue;
    }
    EXPECT_EQ(r.value(), RandomBytes(64 << 10, i)) << i;
  }
  EXPECT_EQ(lost, 0) << "acknowledged puts lost with the dead node";
}

TEST_F(MultiProcessTest, MasterRestartKeepsEveryDramValueANodeStillHolds) {
  // Before, a restarted master lost every DRAM-only object although the
  // nodes still held the bytes, and a long-lived client's first call failed
  // ("Broken pipe", RPC_FAIL).
  pid_t master = 0;
  const std::string cfg =
      "metrics_port = -1\nclient_ttl = 2\ndefault_kv_lease_ttl = 1000\n";
  const std::string address = StartMaster("rpc_port = 0\n" + cfg, &master);
  StartNode("node-a", address);
  StartNode("node-b", address);
  auto client = TcpClientSeeing(address, 2);
  constexpr int kKeys = 60;
  auto value = [](int i, int gen) {
    return RandomBytes(4096 + 1000 * (i % 7), 100 * gen + i);
  };
  for (int i = 0; i < kKeys; ++i)
    ASSERT_TRUE(client->Put("k" + std::to_string(i), value(i, 0)).ok());
  // A removed key and a replaced one must not come back as they were.
  ASSERT_TRUE(client->Remove("k0").ok());
  ASSERT_TRUE(client->Upsert("k1", value(1, 1)).ok());
  ASSERT_TRUE(client->Get("k2").ok());

  kill(master, SIGKILL);
  waitpid(master, nullptr, 0);
  pids_.erase(std::find(pids_.begin(), pids_.end(), master));
  const std::string port = address.substr(address.rfind(':') + 1);
  StartMaster("rpc_port = " + port + "\n" + cfg, &master);
  // The first call of the old client after the restart is not an RPC
  // failure: the value (once its node re-registered) or a clean miss.
  auto first = client->Get("k2");
  EXPECT_TRUE(first.ok() || first.code() == ErrorCode::OBJECT_NOT_FOUND)
      << first.status().ToString();
  auto probe = TcpClientSeeing(address, 2);
  // Both nodes re-register their directories as they remount.
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 2; i < kKeys; ++i) {
          if (!client->Get("k" + std::to_string(i)).ok()) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  for (int i = 2; i < kKeys; ++i) {
    EXPECT_TRUE(Holds(client->Get("k" + std::to_string(i)), value(i, 0))) << i;
  }
  EXPECT_EQ(client->Get("k0").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(Holds(client->Get("k1"), value(1, 1)));
  // New puts land once the segments reopen, and never over a value that
  // came back.
  ASSERT_TRUE(
      WaitUntil([&] { return client->Put("fresh-0", value(0, 9)).ok(); },
                std::chrono::seconds(20)));
  for (int i = 1; i < 30; ++i)
    ASSERT_TRUE(client->Put("fresh-" + std::to_string(i), value(i, 9)).ok());
  for (int i = 2; i < kKeys; ++i) {
    EXPECT_TRUE(Holds(client->Get("k" + std::to_string(i)), value(i, 0))) << i;
  }
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(Holds(client->Get("fresh-" + std::to_string(i)), value(i, 9)));
  }
  EXPECT_TRUE(client->Stat().ok());
}

TEST_F(MultiProcessTest, NodeDeclaredDeadKeepsItsValuesWhenItWakes) {
  // SIGSTOP a node past client_ttl: the master drops it (correct: it is
  // silent), but its memory was intact; when it wakes it remounts and
  // re-registers what it holds, except what changed meanwhile.
  pid_t master = 0;
  const std::string address = StartMaster(
      "rpc_port = 0\nmetrics_port = -1\nclient_ttl = 1\n"
      "default_kv_lease_ttl = 500\n",
      &master);
  pid_t a = StartNode("node-a", address);
  TcpClientSeeing(address, 1);
  ClientConfig cc;
  cc.master_server_address = address;
  cc.transport = TransportMode::kTcp;
  cc.data_io_timeout_ms = 500;  // a get of the stopped node fails fast
  auto client = Client::Create(cc).value();
  // The 500 ms data timeout is for the stopped node's get below; a put that
  // meets it under a loaded sanitizer build (the ASan run of a local CI once
  // refused one a few ms after the node served) is tried again, and every
  // refusal is printed with its reason.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] {
          Status put =
              client->Put("k" + std::to_string(i), RandomBytes(8192, i));
          if (!put.ok()) std::cerr << "put refused: " << put.ToString() << "\n";
          return put.ok();
        },
        std::chrono::seconds(20)))
        << i;
  }
  StartNode("node-b", address);
  TcpClientSeeing(address, 2);
  ASSERT_TRUE(StopAndWait(a));
  // Declared dead: its keys are misses, and puts go to node-b. One of its
  // keys is written anew meanwhile, one removed after it was gone.
  ASSERT_TRUE(WaitUntil(
      [&] { return client->Get("k5").code() == ErrorCode::OBJECT_NOT_FOUND; },
      std::chrono::seconds(20)));
  ASSERT_TRUE(client->Put("k3", RandomBytes(8192, 333)).ok());
  client->Remove("k4").IgnoreError();
  kill(a, SIGCONT);
  ASSERT_TRUE(WaitUntil([&] { return client->Get("k5").ok(); },
                        std::chrono::seconds(20)));
  for (int i = 0; i < 20; ++i) {
    auto r = client->Get("k" + std::to_string(i));
    if (i == 3) {
      EXPECT_TRUE(Holds(r, RandomBytes(8192, 333)));  // the newer value
    } else if (i == 4) {
      EXPECT_EQ(r.code(), ErrorCode::OBJECT_NOT_FOUND);  // removed since
    } else {
      EXPECT_TRUE(Holds(r, RandomBytes(8192, i))) << i;
    }
  }
}

TEST_F(MultiProcessTest, KilledNodeKeysBecomeMissesOthersKeepWorking) {
  // Knobs from a config file (same names as the flags).
  pid_t master = 0;
  const std::string address =
      StartMaster("rpc_port = 0\nmetrics_port = -1\nclient_ttl = 1\n", &master);
  std::vector<pid_t> nodes = {StartNode("node-a", address),
                              StartNode("node-b", address)};
  auto client = TcpClientSeeing(address, 2);

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

// Issue #41, hole 3: a client SIGKILLed in the middle of a batch put that
// fills the pool held every byte of it until put_start_release_timeout_sec
// (600 s): every other client's puts failed with NO_AVAILABLE_HANDLE. Now
// the master releases a client's puts once it has been silent for
// client_ttl, while a client that is alive but slow (here: stalled between
// its PutStart and its writes) keeps them, pinging.
TEST_F(MultiProcessTest, AKilledClientsPutsAreReleasedAfterClientTtl) {
  constexpr int kTtlSec = 2;
  constexpr uint64_t kValue = 4 << 20;
  constexpr int kFill = 16;  // 2 x 32 MiB
  // What the fresh client stores: below the eviction watermark (90 %), so
  // its values stay to be read back.
  constexpr int kFresh = 14;
  pid_t master = 0;
  const std::string address =
      StartMaster("rpc_port = 0\nmetrics_port = -1\nclient_ttl = " +
                      std::to_string(kTtlSec) + "\n",
                  &master);
  StartNode("node-a", address);
  StartNode("node-b", address);
  auto client = TcpClientSeeing(address, 2);
  auto room = [&] {
    auto s = client->Stat();
    if (!s.ok()) return uint64_t{0};
    uint64_t free = 0;
    for (const auto& seg : s->segments) free += seg.capacity - seg.used;
    return free;
  };

  // The doomed client: granted the whole pool, then stalled before writing
  // (a failpoint), as an engine killed mid-batch.
  const fs::path value = dir_ / "value";
  {
    std::ofstream out(value, std::ios::binary);
    out << RandomBytes(kValue, 7);
  }
  pid_t doomed = Spawn(
      {std::string(KVPOOL_BIN_DIR) + "/kvpool", "--master=" + address, "put",
       "doomed", value.string(), "--count=" + std::to_string(kFill + 4)},
      (dir_ / "doomed.log").string(),
      {"KVPOOL_FAILPOINTS=client.put.after_start=pause:600000"});
  pids_.push_back(doomed);
  ASSERT_TRUE(
      WaitUntil([&] { return room() < kValue; }, std::chrono::seconds(20)));

  std::vector<std::string> keys;
  for (int i = 0; i < kFresh; ++i) keys.push_back("fresh-" + std::to_string(i));
  const std::string bytes = RandomBytes(kValue, 8);
  const std::vector<std::string_view> values(keys.size(), bytes);
  auto all_stored = [&] {
    auto r = client->BatchPut(keys, values);
    return std::all_of(r.begin(), r.end(),
                       [](const Status& s) { return s.ok(); });
  };
  // Alive (its pinger runs) though stalled for over two ttls: it keeps the
  // pool.
  const auto stalled = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - stalled <
         std::chrono::seconds(2 * kTtlSec + 1)) {
    ASSERT_LT(room(), kValue);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_FALSE(all_stored());

  kill(doomed, SIGKILL);
  waitpid(doomed, nullptr, 0);
  pids_.erase(std::find(pids_.begin(), pids_.end(), doomed));
  const auto killed = std::chrono::steady_clock::now();
  // Released after client_ttl (and the once-a-second reclaim pass); the
  // ranges are reused once the dead puts' write tokens have expired, which
  // they have by then (5 s after their start).
  ASSERT_TRUE(WaitUntil(all_stored, std::chrono::seconds(kTtlSec + 15)));
  std::cout << "[ released ] a fresh batch of " << kFresh << " x 4 MiB stored "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - killed)
                   .count()
            << " ms after the kill (client_ttl " << kTtlSec << " s)\n";
  // Nothing the dead client was granted is readable; the new values are.
  for (int i = 0; i < kFill + 4; ++i) {
    EXPECT_EQ(client->Get("doomed-" + std::to_string(i)).code(),
              ErrorCode::OBJECT_NOT_FOUND);
  }
  EXPECT_TRUE(Holds(client->Get(keys[0]), bytes));
  EXPECT_TRUE(Holds(client->Get(keys[kFresh - 1]), bytes));
}

}  // namespace
}  // namespace kvpool
