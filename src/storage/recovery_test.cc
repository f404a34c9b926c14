// Restart behaviour: the index rebuilt from the files, torn tails, files
// that hold nothing live, and versions left behind by an interrupted write.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "storage/file_storage.h"
#include "storage/storage_test_util.h"

namespace kvpool::storage {
namespace {

using testing::FileSize;
using testing::HandHeader;
using testing::HandHeaderBlock;
using testing::Key;
using testing::Pattern;
using testing::StorageTest;

class RecoveryTest : public StorageTest {
 protected:
  // Appends a format v1 record, as a store of the previous release wrote
  // it, to segment file `file_id`; returns its offset.
  uint64_t AppendV1Record(uint32_t file_id, std::string_view key,
                          const std::vector<uint8_t>& value, uint64_t seq) {
    const std::string path = SegPath(file_id);
    const uint64_t offset = FileSize(path);
    HandHeader h;
    h.tenant = "t";
    h.key = key;
    h.file_id = file_id;
    h.offset = offset;
    h.seq = seq;
    h.value_len = value.size();
    h.data_checksum = DataChecksum(value.data(), value.size());
    std::vector<uint8_t> rec = HandHeaderBlock(h);
    rec.insert(rec.end(), value.begin(), value.end());
    rec.resize(RecordSpan(value.size()), 0);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(::pwrite(fd, rec.data(), rec.size(), off_t(offset)),
              ssize_t(rec.size()));
    ::fsync(fd);
    ::close(fd);
    return offset;
  }
};

TEST_P(RecoveryTest, RestartRebuildsTheIndex) {
  FileStorageConfig c = Config();
  c.segment_file_size = 256 * 1024;
  std::map<std::string, std::vector<uint8_t>> values;
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    for (int i = 0; i < 100; ++i) {
      const std::string key = Key(i);
      values[key] = Pattern(size_t(i) * 1031 % 70000, i);
      ASSERT_TRUE(Put(*fs, key, values[key]).ok());
    }
    EXPECT_GT(fs->GetStats().files, 1u);
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  const FileStorageStats s = fs->GetStats();
  EXPECT_EQ(s.records, values.size());
  EXPECT_EQ(s.corrupt_skipped, 0u);
  uint64_t live = 0;
  for (const auto& [k, v] : values) live += RecordSpan(v.size());
  EXPECT_EQ(s.bytes_live, live);
  EXPECT_EQ(s.bytes_used, live);
  auto list = fs->List();
  ASSERT_EQ(list.size(), values.size());
  for (const StoredObject& o : list) {
    EXPECT_EQ(o.tenant, "t");
    ASSERT_TRUE(values.count(o.key)) << o.key;
    EXPECT_EQ(o.size, values[o.key].size());
  }
  for (const auto& [k, v] : values) {
    auto got = Get(*fs, k);
    ASSERT_TRUE(got.ok()) << k;
    EXPECT_TRUE(*got == v) << k;
  }
  // New writes go to a new file, after the highest existing one.
  const uint64_t files = s.files;
  ASSERT_TRUE(Put(*fs, "after", Pattern(100, 1)).ok());
  EXPECT_EQ(fs->GetStats().files, files + 1);
}

TEST_P(RecoveryTest, TornTailRecordIsSkipped) {
  const FileStorageConfig c = Config();
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "a", Pattern(10000, 1)).ok());
    ASSERT_TRUE(Put(*fs, "b", Pattern(20000, 2)).ok());
    ASSERT_TRUE(Put(*fs, "c", Pattern(30000, 3)).ok());
  }
  const std::string path = SegPath(1);
  const uint64_t c_offset = RecordSpan(10000) + RecordSpan(20000);
  ASSERT_EQ(FileSize(path), c_offset + RecordSpan(30000));
  // Cut "c" in the middle of its value, at no block boundary.
  ASSERT_EQ(::truncate(path.c_str(), off_t(c_offset + kBlockSize + 12345)), 0);

  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->GetStats().records, 2u);
  EXPECT_EQ(fs->LookupSize("t", "c").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(*Get(*fs, "a") == Pattern(10000, 1));
  EXPECT_TRUE(*Get(*fs, "b") == Pattern(20000, 2));
  // Writing goes on; "c" can be stored again.
  ASSERT_TRUE(Put(*fs, "c", Pattern(30000, 3)).ok());
  EXPECT_TRUE(*Get(*fs, "c") == Pattern(30000, 3));
}

