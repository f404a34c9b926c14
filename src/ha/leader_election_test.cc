#include "ha/leader_election.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "ha/etcd_test_process.h"

namespace kvpool::ha {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class LeaderElectionTest : public ::testing::Test {
 protected:
  LeaderElectionTest()
      : dir_(fs::temp_directory_path() /
             ("kvpool-election-" + std::to_string(getpid()))),
        etcd_(dir_) {}
  ~LeaderElectionTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ElectionConfig Config(const std::string& address) const {
    ElectionConfig c;
    c.key = LeaderKey("test");
    c.value = address;
    c.lease_ttl_s = 1;
    c.poll_interval_ms = 50;
    return c;
  }
  fs::path dir_;
  testing::EtcdProcess etcd_;
  std::atomic<bool> never_{false};
};

TEST_F(LeaderElectionTest, OneLeadsTheOtherWaitsAndTakesOverWithALargerEpoch) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient ca({etcd_.endpoint()}, 300), cb({etcd_.endpoint()}, 300);
  ElectionConfig config_a = Config("a:1"), config_b = Config("b:2");
  config_a.lease_ttl_s = config_b.lease_ttl_s = 5;
  LeaderElection a(&ca, config_a), b(&cb, config_b);
  auto ea = a.Campaign(&never_);
  ASSERT_TRUE(ea.ok()) << ea.status().ToString();
  EXPECT_TRUE(a.Held());

  std::promise<LeaderInfo> seen;
  std::atomic<bool> seen_set{false};
  auto eb = std::async(std::launch::async, [&] {
    return b.Campaign(&never_, [&](const LeaderInfo& l) {
      if (!seen_set.exchange(true)) seen.set_value(l);
    });
  });
  const LeaderInfo waiting_behind = seen.get_future().get();
  EXPECT_EQ(waiting_behind.address, "a:1");
  EXPECT_EQ(waiting_behind.epoch, ea.value());
  EXPECT_FALSE(b.Held());

  auto found = FindLeader(&cb, LeaderKey("test"));
  ASSERT_TRUE(found.ok() && found.value().has_value());
  EXPECT_EQ(found.value()->address, "a:1");

  // A clean handover does not wait for the TTL.
  const auto t0 = Clock::now();
  a.Resign("test");
  EXPECT_FALSE(a.Held());
  auto won = eb.get();
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_GT(won.value(), ea.value());
  EXPECT_TRUE(b.Held());
  // One standby poll (50 ms) and a few etcd calls, far below the 5 s TTL
  // a crashed leader would cost (loose for loaded, sanitized runs).
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2500));
  found = FindLeader(&ca, LeaderKey("test"));
  ASSERT_TRUE(found.ok() && found.value().has_value());
  EXPECT_EQ(found.value()->address, "b:2");
  EXPECT_EQ(found.value()->epoch, won.value());
}

TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdStopsBeforeItsLeaseEnds) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient c({etcd_.endpoint()}, 200);
  LeaderElection a(&c, Config("a:1"));
  ASSERT_TRUE(a.Campaign(&never_).ok());
  const int64_t ttl_ms = a.granted_ttl_s() * 1000;
  // Frozen etcd: no keep-alive is answered.
  ASSERT_TRUE(testing::StopAndWait(etcd_.pid()));
  const auto t0 = Clock::now();
  EXPECT_TRUE(a.WaitLost(&never_));
  const auto took = Clock::now() - t0;
  kill(etcd_.pid(), SIGCONT);
  EXPECT_FALSE(a.Held());
  // Held() ends by the clock at 90 % of the TTL after the last renewal
  // (before t0); WaitLost wakes for it. Half a TTL of slack for a loaded
  // (sanitized) run's scheduling, far below what etcd's expiry would take.
  EXPECT_LE(took, std::chrono::milliseconds(ttl_ms * 3 / 2));
}

