// The SSD tier on a filesystem much smaller than its configured capacity: a
// 24 MiB ext4 image loop-mounted by this test (root only; skipped, with the
// reason, otherwise), with ssd_capacity_bytes of 1 GiB. Before, every put
// stalled 5 s and failed once the disk filled, offload retries spun, and the
// node could not restart on the full disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/ssd_fixture.h"

namespace kvpool {
namespace {

using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;

class FullDiskTest : public kvpool::testing::SsdFixture {
 protected:
  void SetUp() override {
    SsdFixture::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "needs root to loop-mount a filesystem";
    const auto image = root_ / "disk.img";
    mnt_ = root_ / "mnt";
    std::filesystem::create_directories(mnt_);
    const std::string cmd = "truncate -s 24M " + image.string() +
                            " && mkfs.ext4 -q -F " + image.string() +
                            " && mount -o loop " + image.string() + " " +
                            mnt_.string();
    if (std::system(cmd.c_str()) != 0)
      GTEST_SKIP() << "cannot make a loop-mounted ext4 here: " << cmd;
    mounted_ = true;
    opts_.num_nodes = 1;
    opts_.ssd_root = mnt_.string();
    opts_.ssd_capacity_bytes = 1ull << 30;  // far more than the disk holds
    opts_.ssd_segment_file_size = 4ull << 20;
  }
  void TearDown() override {
    cluster_.reset();
    if (mounted_) {
      const std::string cmd = "umount " + mnt_.string();
      EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    SsdFixture::TearDown();
  }
  uint64_t MasterCounter(const std::string& name) {
    return cluster_->master().service().metrics().CounterValue(name, "");
  }
  std::filesystem::path mnt_;
  bool mounted_ = false;
};

TEST_F(FullDiskTest, PutsKeepWorkingAndTheNodeRestartsOnAFullDisk) {
  Start();
  auto c = NewClient();
  constexpr int kPuts = 60;  // 60 MiB: 16 MiB of DRAM, ~20 MiB of disk
  for (int i = 0; i < kPuts; ++i) {
    Status s = c->Put("k" + std::to_string(i), RandomBytes(kValue, i));
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
  }
  FileStorage* st = cluster_->node(0).ssd()->storage();
  EXPECT_GT(st->GetStats().disk_full_events, 0u);
  EXPECT_TRUE(st->GetStats().disk_full);
  // Keys that could not be copied were dropped as without an SSD tier, and
  // the failing holder was not sent a task per eviction attempt.
  EXPECT_GT(MasterCounter("kvpool_master_evicted_without_copy_ssd_full_total"),
            0u);
  EXPECT_LT(MasterCounter("kvpool_master_offload_tasks_total"),
            uint64_t(3 * kPuts));
  auto check = [&] {
    int found = 0;
    for (int i = 0; i < kPuts; ++i) {
      auto r = c->Get("k" + std::to_string(i));
      if (r.ok()) {
        EXPECT_EQ(r.value(), RandomBytes(kValue, i)) << i;
        ++found;
      } else {
        EXPECT_EQ(r.code(), ErrorCode::OBJECT_NOT_FOUND) << i;
      }
    }
    return found;
  };
  EXPECT_GT(check(), 0);
  // Take the last free blocks too (not even the 4 KiB O_DIRECT probe
  // fits), then restart: the node starts and serves its SSD copies.
  const std::string fill = "dd if=/dev/zero of=" + (mnt_ / "fill").string() +
                           " bs=4096 status=none 2>/dev/null; sync";
  (void)std::system(fill.c_str());  // ends with ENOSPC, as intended
  ASSERT_TRUE(cluster_->RestartNode(0).ok());
  c = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return c->Stat()->segments.size() == 1; },
                        std::chrono::seconds(20)));
  EXPECT_TRUE(cluster_->node(0).ssd()->storage()->GetStats().disk_full);
  EXPECT_GT(check(), 0);  // from the SSD records re-registered
  ASSERT_TRUE(c->Put("after-restart", RandomBytes(kValue, 999)).ok());
  EXPECT_EQ(c->Get("after-restart").value(), RandomBytes(kValue, 999));
}

}  // namespace
}  // namespace kvpool
