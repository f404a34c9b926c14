// Extra segments (Mooncake's mount_segment and allocate_and_mount_segment)
// on a LocalCluster: memory a hosting process adds to the pool while its
// node runs, read and written by other clients, and taken back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "node/node.h"
#include "tests/ssd_fixture.h"
#include "tests/test_util.h"
#include "transport/shm_segment.h"

namespace kvpool {
namespace {

using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;

constexpr uint64_t kMiB = 1 << 20;

// How many mappings of `path` this process has (/proc/self/maps).
int MappingsOf(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.size() >= path.size() &&
         line.compare(line.size() - path.size(), path.size(), path) == 0;
  }
  return n;
}

bool FileExists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

class MountSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(LocalClusterOptions{}); }
  void Start(LocalClusterOptions o) {
    // A small main segment: values of 2 MiB only fit an extra segment.
    o.num_nodes = 1;
    o.segment_size = 1 * kMiB;
    cluster_.reset();
    cluster_ = std::make_unique<LocalCluster>(o);
    ASSERT_TRUE(cluster_->Start().ok());
    page_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    // The caller's memory: a file it owns (and maps itself), a page of
    // which stays outside the mounted region.
    static std::atomic<int> counter{0};
    auto file =
        ShmSegment::Create("kvpool_mount_test_" + std::to_string(::getpid()) +
                               "_" + std::to_string(counter++),
                           page_ + 8 * kMiB);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::move(file.value());
    std::memset(file_->data(), 0xAB, file_->size());
  }
  std::unique_ptr<Client> NewClient(TransportMode mode) {
    ClientConfig c;
    c.transport = mode;
    auto r = cluster_->NewClient(c);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  Node& node() { return cluster_->node(0); }
  uint64_t IdOf(const std::string& name) {
    for (const auto& e : node().extra_segments()) {
      if (e.name == name) return e.segment_id;
    }
    return 0;
  }
  ReplicateConfig Here() {
    ReplicateConfig rc;
    rc.preferred_segment = node().node_id();
    return rc;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<ShmSegment> file_;
  uint64_t page_ = 4096;
};

// Values land in the caller's memory, other clients read them byte-exact
// over TCP (never through shared memory: the file is not the node's to
// share), and after the unmount they are clean misses, nothing more is
// placed there and the node no longer maps the file.
TEST_F(MountSegmentTest, FileRegionServesOverTcpAndGoesBackOnUnmount) {
  auto writer = NewClient(TransportMode::kAuto);
  auto reader = NewClient(TransportMode::kAuto);
  auto shm_only = NewClient(TransportMode::kShm);
  ASSERT_TRUE(writer->Put("small", "in the main segment", Here()).ok());
  EXPECT_EQ(writer->Put("big", RandomBytes(2 * kMiB, 1), Here()).code(),
            ErrorCode::INVALID_PARAMS);  // larger than every segment

  EXPECT_EQ(MappingsOf(file_->path()), 1);  // the caller's own
  auto name = node().MountFileSegment(file_->path(), page_, 8 * kMiB);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(name->size(), 36u);  // a UUID, version 4 (random), RFC variant
  EXPECT_EQ((*name)[14], '4') << *name;
  EXPECT_NE(std::string("89ab").find((*name)[19]), std::string::npos) << *name;
  const uint64_t id = IdOf(*name);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(MappingsOf(file_->path()), 2);

  std::vector<std::string> values;
  for (int i = 0; i < 3; ++i) {
    values.push_back(RandomBytes(2 * kMiB, 10 + i));
    const std::string key = "big" + std::to_string(i);
    ASSERT_TRUE(writer->Put(key, values[i], Here()).ok()) << i;
    auto tier = writer->BatchGetReplicaDesc({key});
    ASSERT_TRUE(tier[0].ok());
    ASSERT_EQ(tier[0]->replicas.size(), 1u);
    EXPECT_EQ(tier[0]->replicas[0].segment_id, id);
    // The bytes are in the caller's file, at the offset the master chose.
    EXPECT_EQ(std::memcmp(file_->data() + page_ + tier[0]->replicas[0].offset,
                          values[i].data(), values[i].size()),
              0);
    auto got = reader->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.value(), values[i]);
    EXPECT_EQ(shm_only->Get(key).code(), ErrorCode::TRANSFER_FAIL);
  }
  EXPECT_EQ(reader->counters().tcp_bytes_read, 3 * 2 * kMiB);
  EXPECT_EQ(reader->counters().shm_bytes_read, 0u);
  EXPECT_EQ(writer->counters().shm_bytes_written, 19u);  // "small" only
  // The page before the region is the caller's alone.
  for (uint64_t i = 0; i < page_; ++i) ASSERT_EQ(file_->data()[i], 0xAB);

  ASSERT_TRUE(node().UnmountExtraSegment(*name).ok());
  EXPECT_EQ(MappingsOf(file_->path()), 1);
  EXPECT_TRUE(FileExists(file_->path()));  // the caller's file stays
  EXPECT_TRUE(node().extra_segments().empty());
  for (int i = 0; i < 3; ++i) {
    const std::string key = "big" + std::to_string(i);
    EXPECT_EQ(reader->Get(key).code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(reader->BatchGetReplicaDesc({key})[0].code(),
              ErrorCode::OBJECT_NOT_FOUND);
  }
  EXPECT_EQ(reader->Get("small").value(), "in the main segment");
  EXPECT_EQ(writer->Put("big-again", values[0], Here()).code(),
            ErrorCode::INVALID_PARAMS);
  auto stat = reader->Stat();
  ASSERT_TRUE(stat.ok());
  ASSERT_EQ(stat->segments.size(), 1u);
  EXPECT_NE(stat->segments[0].segment_id, id);
}

// A put whose bytes are on their way while the segment is taken back never
// leaves a byte in the caller's memory after the unmount returned, and every
// read afterwards is exact or a miss.
TEST_F(MountSegmentTest, NoWriteLandsAfterTheUnmountReturns) {
  auto name = node().MountFileSegment(file_->path(), page_, 8 * kMiB);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  std::atomic<bool> stop{false};
  std::atomic<int> attempts{0}, stored{0};
  int tried[2] = {0, 0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      auto c = NewClient(TransportMode::kAuto);
      for (int i = 0; !stop; ++i) {
        const std::string key =
            "w" + std::to_string(t) + "-" + std::to_string(i);
        if (c->Put(key, RandomBytes(1536 * 1024, t * 1000 + i), Here()).ok())
          ++stored;
        ++attempts;
        tried[t] = i + 1;
      }
    });
  }
  ASSERT_TRUE(
      WaitUntil([&] { return stored >= 4; }, std::chrono::milliseconds(30000)));
  ASSERT_TRUE(node().UnmountExtraSegment(*name).ok());
  const std::string after(reinterpret_cast<const char*>(file_->data()),
                          file_->size());
  const int seen = attempts;
  ASSERT_TRUE(WaitUntil([&] { return attempts >= seen + 10; },
                        std::chrono::milliseconds(30000)));
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(std::memcmp(after.data(), file_->data(), after.size()), 0);
  auto reader = NewClient(TransportMode::kAuto);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < tried[t]; ++i) {
      const std::string key = "w" + std::to_string(t) + "-" + std::to_string(i);
      auto got = reader->Get(key);
      if (got.ok()) {
        EXPECT_EQ(got.value(), RandomBytes(1536 * 1024, t * 1000 + i)) << key;
      } else {
        EXPECT_EQ(got.code(), ErrorCode::OBJECT_NOT_FOUND) << key;
      }
    }
  }
}

