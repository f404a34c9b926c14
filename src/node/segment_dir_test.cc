#include "node/segment_dir.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"
#include "transport/shm_segment.h"

namespace kvpool {
namespace {

using testing::MappedBytes;

constexpr uint64_t kChunk = ShmSegment::kPrepareChunk;  // 2 MiB

// A fresh directory under /dev/shm (where segments live by default),
// removed with what is left in it, mounts included.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/dev/shm/kvpool_segdir_test_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    // A test that failed half-way may leave a mount in it.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) {
      ::umount2(e.path().c_str(), MNT_DETACH);
    }
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool Mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.find(" " + path + " ") != std::string::npos) return true;
  }
  return false;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(SegmentDirTest, OffKeepsSegmentDirAsItIs) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  if (FilePageSize(dir.path()) >= kChunk) GTEST_SKIP() << "/dev/shm is huge";
  auto d = SegmentDir::Open(dir.path(), /*huge_pages=*/false, "off");
  EXPECT_EQ(d->path(), dir.path());
  EXPECT_FALSE(d->huge());
  EXPECT_FALSE(d->mounted());
  EXPECT_NE(d->why_not_huge().find("off"), std::string::npos);
}

// A mount that fails (here: options tmpfs refuses; without CAP_SYS_ADMIN,
// EPERM) leaves the segments in segment_dir, which still works, and says
// why.
TEST(SegmentDirTest, AFailedMountFallsBackToSegmentDirWithTheReason) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  if (FilePageSize(dir.path()) >= kChunk) GTEST_SKIP() << "/dev/shm is huge";
  auto d = SegmentDir::Open(dir.path(), /*huge_pages=*/true, "bad",
                            "huge=no_such_setting");
  EXPECT_EQ(d->path(), dir.path());
  EXPECT_FALSE(d->huge());
  EXPECT_FALSE(d->mounted());
  EXPECT_NE(d->why_not_huge().find("cannot mount"), std::string::npos)
      << d->why_not_huge();
  // No mount point left behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  auto seg = ShmSegment::Create("seg", 4 * kChunk, d->path(), false);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  std::memcpy((*seg)->data() + kChunk, "works", 5);
  EXPECT_EQ(std::memcmp((*seg)->data() + kChunk, "works", 5), 0);
}

// On the node's huge tmpfs a reader's view maps what it touched and
// nothing else, a 2 MiB page per page-table entry (ShmemPmdMapped): no
// 4 KiB entries to set up at a first read. The mount goes with the
// SegmentDir.
TEST(SegmentDirTest, MountsAHugeTmpfsWhereAReaderMapsWholeHugePages) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto d = SegmentDir::Open(dir.path(), /*huge_pages=*/true, "node/0");
  if (!d->mounted())
    GTEST_SKIP() << "no huge mount here: " << d->why_not_huge();
  const std::string mnt = d->path();
  EXPECT_TRUE(d->huge());
  EXPECT_EQ(mnt.rfind(dir.path() + "/kvpool-huge-", 0), 0u) << mnt;
  EXPECT_EQ(mnt.find("node/0"), std::string::npos);  // one path component
  EXPECT_TRUE(Mounted(mnt));
  EXPECT_EQ(FilePageSize(mnt), kChunk);
  {
    auto owner = ShmSegment::Create("seg", 4 * kChunk + 4096, mnt, false);
    ASSERT_TRUE(owner.ok()) << owner.status().ToString();
    EXPECT_EQ((*owner)->block_size(), kChunk);
    const std::string path = (*owner)->path();
    auto peer = ShmSegment::Open(path, 4 * kChunk + 4096);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    EXPECT_EQ(MappedBytes(path, "Rss:"), 0u);
    (*peer)->Prepare(kChunk + 10, 100);  // inside chunk 1
    EXPECT_EQ(MappedBytes(path, "Rss:"), kChunk);
    EXPECT_EQ(MappedBytes(path, "ShmemPmdMapped:"), kChunk);
    (*peer)->Prepare(0, 3 * kChunk);  // chunks 0-2: 0 and 2 are new
    EXPECT_EQ(MappedBytes(path, "Rss:"), 3 * kChunk);
    EXPECT_EQ(MappedBytes(path, "ShmemPmdMapped:"), 3 * kChunk);
    std::memcpy((*owner)->data() + 2 * kChunk, "huge", 4);
    EXPECT_EQ(std::memcmp((*peer)->data() + 2 * kChunk, "huge", 4), 0);
  }
  d.reset();
  EXPECT_FALSE(Mounted(mnt));
  EXPECT_FALSE(Exists(mnt));
}

// A mount point of this very pid left from before (a container's node
// restarted as the same pid on a kept /dev/shm, the old mount still
// there): it is nobody's now, and the node takes it over instead of
// falling back to 4 KiB pages.
TEST(SegmentDirTest, ALeftoverMountPointOfThisPidIsReplaced) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string mnt =
      dir.path() + "/kvpool-huge-" + std::to_string(::getpid()) + "-again";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  if (::mount("kvpool", mnt.c_str(), "tmpfs", 0, "") != 0) {
    GTEST_SKIP() << "cannot mount here: " << std::strerror(errno);
  }
  auto d = SegmentDir::Open(dir.path(), /*huge_pages=*/true, "again");
  EXPECT_TRUE(d->mounted()) << d->why_not_huge();
  EXPECT_EQ(d->path(), mnt);
  EXPECT_EQ(FilePageSize(mnt), kChunk);
  d.reset();
  EXPECT_FALSE(Mounted(mnt));
  EXPECT_FALSE(Exists(mnt));
}

// A node killed with SIGKILL leaves its mount (and the memory of the files
// in it); the next node on the same segment_dir removes it, and the
// segment files of dead processes, but no one else's.
TEST(SegmentDirTest, RemovesTheMountAndFilesOfADeadNode) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const pid_t child = ::fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = std::to_string(child);
  const std::string mnt = dir.path() + "/kvpool-huge-" + dead + "-n0";
  const std::string file = dir.path() + "/kvpool-" + dead + "-n0";
  const std::string live =
      dir.path() + "/kvpool-huge-" + std::to_string(::getpid()) + "-n1";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(live.c_str(), 0755), 0);
  std::ofstream(file) << "x";
  const bool mounted = ::mount("kvpool", mnt.c_str(), "tmpfs", 0, "") == 0;
  if (mounted) std::ofstream(mnt + "/kvpool-" + dead + "-n0") << "x";
  auto d = SegmentDir::Open(dir.path(), /*huge_pages=*/false, "n2");
  EXPECT_FALSE(Exists(mnt));
  EXPECT_FALSE(Mounted(mnt));
  EXPECT_FALSE(Exists(file));
  EXPECT_TRUE(Exists(live));
  if (!mounted) GTEST_SKIP() << "no mount here: only the empty dir tested";
}

}  // namespace
}  // namespace kvpool
