#include "transport/shm_segment.h"
#include "transport/local_segments.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvpool {
namespace {

// Unique per process and test so parallel runs never collide on /dev/shm.
std::string UniqueName() {
  static std::atomic<int> counter{0};
  return "kvpool_shm_test_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter.fetch_add(1));
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Resident bytes of this process's mapping that starts at `base`, from
// /proc/self/smaps: with MAP_POPULATE every page is mapped before first use.
// Returns -1 if the mapping is not found.
int64_t ResidentBytes(const void* base) {
  char start[32];
  std::snprintf(start, sizeof(start), "%lx-",
                reinterpret_cast<unsigned long>(base));
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(start, 0) == 0) {
      in_mapping = true;
    } else if (in_mapping && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      int64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

TEST(ShmSegmentTest, CreateMapsAFileOfTheRequestedSize) {
  const std::string name = UniqueName();
  auto seg = ShmSegment::Create(name, 1 << 20);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ((*seg)->path(), "/dev/shm/" + name);
  EXPECT_EQ((*seg)->size(), 1u << 20);
  ASSERT_NE((*seg)->data(), nullptr);
  // The memory is allocated and mapped before anything touched it.
  struct stat allocated {};
  ASSERT_EQ(::stat((*seg)->path().c_str(), &allocated), 0);
  EXPECT_GE(allocated.st_blocks * 512, 1 << 20);
  EXPECT_EQ(ResidentBytes((*seg)->data()), 1 << 20);
  // Fresh tmpfs pages read as zero and the whole range is writable.
  EXPECT_EQ((*seg)->data()[0], 0);
  EXPECT_EQ((*seg)->data()[(1 << 20) - 1], 0);
  std::memset((*seg)->data(), 0xAB, 1 << 20);
  struct stat st {};
  ASSERT_EQ(::stat((*seg)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A directory of its own for one test, removed with what is left in it.
class TempDir {
 public:
  explicit TempDir(const std::string& parent) {
    std::string pattern = parent + "/kvpool_shm_dir_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ShmSegmentTest, CreateInAnotherDirectory) {
  TempDir dir("/dev/shm");
  ASSERT_FALSE(dir.path().empty());
  const std::string name = UniqueName();
  {
    auto seg = ShmSegment::Create(name, 1 << 20, dir.path());
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    EXPECT_EQ((*seg)->path(), dir.path() + "/" + name);
    EXPECT_TRUE(FileExists((*seg)->path()));
    EXPECT_EQ((*seg)->block_size(), uint64_t(::sysconf(_SC_PAGESIZE)));
    // The same path opens the same bytes (a same-host client's view).
    (*seg)->data()[7] = 42;
    auto opened = ShmSegment::Open((*seg)->path(), 1 << 20);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ((*opened)->data()[7], 42);
  }
  EXPECT_FALSE(FileExists(dir.path() + "/" + name));  // the owner unlinked it
  EXPECT_EQ(ShmSegment::Create(name, 4096, "relative/dir").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::Create(name, 4096, "").code(),
            ErrorCode::INVALID_PARAMS);
  auto missing = ShmSegment::Create(name, 4096, dir.path() + "/absent");
  EXPECT_EQ(missing.code(), ErrorCode::INTERNAL_ERROR);
  EXPECT_NE(missing.status().message().find("cannot create"), std::string::npos)
      << missing.status().message();
}

// What segment_dir is for: a tmpfs mounted huge=always backs the segment
// with 2 MiB pages (one disk request per 1 MiB O_DIRECT read into it).
TEST(ShmSegmentTest, AHugeTmpfsGivesTheSegmentHugePages) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  TempDir dir("/tmp");
  ASSERT_FALSE(dir.path().empty());
  if (::mount("kvpool-test-huge", dir.path().c_str(), "tmpfs", 0,
              "huge=always,size=16m,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a huge tmpfs here: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{dir.path()};
  auto seg = ShmSegment::Create(UniqueName(), 8 << 20, dir.path());
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ((*seg)->block_size(), 2u << 20);
  // Its bytes work as any segment's do.
  std::memset((*seg)->data(), 0x5A, 8 << 20);
  EXPECT_EQ((*seg)->data()[(8 << 20) - 1], 0x5A);
}

TEST(ShmSegmentTest, CreateRefusesAnExistingName) {
  const std::string name = UniqueName();
  auto first = ShmSegment::Create(name, 4096);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = ShmSegment::Create(name, 4096);
  EXPECT_EQ(second.code(), ErrorCode::SEGMENT_ALREADY_EXISTS);
  EXPECT_NE(second.status().message().find("File exists"), std::string::npos)
      << second.status().message();
  // The failed Create must not have removed the first one's file.
  EXPECT_TRUE(FileExists((*first)->path()));
}

TEST(ShmSegmentTest, CreateRejectsBadArguments) {
  EXPECT_EQ(ShmSegment::Create(UniqueName(), 0).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::Create("", 4096).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::Create("..", 4096).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::Create("a/b", 4096).code(), ErrorCode::INVALID_PARAMS);
}

TEST(ShmSegmentTest, CreateLargerThanDevShmFailsUpFront) {
  // tmpfs refuses at once an allocation larger than the whole file system,
  // without allocating anything first, so this cannot starve other tests.
  // (A merely full /dev/shm fails the same way but is not reproducible.)
  struct statfs fs {};
  ASSERT_EQ(::statfs("/dev/shm", &fs), 0);
  if (fs.f_type != TMPFS_MAGIC || fs.f_blocks == 0) {
    GTEST_SKIP() << "/dev/shm is not a size-limited tmpfs";
  }
  const uint64_t total = uint64_t{fs.f_blocks} * fs.f_bsize;
  const std::string name = UniqueName();
  auto seg = ShmSegment::Create(name, total + (4 << 20));
  EXPECT_EQ(seg.code(), ErrorCode::INTERNAL_ERROR);
  EXPECT_NE(seg.status().message().find("No space left on device"),
            std::string::npos)
      << seg.status().message();
  EXPECT_NE(seg.status().message().find("/dev/shm/" + name), std::string::npos)
      << seg.status().message();
  EXPECT_FALSE(FileExists("/dev/shm/" + name));
}

TEST(ShmSegmentTest, OpenSharesTheCreatorsBytes) {
  auto owner = ShmSegment::Create(UniqueName(), 64 << 10);
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  auto peer = ShmSegment::Open((*owner)->path(), 64 << 10);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  // Lazily: no page is mapped in the opener until a copy prepares it.
  EXPECT_EQ(ResidentBytes((*peer)->data()), 0);
  EXPECT_NE((*peer)->data(), (*owner)->data());
  EXPECT_EQ((*peer)->size(), 64u << 10);
  EXPECT_EQ((*peer)->path(), (*owner)->path());

  std::memcpy((*owner)->data() + 100, "hello", 5);
  EXPECT_EQ(std::memcmp((*peer)->data() + 100, "hello", 5), 0);
  std::memcpy((*peer)->data() + 60000, "world", 5);
  EXPECT_EQ(std::memcmp((*owner)->data() + 60000, "world", 5), 0);
}

// Prepare maps the chunks a range touches, once, and nothing else: a
// client's first copy no longer pays for the whole segment.
TEST(ShmSegmentTest, PrepareMapsOnlyTheChunksARangeTouches) {
  constexpr uint64_t kChunk = ShmSegment::kPrepareChunk;
  auto owner = ShmSegment::Create(UniqueName(), 4 * kChunk + 4096);
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  auto peer = ShmSegment::Open((*owner)->path(), 4 * kChunk + 4096);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_EQ(ResidentBytes((*peer)->data()), 0);
  // Resident: the chunks prepared, plus at most the kernel's fault-around
  // window (64 KiB by default) past them; never the whole segment.
  auto resident_between = [&](uint64_t lo, uint64_t hi) {
    const int64_t r = ResidentBytes((*peer)->data());
    EXPECT_GE(r, int64_t(lo));
    EXPECT_LT(r, int64_t(hi));
  };
  (*peer)->Prepare(kChunk + 10, 100);  // inside chunk 1
  resident_between(kChunk, 2 * kChunk);
  (*peer)->Prepare(kChunk - 1, 2);  // chunks 0 and 1: only 0 is new
  resident_between(2 * kChunk, 3 * kChunk);
  (*peer)->Prepare(4 * kChunk, 1 << 30);  // the short last chunk, clipped
  resident_between(2 * kChunk + 4096, 3 * kChunk);
  const int64_t before = ResidentBytes((*peer)->data());
  (*peer)->Prepare(0, 0);
  (*peer)->Prepare(5 * kChunk, 10);  // past the end: nothing
  (*peer)->Prepare(kChunk, 10);      // prepared already: nothing
  EXPECT_EQ(ResidentBytes((*peer)->data()), before);
  // The bytes are the creator's, prepared or not.
  std::memcpy((*owner)->data() + 3 * kChunk, "lazy", 4);
  EXPECT_EQ(std::memcmp((*peer)->data() + 3 * kChunk, "lazy", 4), 0);
}

TEST(ShmSegmentTest, OpenRejectsASizeMismatch) {
  auto owner = ShmSegment::Create(UniqueName(), 8192);
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  auto smaller = ShmSegment::Open((*owner)->path(), 4096);
  EXPECT_EQ(smaller.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(smaller.status().message().find("8192"), std::string::npos)
      << smaller.status().message();
  EXPECT_EQ(ShmSegment::Open((*owner)->path(), 16384).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::Open((*owner)->path(), 0).code(),
            ErrorCode::INVALID_PARAMS);
}

TEST(ShmSegmentTest, OpenOfAMissingFileFails) {
  auto seg = ShmSegment::Open("/dev/shm/" + UniqueName(), 4096);
  EXPECT_EQ(seg.code(), ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_NE(seg.status().message().find("No such file"), std::string::npos)
      << seg.status().message();
}

TEST(ShmSegmentTest, OwnerUnlinksOnDestructionOpenerDoesNot) {
  auto owner = ShmSegment::Create(UniqueName(), 4096);
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  const std::string path = (*owner)->path();
  {
    auto peer = ShmSegment::Open(path, 4096);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  }
  EXPECT_TRUE(FileExists(path));

  auto peer = ShmSegment::Open(path, 4096);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  (*peer)->data()[7] = 42;
  owner.value().reset();
  EXPECT_FALSE(FileExists(path));
  // A mapping that is still open keeps working after the unlink.
  EXPECT_EQ((*peer)->data()[7], 42);
  EXPECT_EQ(ShmSegment::Open(path, 4096).code(), ErrorCode::SEGMENT_NOT_FOUND);
}

// A caller's file region (Mooncake's mount_segment): the mapping shares the
// file's bytes at the offset, and the file stays the caller's.
TEST(ShmSegmentTest, OpenRangeMapsARegionOfACallersFile) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto file = ShmSegment::Create(UniqueName(), 4 * page);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::memset((*file)->data() + page, 'x', page);
  {
    auto region = ShmSegment::OpenRange((*file)->path(), page, page + 100);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    EXPECT_EQ((*region)->size(), uint64_t(page) + 100);
    EXPECT_EQ((*region)->file_offset(), uint64_t(page));
    EXPECT_EQ((*region)->data()[0], 'x');
    (*region)->data()[page] = 'y';  // the file's byte at 2 * page
    EXPECT_EQ((*file)->data()[2 * page], 'y');
    // Same file, overlapping bytes: they share memory.
    EXPECT_TRUE((*region)->Overlaps(**file));
    auto after = ShmSegment::OpenRange((*file)->path(), 3 * page, page);
    ASSERT_TRUE(after.ok());
    EXPECT_FALSE((*region)->Overlaps(**after));
    EXPECT_TRUE((*after)->Overlaps(**file));
  }
  EXPECT_TRUE(FileExists((*file)->path()));  // never removed
}

TEST(ShmSegmentTest, OpenRangeRefusesWhatItCannotMapSafely) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto file = ShmSegment::Create(UniqueName(), 2 * page);
  ASSERT_TRUE(file.ok());
  const std::string path = (*file)->path();
  EXPECT_EQ(ShmSegment::OpenRange(path, 0, 0).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::OpenRange(path, 100, page).code(),
            ErrorCode::INVALID_PARAMS);  // offset not page aligned
  EXPECT_EQ(ShmSegment::OpenRange(path, page, page + 1).code(),
            ErrorCode::INVALID_PARAMS);  // past the end: would fault
  EXPECT_EQ(ShmSegment::OpenRange(path, 4 * page, 1).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::OpenRange(path, page, ~uint64_t{0}).code(),
            ErrorCode::INVALID_PARAMS);  // overflow
  EXPECT_EQ(ShmSegment::OpenRange("", 0, page).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ShmSegment::OpenRange("/dev/shm", 0, page).code(),
            ErrorCode::INVALID_PARAMS);  // not a regular file
  EXPECT_EQ(ShmSegment::OpenRange(path + "-missing", 0, page).code(),
            ErrorCode::FILE_NOT_FOUND);
  EXPECT_TRUE(ShmSegment::OpenRange(path, page, page).ok());
}

// Unlink removes a created segment's name at once; the mapping stays valid
// for its holders and the name can be created again (a node restarted in
// the same process while a client still holds the old mapping).
TEST(ShmSegmentTest, UnlinkFreesTheNameAndKeepsTheMapping) {
  const std::string name = UniqueName();
  auto first = ShmSegment::Create(name, 4096);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string path = (*first)->path();
  (*first)->data()[3] = 7;
  (*first)->Unlink();
  EXPECT_FALSE(FileExists(path));
  EXPECT_EQ((*first)->data()[3], 7);
  auto second = ShmSegment::Create(name, 4096);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  // The first one's destructor must not remove the second one's file.
  first.value().reset();
  EXPECT_TRUE(FileExists(path));
}

// Issue #41, hole 1: a same-host client must learn that the node owning a
// segment died (kill -9) before it acknowledges a write copied into it.
TEST(ShmSegmentTest, AViewerSeesItsOwnerDieOrLetGo) {
  const std::string name = UniqueName();
  const std::string path = "/dev/shm/" + name;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the node: creates, says so, waits to be killed
    auto seg = ShmSegment::Create(name, 4096);
    const char c = seg.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  auto view = ShmSegment::Open(path, 4096);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  auto second_view = ShmSegment::Open(path, 4096);
  ASSERT_TRUE(second_view.ok());
  EXPECT_TRUE(view.value()->OwnerAlive());
  // Asking has no side effect another viewer could see.
  EXPECT_TRUE(second_view.value()->OwnerAlive());
  EXPECT_TRUE(view.value()->OwnerAlive());
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // The file is still there (nothing unlinked it) and still maps, but
  // nobody owns it.
  EXPECT_TRUE(FileExists(path));
  EXPECT_FALSE(view.value()->OwnerAlive());
  EXPECT_FALSE(second_view.value()->OwnerAlive());
  ::unlink(path.c_str());

  // In one process: the creator's Unlink (a node stopping) ends ownership.
  auto own = ShmSegment::Create(UniqueName(), 4096);
  ASSERT_TRUE(own.ok());
  auto v = ShmSegment::Open(own.value()->path(), 4096);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(own.value()->OwnerAlive());
  EXPECT_TRUE(v.value()->OwnerAlive());
  own.value()->Unlink();
  EXPECT_FALSE(own.value()->OwnerAlive());
  EXPECT_FALSE(v.value()->OwnerAlive());
}

TEST(LocalSegmentsTest, FindsWhatIsPublishedWhileItLives) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan builds keep a mapping per client (local_segments.cc)";
#endif
  auto made = ShmSegment::Create(UniqueName(), 8192);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::shared_ptr<ShmSegment> seg = std::move(made.value());
  const std::string path = seg->path();
  EXPECT_EQ(FindLocalSegment(path, 8192), nullptr);  // not published yet
  PublishLocalSegment(seg);
  EXPECT_EQ(FindLocalSegment(path, 8192).get(), seg.get());
  // Another size at that path is not this segment: the caller maps the
  // file itself (and Open refuses the mismatch, as before).
  EXPECT_EQ(FindLocalSegment(path, 4096), nullptr);
  EXPECT_EQ(FindLocalSegment(path + "x", 8192), nullptr);
  // What a finder holds stays mapped after the owner lets go.
  auto held = FindLocalSegment(path, 8192);
  held->data()[0] = 9;
  WithdrawLocalSegment(seg.get());
  EXPECT_EQ(FindLocalSegment(path, 8192), nullptr);
  seg.reset();
  EXPECT_EQ(held->data()[0], 9);
  // A published segment that died without being withdrawn is not found.
  auto other = ShmSegment::Create(UniqueName(), 4096);
  ASSERT_TRUE(other.ok());
  std::shared_ptr<ShmSegment> gone = std::move(other.value());
  const std::string gone_path = gone->path();
  PublishLocalSegment(gone);
  gone.reset();
  EXPECT_EQ(FindLocalSegment(gone_path, 4096), nullptr);
}

TEST(LocalSegmentsTest, WithdrawingAnOldSegmentKeepsItsSuccessor) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan builds keep a mapping per client (local_segments.cc)";
#endif
  const std::string name = UniqueName();
  auto a = ShmSegment::Create(name, 4096);
  ASSERT_TRUE(a.ok());
  std::shared_ptr<ShmSegment> old_seg = std::move(a.value());
  PublishLocalSegment(old_seg);
  old_seg->Unlink();
  auto b = ShmSegment::Create(name, 4096);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::shared_ptr<ShmSegment> new_seg = std::move(b.value());
  PublishLocalSegment(new_seg);
  WithdrawLocalSegment(old_seg.get());
  EXPECT_EQ(FindLocalSegment(new_seg->path(), 4096).get(), new_seg.get());
  WithdrawLocalSegment(new_seg.get());
}

// Without populate, Create leaves every page to its first touch (the node
// populates in the background); Populate maps them all and changes no byte.
TEST(ShmSegmentTest, PopulateMapsEveryPageAndKeepsTheBytes) {
  constexpr uint64_t kSize = 8ull << 20;
  auto seg = ShmSegment::Create(UniqueName(), kSize, "/dev/shm",
                                /*populate=*/false);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  ShmSegment& s = *seg.value();
  std::memcpy(s.data() + 4096 * 3 + 7, "kept", 4);
  EXPECT_LT(ResidentBytes(s.data()), int64_t{1} << 20);
  ASSERT_TRUE(s.Populate(0, kSize).ok());
  EXPECT_EQ(ResidentBytes(s.data()), int64_t(kSize));
  EXPECT_EQ(std::memcmp(s.data() + 4096 * 3 + 7, "kept", 4), 0);
  EXPECT_EQ(s.data()[kSize - 1], 0);
  EXPECT_EQ(s.Populate(kSize - 4096, 8192).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(s.Populate(kSize, 0).ok());
}

TEST(ShmSegmentTest, PopulateOfAnUnalignedRangeCoversItsPages) {
  constexpr uint64_t kSize = 1ull << 20;
  auto seg = ShmSegment::Create(UniqueName(), kSize, "/dev/shm",
                                /*populate=*/false);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  ASSERT_TRUE(seg.value()->Populate(4096 + 100, 3 * 4096).ok());
  // Pages 1 to 4: the range starts inside page 1 and ends inside page 4.
  EXPECT_EQ(ResidentBytes(seg.value()->data()), 4 * 4096);
}

}  // namespace
}  // namespace kvpool
