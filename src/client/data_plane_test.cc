#include "client/data_plane.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/host_id.h"

namespace kvpool {
namespace {

constexpr uint64_t kSize = 1 << 20;

// Mappings of `path` in this process, as the kernel lists them.
int MappingsOf(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find(path) != std::string::npos;
  return n;
}

class DataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ShmSegment::Create(
        "kvpool-dptest-" + std::to_string(getpid()) + "-a", kSize);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    seg_ = std::move(s.value());
  }
  rpc::MemoryLocation Loc(uint64_t segment_id) const {
    rpc::MemoryLocation loc;
    loc.set_segment_id(segment_id);
    loc.set_offset(4096);
    loc.set_length(100);
    loc.set_node_id("a");
    loc.set_host_id(LocalHostId());
    loc.set_shm_path(seg_->path());
    loc.set_data_endpoint("127.0.0.1:1");
    loc.set_segment_size(kSize);
    return loc;
  }
  std::unique_ptr<ShmSegment> seg_;
};

TEST_F(DataPlaneTest, ARemountedOrIdleSegmentIsUnmappedOnceNothingHoldsIt) {
  DataPlane dp(TransportMode::kShm);
  std::memset(seg_->data() + 4096, 7, 100);
  const rpc::MemoryLocation old_mount = Loc(1), new_mount = Loc(2);
  std::shared_ptr<const ShmSegment> cached;  // as a cached lease keeps it
  const uint8_t* p = dp.ResolveShm(old_mount, 100, &cached);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[0], 7);
  const int own = MappingsOf(seg_->path());  // the creator's own mapping
  EXPECT_EQ(own, 2);
  // The node mounted again (a master restart): a new id, the same file.
  std::string buf(100, '\0');
  std::vector<TransferItem> items = {
      {.loc = &new_mount,
       .buf = reinterpret_cast<uint8_t*>(buf.data()),
       .length = 100}};
  dp.Read(items);
  ASSERT_EQ(items[0].result, ErrorCode::OK);
  EXPECT_EQ(buf, std::string(100, '\7'));
  EXPECT_EQ(dp.mapped_segments(), 1u);
  // The old mount's mapping lives on only for the lease that holds it.
  EXPECT_EQ(MappingsOf(seg_->path()), 3);
  EXPECT_EQ(p[0], 7);  // still readable through the held mapping
  cached.reset();
  EXPECT_EQ(MappingsOf(seg_->path()), 2);
  // Unused for the idle time: gone too, and the unlinked file's pages with
  // it once its creator lets go.
  dp.DropIdleMappings(0);
  EXPECT_EQ(dp.mapped_segments(), 0u);
  EXPECT_EQ(MappingsOf(seg_->path()), 1);
  const std::string path = seg_->path();
  seg_.reset();
  EXPECT_EQ(MappingsOf(path), 0);
}

TEST_F(DataPlaneTest, PiecesScatterAndGatherOverSharedMemory) {
  DataPlane dp(TransportMode::kShm);
  const rpc::MemoryLocation loc = Loc(1);
  // A value of 100 bytes written from three caller buffers.
  std::string a(30, 'a'), b(50, 'b'), c(20, 'c');
  const ValuePiece parts[] = {{0, reinterpret_cast<uint8_t*>(a.data()), 30},
                              {30, reinterpret_cast<uint8_t*>(b.data()), 50},
                              {80, reinterpret_cast<uint8_t*>(c.data()), 20}};
  std::vector<TransferItem> w = {{.loc = &loc, .length = 100}};
  w[0].pieces = parts;
  dp.Write(w);
  ASSERT_EQ(w[0].result, ErrorCode::OK);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(seg_->data()) + 4096, 100),
            a + b + c);
  // Two ranges read back into separate buffers; nothing else is touched.
  std::string x(10, '.'), y(10, '.');
  const ValuePiece ranges[] = {{25, reinterpret_cast<uint8_t*>(x.data()), 10},
                               {90, reinterpret_cast<uint8_t*>(y.data()), 10}};
  std::vector<TransferItem> r = {{.loc = &loc, .length = 100}};
  r[0].pieces = ranges;
  dp.Read(r);
  ASSERT_EQ(r[0].result, ErrorCode::OK);
  EXPECT_EQ(x, "aaaaabbbbb");
  EXPECT_EQ(y, std::string(10, 'c'));
  // A piece past the end of the value is refused before any byte moves.
  const ValuePiece past[] = {{0, reinterpret_cast<uint8_t*>(x.data()), 5},
                             {95, reinterpret_cast<uint8_t*>(y.data()), 6}};
  x.assign(10, '.');
  r[0].pieces = past;
  dp.Read(r);
  EXPECT_EQ(r[0].result, ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(x, std::string(10, '.'));
}

// Two clients of one process share one view of another process's segment
// (and its page tables, set up once), per mount.
TEST_F(DataPlaneTest, ClientsOfOneProcessShareAViewOfASegment) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan builds keep a mapping per client";
#endif
  DataPlane a(TransportMode::kShm), b(TransportMode::kShm);
  std::shared_ptr<const ShmSegment> va, vb, vc;
  ASSERT_NE(a.ResolveShm(Loc(1), 100, &va), nullptr);
  ASSERT_NE(b.ResolveShm(Loc(1), 100, &vb), nullptr);
  EXPECT_EQ(va.get(), vb.get());
  EXPECT_EQ(MappingsOf(seg_->path()), 2);  // the creator's and the view
  // A remount (new id) is a new view, as in one client.
  ASSERT_NE(b.ResolveShm(Loc(2), 100, &vc), nullptr);
  EXPECT_NE(vc.get(), va.get());
  EXPECT_EQ(MappingsOf(seg_->path()), 3);
}

}  // namespace
}  // namespace kvpool
