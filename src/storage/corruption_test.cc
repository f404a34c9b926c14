// Damage on disk and failing I/O: a damaged record is a clean miss, never
// wrong bytes, and a failed write never leaves the index pointing at it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "storage/file_storage.h"
#include "storage/storage_test_util.h"

namespace kvpool::storage {
namespace {

using testing::FlipByte;
using testing::HandHeader;
using testing::HandHeaderBlock;
using testing::Key;
using testing::Pattern;
using testing::StorageTest;

class CorruptionTest : public StorageTest {
 protected:
  // Three records in seg-000001.log; returns the offset of "b".
  uint64_t WriteThree(const FileStorageConfig& c) {
    auto fs = MustOpen(c);
    EXPECT_NE(fs, nullptr);
    EXPECT_TRUE(Put(*fs, "a", Pattern(6000, 1)).ok());
    EXPECT_TRUE(Put(*fs, "b", Pattern(50000, 2)).ok());
    EXPECT_TRUE(Put(*fs, "c", Pattern(7000, 3)).ok());
    return RecordSpan(6000);
  }
  void ExpectNeighboursIntact(FileStorage& fs) {
    EXPECT_TRUE(*Get(fs, "a") == Pattern(6000, 1));
    EXPECT_TRUE(*Get(fs, "c") == Pattern(7000, 3));
  }
};

// Bytes to damage, relative to a record: inside the value, in the fixed
// header fields, in the key, and in the header block's zero padding.
const uint64_t kDamageSpots[] = {kBlockSize + 30000, 40, kFixedHeaderSize + 1,
                                 kBlockSize - 1};

TEST_P(CorruptionTest, DamageFoundAtReadTimeIsACleanMiss) {
  for (uint64_t spot : kDamageSpots) {
    SCOPED_TRACE(fmt::format("damage at +{}", spot));
    testing::TempDir dir;
    FileStorageConfig c = Config();
    c.ssd_dir = dir.path();
    const uint64_t b = WriteThree(c);
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_EQ(fs->GetStats().records, 3u);
    FlipByte(dir.path() + "/" + SegmentFileName(1), b + spot);
    for (bool unaligned : {false, true}) {
      auto got = Get(*fs, "b", unaligned);
      EXPECT_EQ(got.code(), ErrorCode::OBJECT_NOT_FOUND);
    }
    // The first read found it, reported it and dropped the key.
    EXPECT_EQ(fs->GetStats().corrupt_reads, 1u);
    EXPECT_EQ(fs->LookupSize("t", "b").code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(fs->GetStats().records, 2u);
    ExpectNeighboursIntact(*fs);
  }
}

TEST_P(CorruptionTest, ChecksumMessageSaysWhy) {
  const FileStorageConfig c = Config();
  const uint64_t b = WriteThree(c);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  FlipByte(SegPath(1), b + kBlockSize + 7);
  AlignedBuffer buf(50000);
  auto r = fs->BatchRead({ReadItem{"t", "b", buf.data(), buf.size()}})[0];
  EXPECT_EQ(r.code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos)
      << r.status().message();
}

// In a batch the values are verified by the verify pool (or, with no pool
// threads, by the reading thread): a damaged one is still a clean miss and
// its neighbours in the batch are read whole.
TEST_P(CorruptionTest, DamageInABatchIsFoundWithAndWithoutVerifyThreads) {
  for (unsigned threads : {0u, 1u, 3u}) {
    SCOPED_TRACE(fmt::format("ssd_verify_threads={}", threads));
    testing::TempDir dir;
    FileStorageConfig c = Config();
    c.ssd_dir = dir.path();
    c.ssd_verify_threads = threads;
    const uint64_t b = WriteThree(c);
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    FlipByte(dir.path() + "/" + SegmentFileName(1), b + kBlockSize + 4000);
    AlignedBuffer bufs[3] = {AlignedBuffer(6000), AlignedBuffer(50000),
                             AlignedBuffer(7000)};
    auto r = fs->BatchRead({ReadItem{"t", "a", bufs[0].data(), 6000},
                            ReadItem{"t", "b", bufs[1].data(), 50000},
                            ReadItem{"t", "c", bufs[2].data(), 7000}});
    ASSERT_EQ(r.size(), 3u);
    ASSERT_TRUE(r[0].ok());
    EXPECT_EQ(*r[0], 6000u);
    EXPECT_EQ(r[1].code(), ErrorCode::OBJECT_NOT_FOUND);
    ASSERT_TRUE(r[2].ok());
    EXPECT_EQ(*r[2], 7000u);
    EXPECT_TRUE(std::equal(bufs[0].data(), bufs[0].data() + 6000,
                           Pattern(6000, 1).begin()));
    EXPECT_TRUE(std::equal(bufs[2].data(), bufs[2].data() + 7000,
                           Pattern(7000, 3).begin()));
    EXPECT_EQ(fs->GetStats().corrupt_reads, 1u);
  }
}

TEST_P(CorruptionTest, DamageFoundAtRestartIsSkippedAndCounted) {
  for (uint64_t spot : kDamageSpots) {
    SCOPED_TRACE(fmt::format("damage at +{}", spot));
    testing::TempDir dir;
    FileStorageConfig c = Config();
    c.ssd_dir = dir.path();
    const uint64_t b = WriteThree(c);
    FlipByte(dir.path() + "/" + SegmentFileName(1), b + spot);
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
    EXPECT_EQ(fs->GetStats().records, 2u);
    EXPECT_EQ(Get(*fs, "b").code(), ErrorCode::OBJECT_NOT_FOUND);
    ExpectNeighboursIntact(*fs);
  }
}

TEST_P(CorruptionTest, WithoutScanVerificationTheReadStillCatchesIt) {
  FileStorageConfig c = Config();
  c.ssd_verify_on_open = false;
  const uint64_t b = WriteThree(c);
  FlipByte(SegPath(1), b + kBlockSize + 12345);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);  // header fine, value unread
  EXPECT_EQ(fs->GetStats().records, 3u);
  EXPECT_EQ(Get(*fs, "b").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().corrupt_reads, 1u);
  ExpectNeighboursIntact(*fs);
}

TEST_P(CorruptionTest, GarbageOverARecordIsSkippedUpToTheNextOne) {
  const FileStorageConfig c = Config();
  const uint64_t b = WriteThree(c);
  // Overwrite all of "b" (header and value) with noise.
  const auto noise = Pattern(RecordSpan(50000), 99);
  int fd = ::open(SegPath(1).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, noise.data(), noise.size(), off_t(b)),
            ssize_t(noise.size()));
  ::close(fd);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->GetStats().records, 2u);
  ExpectNeighboursIntact(*fs);
}