// An etcd gateway that grants every lease and create, and holds its first
// keep-alive reply until the test releases it: a renewal answered only after
// the leader's own deadline has passed, which a real etcd gives no way to
// time.
class LateKeepAliveEtcd {
 public:
  LateKeepAliveEtcd() {
    server_.Post("/v3/kv/range", [](const auto&, auto& res) {
      res.set_content(R"({"header":{"revision":"1"}})", "application/json");
    });
    server_.Post("/v3/lease/grant", [](const auto&, auto& res) {
      res.set_content(R"({"ID":"7","TTL":"1"})", "application/json");
    });
    server_.Post("/v3/kv/txn", [](const auto&, auto& res) {
      res.set_content(R"({"header":{"revision":"5"},"succeeded":true})",
                      "application/json");
    });
    server_.Post("/v3/lease/revoke", [](const auto&, auto& res) {
      res.set_content("{}", "application/json");
    });
    server_.Post("/v3/lease/keepalive", [this](const auto&, auto& res) {
      std::unique_lock<std::mutex> lock(mu_);
      const int n = ++keepalives_;
      cv_.notify_all();
      if (n == 1) cv_.wait(lock, [this] { return released_; });
      res.set_content(R"({"result":{"ID":"7","TTL":"1"}})", "application/json");
      if (n == 1) answered_first_ = true;
      cv_.notify_all();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // Bound and listening already: calls queue until the loop accepts.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LateKeepAliveEtcd() {
    Release();
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  void WaitFirstKeepAlive() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return keepalives_ >= 1; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // True once the late reply has been written, false if `d` passed first.
  bool WaitFirstAnswered(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [this] { return answered_first_; });
  }
  // True if a second keep-alive came within `d`.
  bool WaitSecondKeepAlive(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [this] { return keepalives_ >= 2; });
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int keepalives_ = 0;
  bool released_ = false;
  bool answered_first_ = false;
};

TEST(LeaderElectionLapseTest, ARenewalAnsweredAfterTheDeadlineDoesNotRevive) {
  LateKeepAliveEtcd etcd;
  // The client waits far longer than the lease: the reply is late, not lost.
  EtcdClient c({etcd.endpoint()}, 10000);
  ElectionConfig config;
  config.key = LeaderKey("lapse");
  config.value = "a:1";
  config.lease_ttl_s = 1;
  LeaderElection a(&c, config);
  std::atomic<bool> never{false};
  ASSERT_TRUE(a.Campaign(&never).ok());
  ASSERT_EQ(a.granted_ttl_s(), 1);
  // The renewer sends its first keep-alive a third of a TTL in and is held.
  etcd.WaitFirstKeepAlive();
  EXPECT_TRUE(a.WaitLost(&never));
  EXPECT_FALSE(a.Held());
  // Its reply still proves the lease for sent + 0.9 s, past now: before the
  // fix the renewer moved the deadline forward and Held() was true again.
  etcd.Release();
  ASSERT_TRUE(etcd.WaitFirstAnswered(std::chrono::seconds(5)));
  // The renewer handles the reply, sleeps a period (333 ms) and, had it
  // revived the lease, would renew again; neither may happen.
  const auto until = Clock::now() + std::chrono::milliseconds(1000);
  while (Clock::now() < until) {
    ASSERT_FALSE(a.Held());
    if (etcd.WaitSecondKeepAlive(std::chrono::milliseconds(10))) {
      FAIL() << "the renewer renewed a lease it had lost";
    }
  }
}

TEST_F(LeaderElectionTest, ACrashedLeadersLeaseRunsOutAndAStandbyWins) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient ca({etcd_.endpoint()}, 300), cb({etcd_.endpoint()}, 300);
  uint64_t first = 0;
  {
    LeaderElection a(&ca, Config("a:1"));
    auto e = a.Campaign(&never_);
    ASSERT_TRUE(e.ok());
    first = e.value();
  }  // destroyed without resigning: as a kill -9 leaves it
  LeaderElection b(&cb, Config("b:2"));
  const auto t0 = Clock::now();
  auto e = b.Campaign(&never_);
  ASSERT_TRUE(e.ok());
  EXPECT_GT(e.value(), first);
  // The lease's TTL (1 s here) plus etcd's expiry check and one poll;
  // loose for loaded (sanitized) runs.
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(6));
}

TEST_F(LeaderElectionTest, ACampaignCanBeStoppedWhileAnotherLeads) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient ca({etcd_.endpoint()}, 300), cb({etcd_.endpoint()}, 300);
  LeaderElection a(&ca, Config("a:1")), b(&cb, Config("b:2"));
  ASSERT_TRUE(a.Campaign(&never_).ok());
  std::atomic<bool> stop{false};
  auto eb = std::async(std::launch::async, [&] { return b.Campaign(&stop); });
  stop = true;
  EXPECT_EQ(eb.get().status().code(), ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_TRUE(a.Held());
}

}  // namespace
}  // namespace kvpool::ha
