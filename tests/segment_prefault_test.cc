// A node populates its segment in the background (NodeConfig::
// segment_prefault): every page is mapped once it reports done, the node
// mounts and serves puts before then, and with the knob off the pages wait
// for their first put.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "node/node.h"
#include "tests/population_gate.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using testing::MappedRssBytes;
using testing::RandomBytes;

constexpr uint64_t kSegment = 32ull << 20;

TEST(SegmentPrefaultTest, EveryPageIsMappedOnceThePopulatorIsDone) {
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.segment_size = kSegment;
  o.node_id_prefix = "prefault-on";
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  const SegmentPopulator* pop = cluster.node(0).populator();
  ASSERT_NE(pop, nullptr);
  ASSERT_TRUE(pop->WaitDone(60000));
  EXPECT_EQ(MappedRssBytes(cluster.node(0).segment()->path()), kSegment);
}

TEST(SegmentPrefaultTest, OffLeavesPagesToTheirFirstPut) {
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.segment_size = kSegment;
  o.segment_prefault = false;
  o.node_id_prefix = "prefault-off";
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  EXPECT_EQ(cluster.node(0).populator(), nullptr);
  auto c = cluster.NewClient();
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.value()->Put("k", RandomBytes(1 << 20, 1)).ok());
  const uint64_t rss = MappedRssBytes(cluster.node(0).segment()->path());
  EXPECT_GE(rss, 1u << 20);
  EXPECT_LT(rss, 4u << 20);
}

using testing::PopulationGate;

// Population held at a quarter of the segment: Start has returned and the
// segment is mounted, and puts over both transports, landing in populated
// and unpopulated parts, read back; population then finishes and changes
// none of them.
TEST(SegmentPrefaultTest, NodeMountsAndServesPutsBeforePopulationEnds) {
  LocalClusterOptions o;
  o.num_nodes = 0;
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  NodeConfig nc;
  nc.master_server_address = cluster.master_address();
  nc.global_segment_size = kSegment;
  nc.node_id = "prefault-held";
  PopulationGate gate(kSegment / 4);
  Node node(nc);
  node.SetPopulateHookForTest([&gate](uint64_t done) { gate.Arrive(done); });
  // A failed assertion must not leave population, and Node's Stop that
  // joins it, waiting at the gate.
  struct OpenOnExit {
    PopulationGate* gate;
    ~OpenOnExit() { gate->Open(); }
  } open_on_exit{&gate};
  // On a thread of its own, so a Start that waited for population fails
  // the test instead of hanging it.
  auto started = std::async(std::launch::async, [&] { return node.Start(); });
  gate.AwaitHeld();
  const bool returned =
      started.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  if (!returned) gate.Open();
  ASSERT_TRUE(returned) << "Start waited for the segment's population";
  ASSERT_TRUE(started.get().ok());
  EXPECT_NE(node.segment_id(), 0u);
  ASSERT_NE(node.populator(), nullptr);
  EXPECT_FALSE(node.populator()->done());

  std::vector<std::string> keys, values;
  for (TransportMode mode : {TransportMode::kShm, TransportMode::kTcp}) {
    ClientConfig cc;
    cc.transport = mode;
    auto c = cluster.NewClient(cc);
    ASSERT_TRUE(c.ok());
    // 12 MiB per transport: 24 of the 32 MiB, past the populated quarter.
    for (int i = 0; i < 12; ++i) {
      keys.push_back("k" + std::to_string(keys.size()));
      values.push_back(RandomBytes(1 << 20, keys.size()));
      ASSERT_TRUE(c.value()->Put(keys.back(), values.back()).ok());
    }
  }
  EXPECT_FALSE(node.populator()->done());
  gate.Open();
  ASSERT_TRUE(node.populator()->WaitDone(60000));
  EXPECT_EQ(MappedRssBytes(node.segment()->path()), kSegment);
  for (TransportMode mode : {TransportMode::kShm, TransportMode::kTcp}) {
    ClientConfig cc;
    cc.transport = mode;
    auto c = cluster.NewClient(cc);
    ASSERT_TRUE(c.ok());
    for (size_t i = 0; i < keys.size(); ++i) {
      auto got = c.value()->Get(keys[i]);
      ASSERT_TRUE(got.ok()) << keys[i];
      EXPECT_EQ(got.value(), values[i]) << keys[i];
    }
  }
  node.Stop();
}

}  // namespace
}  // namespace kvpool
