// A LocalCluster with the SSD tier on, in a per-test temporary directory,
// plus helpers to put keys in a given tier. Shared by the SSD-tier and
// prefetch integration tests.
#ifndef KVPOOL_TESTS_SSD_FIXTURE_H_
#define KVPOOL_TESTS_SSD_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/failpoint.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "node/node.h"
#include "tests/test_util.h"

namespace kvpool::testing {

// Disarms every failpoint when the test's scope ends, however it ends.
struct DisarmFailpointsAtExit {
  ~DisarmFailpointsAtExit() { DisarmFailpoints(); }
};

inline constexpr uint64_t kValue = 1 << 20;

// A test of a holder behaviour beyond the seeds skips when the suite runs
// as the seeds' holder (KVPOOL_TEST_PREFETCH_PROFILE=rfc).
#define KVPOOL_SKIP_UNDER_RFC_PROFILE()                                   \
  do {                                                                    \
    if (::kvpool::testing::SsdFixture::RfcProfile())                      \
      GTEST_SKIP() << "beyond the seeds: not under prefetch_profile=rfc"; \
  } while (0)

class SsdFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parametrised test's name has a '/': keep the root one directory,
    // so that TearDown removes all of it.
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    root_ = std::filesystem::temp_directory_path() /
            ("kvpool-ssd-" + std::to_string(getpid()) + "-" + name);
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    opts_.num_nodes = 2;
    opts_.segment_size = 16ull << 20;
    opts_.enable_ssd = true;
    opts_.ssd_root = root_.string();
    opts_.ssd_capacity_bytes = 512ull << 20;
    opts_.ssd_segment_file_size = 16ull << 20;
    opts_.heartbeat_interval_ms = 200;
    opts_.default_kv_lease_ttl = 500;
    // ctest runs the seed-rule suites again as the seeds' holder
    // (prefetch_profile=rfc, docs/prefetch_defaults.md).
    if (RfcProfile()) opts_.prefetch_profile = "rfc";
  }
  static bool RfcProfile() {
    const char* p = std::getenv("KVPOOL_TEST_PREFETCH_PROFILE");
    return p != nullptr && std::string(p) == "rfc";
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }
  void Start() {
    cluster_ = std::make_unique<LocalCluster>(opts_);
    const Status s = cluster_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<Client> NewClient(TransportMode mode = TransportMode::kAuto,
                                    bool prefetch = false) {
    ClientConfig c;
    c.transport = mode;
    c.enable_ssd_prefetch = prefetch;
    return cluster_->NewClient(c).value();
  }
  // "memory", "local_disk", "processing" or "absent".
  static std::string Tier(Client& c, const std::string& key) {
    auto t = c.BatchGetReplicaDesc({key});
    return t[0].ok() ? t[0]->BestTier() : "absent";
  }
  // Waits (20 s at most) until every key's best replica is in DRAM.
  static bool AllReachMemory(Client& c, const std::vector<std::string>& keys) {
    return WaitUntil(
        [&] {
          for (const auto& k : keys)
            if (Tier(c, k) != "memory") return false;
          return true;
        },
        std::chrono::seconds(20));
  }
  // A get, asked again on LEASE_EXPIRED (at most 5 times): the lease ran
  // out before the copy finished, which is the documented answer to a slow
  // read and one a client retries. Sanitizer runs on two loaded cores see it
  // with this fixture's 500 ms lease.
  static Result<std::string> GetPatiently(Client& c, const std::string& key) {
    Result<std::string> r = c.Get(key);
    for (int i = 0; i < 5 && r.code() == ErrorCode::LEASE_EXPIRED; ++i)
      r = c.Get(key);
    return r;
  }
  static bool HasDiskCopy(Client& c, const std::string& key) {
    auto t = c.BatchGetReplicaDesc({key});
    if (!t[0].ok()) return false;
    for (const auto& r : t[0]->replicas) {
      if (r.kind == ReplicaInfo::Kind::kLocalDisk && r.complete) return true;
    }
    return false;
  }
  static bool AllHaveDiskCopies(Client& c,
                                const std::vector<std::string>& keys) {
    return WaitUntil(
        [&] {
          for (const auto& k : keys) {
            if (!HasDiskCopy(c, k)) return false;
          }
          return true;
        },
        std::chrono::seconds(20));
  }
  // Makes `n` keys SSD-only: put them, wait for their copies, push them out
  // of DRAM with filler, then remove the filler so DRAM has room again.
  std::vector<std::string> MakeSsdOnly(Client& c, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) {
      keys.push_back("cold-" + std::to_string(i));
      EXPECT_TRUE(c.Put(keys.back(), RandomBytes(kValue, i)).ok());
    }
    EXPECT_TRUE(AllHaveDiskCopies(c, keys));
    for (int i = 0; i < 40; ++i) {
      EXPECT_TRUE(
          c.Put("filler-" + std::to_string(i), RandomBytes(kValue, 1000 + i))
              .ok());
    }
    EXPECT_TRUE(WaitUntil(
        [&] {
          for (const auto& k : keys) {
            if (Tier(c, k) != "local_disk") return false;
          }
          return true;
        },
        std::chrono::seconds(20)));
    for (int i = 0; i < 40; ++i)
      c.Remove("filler-" + std::to_string(i), true).IgnoreError();
    EXPECT_TRUE(DirectoriesSettled());
    return keys;
  }
  // The nodes have applied every DRAM directory event, so every range
  // freed so far is free at the master again.
  bool DirectoriesSettled() {
    return WaitUntil(
        [&] {
          return cluster_->master().service().nodes().dram_events_queued() == 0;
        },
        std::chrono::seconds(10));
  }

  std::filesystem::path root_;
  LocalClusterOptions opts_;
  std::unique_ptr<LocalCluster> cluster_;
};

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_SSD_FIXTURE_H_