TEST_F(MountSegmentTest, MountErrorsChangeNothing) {
  const std::string path = file_->path();
  EXPECT_EQ(node().MountFileSegment(path, 100, kMiB).code(),
            ErrorCode::INVALID_PARAMS);  // offset not page aligned
  EXPECT_EQ(node().MountFileSegment(path, page_, 9 * kMiB).code(),
            ErrorCode::INVALID_PARAMS);  // past the file's end
  EXPECT_EQ(node().MountFileSegment(path, 0, 0).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(node().MountFileSegment(path + ".missing", 0, kMiB).code(),
            ErrorCode::FILE_NOT_FOUND);
  EXPECT_EQ(node().MountFileSegment("", 0, kMiB).code(),
            ErrorCode::INVALID_PARAMS);
  // The node's own segment file: its bytes are handed out already.
  const std::string main_file = node().segment()->path();
  ASSERT_TRUE(FileExists(main_file));
  EXPECT_EQ(node().MountFileSegment(main_file, 0, kMiB).code(),
            ErrorCode::SEGMENT_ALREADY_EXISTS);
  auto name = node().MountFileSegment(path, page_, 4 * kMiB);
  ASSERT_TRUE(name.ok());
  // The same bytes twice would hand each range out twice.
  EXPECT_EQ(node().MountFileSegment(path, page_, 4 * kMiB).code(),
            ErrorCode::SEGMENT_ALREADY_EXISTS);
  EXPECT_EQ(node().MountFileSegment(path, 0, 2 * page_).code(),
            ErrorCode::SEGMENT_ALREADY_EXISTS);
  // The rest of the file is free to mount.
  auto second = node().MountFileSegment(path, page_ + 4 * kMiB, 4 * kMiB);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(node().extra_segments().size(), 2u);
  EXPECT_EQ(node().UnmountExtraSegment("no-such-segment").code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  ASSERT_TRUE(node().UnmountExtraSegment(*name).ok());
  EXPECT_EQ(node().UnmountExtraSegment(*name).code(),
            ErrorCode::SEGMENT_NOT_FOUND);
  ASSERT_TRUE(node().UnmountExtraSegment(*second).ok());
  auto c = NewClient(TransportMode::kAuto);
  ASSERT_TRUE(c->Put("k", "v", Here()).ok());  // the node is as before
  EXPECT_EQ(c->Get("k").value(), "v");
}

// Memory the node allocates itself is its own to share: same-host clients
// map the segment file, as the main one, and it goes away at unmount.
TEST_F(MountSegmentTest, AllocatedSegmentIsSharedMemoryAndIsRemoved) {
  auto name = node().AllocateExtraSegment(4 * kMiB + 1);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  auto extras = node().extra_segments();
  ASSERT_EQ(extras.size(), 1u);
  EXPECT_TRUE(extras[0].allocated);
  EXPECT_EQ(extras[0].size, 4 * kMiB + page_);  // rounded up to a page
  const std::string path = extras[0].path;
  EXPECT_TRUE(FileExists(path));
  auto writer = NewClient(TransportMode::kAuto);
  auto shm = NewClient(TransportMode::kShm);
  const std::string v = RandomBytes(3 * kMiB, 7);
  ASSERT_TRUE(writer->Put("alloc", v, Here()).ok());
  EXPECT_EQ(writer->BatchGetReplicaDesc({"alloc"})[0]->replicas[0].segment_id,
            extras[0].segment_id);
  EXPECT_EQ(shm->Get("alloc").value(), v);
  EXPECT_EQ(shm->counters().shm_bytes_read, v.size());
  ASSERT_TRUE(node().UnmountExtraSegment(*name).ok());
  EXPECT_FALSE(FileExists(path));
  EXPECT_EQ(shm->Get("alloc").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(node().AllocateExtraSegment(0).code(), ErrorCode::INVALID_PARAMS);
}

// The master forgets the node (declared dead, or restarted): its extra
// segments are mounted again under new ids with the main one (their values
// are gone), and take puts again once earlier leases have run out.
TEST_F(MountSegmentTest, ExtraSegmentsComeBackWhenTheMasterForgetsTheNode) {
  LocalClusterOptions o;
  o.client_ttl = 1;
  o.heartbeat_interval_ms = 100;
  o.default_kv_lease_ttl = 500;
  Start(o);
  auto name = node().MountFileSegment(file_->path(), page_, 8 * kMiB);
  ASSERT_TRUE(name.ok());
  const uint64_t first_id = IdOf(*name);
  auto c = NewClient(TransportMode::kAuto);
  ASSERT_TRUE(c->Put("before", RandomBytes(2 * kMiB, 1), Here()).ok());
  node().PauseHeartbeats(true);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto stat = c->Stat();
        return stat.ok() && stat->segments.empty();
      },
      std::chrono::milliseconds(20000)));
  EXPECT_EQ(c->Get("before").code(), ErrorCode::OBJECT_NOT_FOUND);
  node().PauseHeartbeats(false);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const uint64_t id = IdOf(*name);
        return id != 0 && id != first_id;
      },
      std::chrono::milliseconds(20000)));
  const std::string v = RandomBytes(2 * kMiB, 2);
  ASSERT_TRUE(WaitUntil([&] { return c->Put("after", v, Here()).ok(); },
                        std::chrono::milliseconds(20000)));
  EXPECT_EQ(c->BatchGetReplicaDesc({"after"})[0]->replicas[0].segment_id,
            IdOf(*name));
  EXPECT_EQ(c->Get("after").value(), v);
  ASSERT_TRUE(node().UnmountExtraSegment(*name).ok());
  EXPECT_EQ(c->Get("after").code(), ErrorCode::OBJECT_NOT_FOUND);
}