TEST_P(RecoveryTest, TornHeaderBlockIsSkipped) {
  const FileStorageConfig c = Config();
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "a", Pattern(5000, 1)).ok());
    ASSERT_TRUE(Put(*fs, "b", Pattern(5000, 2)).ok());
  }
  ASSERT_EQ(::truncate(SegPath(1).c_str(), off_t(RecordSpan(5000) + 100)), 0);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);
  EXPECT_EQ(fs->GetStats().records, 1u);
  EXPECT_TRUE(*Get(*fs, "a") == Pattern(5000, 1));
}

TEST_P(RecoveryTest, FilesWithNothingLiveAreDeletedAtOpen) {
  FileStorageConfig c = Config();
  c.segment_file_size = 64 * 1024;
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    for (int i = 0; i < 10; ++i) {  // 5 records of 12 KiB per file
      ASSERT_TRUE(Put(*fs, Key(i), Pattern(8000, i)).ok());
    }
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(fs->Remove("t", Key(i)).ok());
    }
  }
  // Empty files (an Open that never wrote) are garbage as well.
  { std::ofstream(SegPath(7)); }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().files, 1u);
  EXPECT_FALSE(std::filesystem::exists(SegPath(1)));
  EXPECT_FALSE(std::filesystem::exists(SegPath(7)));
  EXPECT_EQ(fs->GetStats().records, 5u);
  EXPECT_EQ(fs->GetStats().bytes_used, 5 * RecordSpan(8000));
}

TEST_P(RecoveryTest, OtherFilesInTheDirectoryAreLeftAlone) {
  const FileStorageConfig c = Config();
  { std::ofstream(dir_.path() + "/notes.txt") << "hello"; }
  { std::ofstream(dir_.path() + "/seg-abc.log") << "not a segment"; }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->GetStats().files, 0u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/notes.txt"));
}

// A crash between writing a new version and marking the old one dead
// leaves both on disk (simulated by failing the marking write): the newer
// one wins at Open and the older one is marked dead then.
TEST_P(RecoveryTest, NewestVersionWinsAfterAnInterruptedOverwrite) {
  FileStorageConfig c = Config();
  auto faults = InjectFaults(&c);
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "k", Pattern(7000, 1)).ok());
    faults->FailWrite(EIO,
                      /*skip=*/1);  // the data write passes, the mark fails
    ASSERT_TRUE(Put(*fs, "k", Pattern(9000, 2)).ok());
    EXPECT_EQ(fs->GetStats().write_errors, 1u);
  }
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().records, 1u);
    EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 2));
    // The newest version is then removed; the old one must not come back.
    ASSERT_TRUE(fs->Remove("t", "k").ok());
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->LookupSize("t", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().records, 0u);
}

TEST_P(RecoveryTest, SequenceNumbersContinueAfterRestart) {
  const FileStorageConfig c = Config();
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "old", Pattern(100, 1)).ok());
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(Put(*fs, "new", Pattern(100, 2)).ok());
  std::map<std::string, uint64_t> seq;
  for (const StoredObject& o : fs->List()) seq[o.key] = o.seq;
  EXPECT_LT(seq["old"], seq["new"]);
}

TEST_P(RecoveryTest, UnreadableFileAtOpenIsKeptForLater) {
  FileStorageConfig c = Config();
  auto faults = InjectFaults(&c);
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(Put(*fs, "a", Pattern(5000, 1)).ok());
  }
  faults->FailRead(EIO);  // the scan's first read
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().read_errors, 1u);
    EXPECT_EQ(fs->GetStats().records, 0u);
    EXPECT_TRUE(std::filesystem::exists(SegPath(1)));
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_TRUE(*Get(*fs, "a") == Pattern(5000, 1));
}

