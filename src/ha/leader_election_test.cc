#include "ha/leader_election.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>

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
