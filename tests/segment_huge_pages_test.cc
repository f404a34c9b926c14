// A node's segments on 2 MiB pages by default (NodeConfig::
// segment_huge_pages, node/segment_dir.h): where segment_dir has 4 KiB
// pages the node mounts a huge tmpfs of its own, serves from it over both
// transports, and takes the mount away when it stops; off, the files stay
// in segment_dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "node/node.h"
#include "node/segment_dir.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using testing::RandomBytes;

constexpr uint64_t kHuge = 2ull << 20;

bool Mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.find(" " + path + " ") != std::string::npos) return true;
  }
  return false;
}

void PutAndGetBothWays(LocalCluster& cluster) {
  for (TransportMode mode : {TransportMode::kShm, TransportMode::kTcp}) {
    ClientConfig cc;
    cc.transport = mode;
    auto c = cluster.NewClient(cc);
    ASSERT_TRUE(c.ok());
    const std::string key = "k" + std::to_string(int(mode));
    const std::string value = RandomBytes(3 << 20, int(mode) + 1);
    ASSERT_TRUE(c.value()->Put(key, value).ok());
    auto got = c.value()->Get(key);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got.value(), value);
  }
}

TEST(SegmentHugePagesTest, OnByDefaultWhereTheNodeCanMount) {
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.segment_size = 16 << 20;
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  const SegmentDir* dir = cluster.node(0).segment_files();
  ASSERT_NE(dir, nullptr);
  if (!dir->huge()) GTEST_SKIP() << "no huge pages: " << dir->why_not_huge();
  EXPECT_EQ(cluster.node(0).segment()->block_size(), kHuge);
  const std::string mnt = dir->path();
  if (dir->mounted()) {
    EXPECT_EQ(mnt.rfind(o.segment_dir + "/kvpool-huge-", 0), 0u) << mnt;
    EXPECT_TRUE(Mounted(mnt));
  }
  EXPECT_EQ(std::filesystem::path(cluster.node(0).segment()->path())
                .parent_path()
                .string(),
            mnt);
  PutAndGetBothWays(cluster);
  const bool mounted = dir->mounted();
  cluster.Stop();
  if (mounted) {
    EXPECT_FALSE(Mounted(mnt));
    EXPECT_FALSE(std::filesystem::exists(mnt));
  }
}

TEST(SegmentHugePagesTest, OffLeavesTheSegmentInSegmentDir) {
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.segment_size = 16 << 20;
  o.segment_huge_pages = false;
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  EXPECT_FALSE(cluster.node(0).segment_files()->mounted());
  EXPECT_EQ(std::filesystem::path(cluster.node(0).segment()->path())
                .parent_path()
                .string(),
            o.segment_dir);
  PutAndGetBothWays(cluster);
}

}  // namespace
}  // namespace kvpool