// Files of the previous format stay readable, with object version 0, and
// their records survive rewrites, collection, removal and restarts. One has
// names of the full v1 length, which no v2 header can hold.
TEST_P(RecoveryTest, HandWrittenV1RecordsAreReadWithObjectVersionZero) {
  FileStorageConfig c = Config();
  c.ssd_gc_dead_ratio = 0.25;
  const std::string long_key(kMaxTenantPlusKeyV1 - 1, 'L');  // tenant "t"
  const auto va = Pattern(1000, 1), vl = Pattern(3000, 2),
             vb = Pattern(5000, 3);
  { std::ofstream(SegPath(1)); }
  AppendV1Record(1, "a", va, 1);
  AppendV1Record(1, long_key, vl, 2);
  AppendV1Record(1, "b", vb, 3);
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().records, 3u);
    EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
    for (const StoredObject& o : fs->List()) {
      EXPECT_EQ(o.object_version, 0u) << o.key.size();
    }
    EXPECT_EQ(*fs->LookupVersion("t", "a"), 0u);
    EXPECT_EQ(*fs->LookupVersion("t", long_key), 0u);
    EXPECT_TRUE(*Get(*fs, "a") == va);
    EXPECT_TRUE(*Get(*fs, long_key) == vl);
    EXPECT_TRUE(*Get(*fs, "b") == vb);

    // Same bytes, same (zero) version: nothing to do. A new version: stored.
    const uint64_t used = fs->GetStats().bytes_used;
    ASSERT_TRUE(PutVersion(*fs, "a", va, 0).ok());
    EXPECT_EQ(fs->GetStats().bytes_used, used);
    ASSERT_TRUE(PutVersion(*fs, "a", va, 9).ok());
    EXPECT_EQ(*fs->LookupVersion("t", "a"), 9u);
    // The long key can be read and removed, not written again.
    EXPECT_EQ(PutVersion(*fs, long_key, vl, 1).code(),
              ErrorCode::INVALID_PARAMS);

    // The old file is now a quarter dead: collection moves the long-key
    // record (kept in v1) and "b" (now v2) out of it and deletes it.
    ASSERT_TRUE(fs->CollectGarbage().ok());
    EXPECT_EQ(fs->GetStats().gc_records_moved, 2u);
    EXPECT_EQ(fs->GetStats().gc_files_deleted, 1u);
    EXPECT_FALSE(std::filesystem::exists(SegPath(1)));
    EXPECT_TRUE(*Get(*fs, long_key) == vl);
    EXPECT_TRUE(*Get(*fs, "b") == vb);
  }
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().records, 3u);
    EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
    EXPECT_EQ(*fs->LookupVersion("t", "a"), 9u);
    EXPECT_EQ(*fs->LookupVersion("t", long_key), 0u);
    EXPECT_EQ(*fs->LookupVersion("t", "b"), 0u);
    EXPECT_TRUE(*Get(*fs, "a") == va);
    EXPECT_TRUE(*Get(*fs, long_key) == vl);
    EXPECT_TRUE(*Get(*fs, "b") == vb);
    EXPECT_EQ(fs->RemoveIfVersion("t", long_key, 1).code(),
              ErrorCode::OBJECT_NOT_FOUND);
    ASSERT_TRUE(fs->RemoveIfVersion("t", long_key, 0).ok());
  }
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->LookupSize("t", long_key).code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().records, 2u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
}

// A crash while the version of unchanged bytes is updated leaves the old
// version (new record torn) or the new one (old record not marked dead),
// never a mix: the update is a new record, ordered by its seq.
TEST_P(RecoveryTest, InterruptedVersionUpdateLeavesTheOldOrTheNewVersion) {
  FileStorageConfig c = Config();
  auto faults = InjectFaults(&c);
  const auto v = Pattern(10000, 1);
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    ASSERT_TRUE(PutVersion(*fs, "k", v, 1).ok());
    faults->TearWrite(kBlockSize);  // the new header lands, its value not
    EXPECT_EQ(PutVersion(*fs, "k", v, 2).code(), ErrorCode::FILE_WRITE_FAIL);
    EXPECT_EQ(*fs->LookupVersion("t", "k"), 1u);
  }
  {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().corrupt_skipped, 1u);  // the torn record
    EXPECT_EQ(*fs->LookupVersion("t", "k"), 1u);
    EXPECT_TRUE(*Get(*fs, "k") == v);
    faults->FailWrite(EIO, /*skip=*/1);  // the record lands, the mark fails
    ASSERT_TRUE(PutVersion(*fs, "k", v, 2).ok());
    EXPECT_EQ(fs->GetStats().write_errors, 1u);
    EXPECT_EQ(*fs->LookupVersion("t", "k"), 2u);
  }
  for (int restart = 0; restart < 2; ++restart) {
    auto fs = MustOpen(c);
    ASSERT_NE(fs, nullptr);
    EXPECT_EQ(fs->GetStats().records, 1u);
    EXPECT_EQ(*fs->LookupVersion("t", "k"), 2u) << restart;
    EXPECT_TRUE(*Get(*fs, "k") == v);
  }
}

KVPOOL_STORAGE_BOTH_BACKENDS(RecoveryTest);

}  // namespace
}  // namespace kvpool::storage