// Found by fuzz_ssd_record: a header with a valid checksum whose value_len
// is near 2^64 made RecordSpan wrap to one block, so the scan took the
// record as fitting and hashed 2^64 bytes (SEGV). It is a torn tail now.
TEST_P(CorruptionTest, HugeValueLengthIsATornTailNotARead) {
  const FileStorageConfig c = Config();
  const uint64_t b = WriteThree(c);
  // Replace "b"'s header with a valid one announcing 2^64 - 6 bytes.
  HandHeader h;
  h.file_id = 1;
  h.offset = b;
  h.seq = 2;
  h.value_len = ~uint64_t{0} - 5;
  h.tenant = "t";
  h.key = "b";
  const auto block = HandHeaderBlock(h);
  int fd = ::open(SegPath(1).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, block.data(), block.size(), off_t(b)),
            ssize_t(block.size()));
  ::close(fd);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->LookupSize("t", "b").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(*Get(*fs, "a") == Pattern(6000, 1));
}

// A value that holds the image of a real record (here: the segment file
// itself) must not be taken for records when its own header is damaged.
TEST_P(CorruptionTest, RecordImagesInsideAValueAreNotRecords) {
  const FileStorageConfig c = Config();
  WriteThree(c);
  std::vector<uint8_t> image(testing::FileSize(SegPath(1)));
  {
    int fd = ::open(SegPath(1).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pread(fd, image.data(), image.size(), 0),
              ssize_t(image.size()));
    ::close(fd);
  }
  uint64_t image_at = 0;
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "image", image).ok());
    // The new file's first record.
    image_at = 0;
  }
  FlipByte(SegPath(2), image_at + 20);  // the image's own header
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->GetStats().records, 3u);  // a, b, c; not their copies
  ExpectNeighboursIntact(*fs);
}