// A master older than extra segments answers UNIMPLEMENTED: nothing is
// mounted, and the node goes on as before.
TEST_F(MountSegmentTest, AMasterWithoutExtraSegmentsLeavesTheNodeAlone) {
  LocalClusterOptions o;
  o.emulate_pre_prefetch_master = true;
  Start(o);
  EXPECT_EQ(node().MountFileSegment(file_->path(), page_, kMiB).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_EQ(node().AllocateExtraSegment(kMiB).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  EXPECT_TRUE(node().extra_segments().empty());
  EXPECT_EQ(MappingsOf(file_->path()), 1);
  auto c = NewClient(TransportMode::kAuto);
  ASSERT_TRUE(c->Put("k", "v", Here()).ok());
  EXPECT_EQ(c->Get("k").value(), "v");
  auto stat = c->Stat();
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->segments.size(), 1u);
}

// With the SSD tier: a key promoted from SSD into an extra segment of its
// own holder is written over the data plane (the tier copies into the
// node's own segments only), and reads back exact; unmounting the segment
// drops that DRAM copy, and the key is read from the SSD again.
class MountSegmentSsdTest : public kvpool::testing::SsdFixture {};

TEST_F(MountSegmentSsdTest, PromotionIntoAnExtraSegmentGoesOverTheDataPlane) {
  using kvpool::testing::kValue;
  opts_.num_nodes = 1;
  opts_.segment_size = 4 * kMiB;
  opts_.promotion_on_hit = true;
  Start();
  Node& node = cluster_->node(0);
  auto c = NewClient();
  const std::string hot = RandomBytes(kValue, 7);
  ASSERT_TRUE(c->Put("hot", hot).ok());
  ASSERT_TRUE(WaitUntil([&] { return HasDiskCopy(*c, "hot"); },
                        std::chrono::seconds(20)));
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(
        c->Put("fill-" + std::to_string(i), RandomBytes(kValue, i)).ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "hot") == "local_disk"; },
                        std::chrono::seconds(20)));
  auto name = node.AllocateExtraSegment(8 * kMiB);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  const uint64_t extra = node.extra_segments()[0].segment_id;
  // Bytes the node's data server took in: the clients here write through
  // shared memory, so only the promotion's write over TCP counts.
  auto tcp_written = [&] {
    const std::string json = node.StatusJson();
    const std::string field = "\"tcp_bytes_written\":";
    return std::stoull(json.substr(json.find(field) + field.size()));
  };
  const uint64_t written_before = tcp_written();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c->Get("hot").value(), hot);
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, "hot") == "memory"; },
                        std::chrono::seconds(20)));
  auto tier = c->BatchGetReplicaDesc({"hot"});
  ASSERT_TRUE(tier[0].ok());
  bool in_extra = false;
  for (const auto& r : tier[0]->replicas) {
    in_extra = in_extra ||
               (r.kind == ReplicaInfo::Kind::kMemory && r.segment_id == extra);
  }
  EXPECT_TRUE(in_extra);
  EXPECT_EQ(tcp_written() - written_before, kValue);
  EXPECT_EQ(c->Get("hot").value(), hot);
  ASSERT_TRUE(node.UnmountExtraSegment(*name).ok());
  EXPECT_EQ(Tier(*c, "hot"), "local_disk");
  EXPECT_EQ(c->Get("hot").value(), hot);
}

}  // namespace
}  // namespace kvpool