TEST_P(CorruptionTest, FailedWriteLeavesTheIndexConsistent) {
  for (int err : {EIO, ENOSPC}) {
    SCOPED_TRACE(err);
    testing::TempDir dir;
    FileStorageConfig c = Config();
    c.ssd_dir = dir.path();
    auto faults = InjectFaults(&c);
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "k", Pattern(9000, 1)).ok());
    faults->FailWrite(err);
    Status st = Put(*fs, "k", Pattern(9000, 2));
    EXPECT_EQ(st.code(), ErrorCode::FILE_WRITE_FAIL);
    if (err == ENOSPC) {
      EXPECT_NE(st.message().find("disk full"), std::string::npos)
          << st.message();
    }
    faults->FailWrite(err);
    EXPECT_EQ(Put(*fs, "fresh", Pattern(9000, 3)).code(),
              ErrorCode::FILE_WRITE_FAIL);
    EXPECT_EQ(fs->GetStats().write_errors, 2u);
    // The old value of "k" stands; "fresh" was never indexed.
    EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 1));
    EXPECT_EQ(fs->LookupSize("t", "fresh").code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(fs->GetStats().records, 1u);
    EXPECT_EQ(fs->GetStats().bytes_live, RecordSpan(9000));
    // Later writes work, and a restart agrees with the index.
    ASSERT_TRUE(Put(*fs, "fresh", Pattern(9000, 4)).ok());
    fs.reset();
    fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().records, 2u);
    EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 1));
    EXPECT_TRUE(*Get(*fs, "fresh") == Pattern(9000, 4));
  }
}

TEST_P(CorruptionTest, TornWriteIsAnErrorAndSkippedAtRestart) {
  FileStorageConfig c = Config();
  auto faults = InjectFaults(&c);
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "a", Pattern(9000, 1)).ok());
    // The header and one block of the value land; the rest does not.
    faults->TearWrite(2 * kBlockSize);
    Status st = Put(*fs, "torn", Pattern(30000, 2));
    EXPECT_EQ(st.code(), ErrorCode::FILE_WRITE_FAIL);
    EXPECT_NE(st.message().find("short"), std::string::npos) << st.message();
    EXPECT_EQ(fs->LookupSize("t", "torn").code(), ErrorCode::OBJECT_NOT_FOUND);
    ASSERT_TRUE(Put(*fs, "c", Pattern(9000, 3)).ok());
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->GetStats().records, 2u);
  EXPECT_EQ(fs->LookupSize("t", "torn").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(*Get(*fs, "a") == Pattern(9000, 1));
  EXPECT_TRUE(*Get(*fs, "c") == Pattern(9000, 3));
}

TEST_P(CorruptionTest, ReadErrorIsReportedAndTheKeyKept) {
  FileStorageConfig c = Config();
  auto faults = InjectFaults(&c);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(Put(*fs, "k", Pattern(9000, 1)).ok());
  faults->FailRead(EIO);
  auto r = Get(*fs, "k");
  EXPECT_EQ(r.code(), ErrorCode::FILE_READ_FAIL);
  EXPECT_EQ(fs->GetStats().read_errors, 1u);
  // An I/O error is not damage: the key stays and the next read works.
  EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 1));
  EXPECT_EQ(fs->GetStats().corrupt_reads, 0u);
}

TEST_P(CorruptionTest, FailedGcWriteKeepsTheOldFile) {
  FileStorageConfig c = Config();
  c.segment_file_size = 64 * 1024;
  auto faults = InjectFaults(&c);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Put(*fs, Key(i), Pattern(8000, i)).ok());
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(fs->Remove("t", Key(i)).ok());
  }
  faults->FailWrite(ENOSPC);  // the copy of k4 out of file 1
  EXPECT_EQ(fs->CollectGarbage().code(), ErrorCode::FILE_WRITE_FAIL);
  EXPECT_TRUE(std::filesystem::exists(SegPath(1)));
  for (int i = 4; i < 10; ++i) {
    EXPECT_TRUE(*Get(*fs, Key(i)) == Pattern(8000, i)) << i;
  }
  ASSERT_TRUE(fs->CollectGarbage().ok());
  EXPECT_FALSE(std::filesystem::exists(SegPath(1)));
  for (int i = 4; i < 10; ++i) {
    EXPECT_TRUE(*Get(*fs, Key(i)) == Pattern(8000, i)) << i;
  }
  fs.reset();
  fs = MustOpen(c);
  EXPECT_EQ(fs->GetStats().records, 6u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u) << "the failed copy is a hole";
}

KVPOOL_STORAGE_BOTH_BACKENDS(CorruptionTest);

}  // namespace
}  // namespace kvpool::storage
