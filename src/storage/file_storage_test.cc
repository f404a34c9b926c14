#include "storage/file_storage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "storage/storage_test_util.h"

namespace kvpool::storage {
namespace {

using testing::Key;
using testing::Pattern;
using testing::StorageTest;

class FileStorageTest : public StorageTest {};

TEST_P(FileStorageTest, ReportsItsBackend) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->io_uring_enabled(), GetParam() == SsdIoBackend::kIoUring);
  EXPECT_EQ(fs->GetStats().io_uring_enabled, fs->io_uring_enabled());
}

TEST_P(FileStorageTest, RoundTripOfManySizes) {
  FileStorageConfig c = Config();
  c.segment_file_size = 8ull << 20;
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  // Around a block, a read piece (256 KiB) and 1 and 4 MiB.
  const std::vector<uint64_t> sizes = {0,
                                       1,
                                       100,
                                       4095,
                                       4096,
                                       4097,
                                       8191,
                                       65536,
                                       (256 << 10) - 1,
                                       (256 << 10) + 4097,
                                       (1 << 20) - 1,
                                       1 << 20,
                                       (1 << 20) + 1,
                                       4ull << 20,
                                       (4ull << 20) + 1};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string key = Key(i);
    const auto v = Pattern(sizes[i], i);
    // Odd-numbered values come from an unaligned source (the copying path),
    // even ones from an aligned one (straight from the caller's memory).
    AlignedBuffer src(sizes[i] + kBlockSize);
    uint8_t* p = src.data() + (i % 2 ? 5 : 0);
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    auto st = fs->BatchWrite({WriteItem{"t", key, p, v.size()}})[0];
    ASSERT_TRUE(st.ok()) << sizes[i] << ": " << st.ToString();
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string key = Key(i);
    auto size = fs->LookupSize("t", key);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(*size, sizes[i]);
    for (bool unaligned : {false, true}) {
      auto got = Get(*fs, key, unaligned);
      ASSERT_TRUE(got.ok()) << sizes[i] << ": " << got.status().ToString();
      EXPECT_TRUE(*got == Pattern(sizes[i], i))
          << "size " << sizes[i] << (unaligned ? " unaligned" : " aligned");
    }
  }
  EXPECT_EQ(fs->GetStats().records, sizes.size());
  EXPECT_EQ(fs->GetStats().corrupt_reads, 0u);
}

TEST_P(FileStorageTest, BatchOf64InOneCall) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  std::vector<std::vector<uint8_t>> values;
  std::vector<WriteItem> writes;
  for (int i = 0; i < 64; ++i) values.push_back(Pattern(1000 + i * 777, i));
  for (int i = 0; i < 64; ++i) {
    writes.push_back({"t", Key(i, "b"), values[i].data(), values[i].size()});
  }
  for (const Status& st : fs->BatchWrite(writes)) {
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::vector<AlignedBuffer> bufs;
  std::vector<ReadItem> reads;
  for (int i = 0; i < 64; ++i) {
    bufs.emplace_back(values[i].size());
    reads.push_back({"t", Key(i, "b"), bufs.back().data(), bufs.back().size()});
  }
  reads.push_back({"t", "absent", bufs[0].data(), bufs[0].size()});
  auto results = fs->BatchRead(reads);
  ASSERT_EQ(results.size(), 65u);
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
    ASSERT_EQ(*results[i], values[i].size());
    EXPECT_EQ(std::memcmp(bufs[i].data(), values[i].data(), values[i].size()),
              0)
        << i;
  }
  EXPECT_EQ(results[64].code(), ErrorCode::OBJECT_NOT_FOUND);

  // With `arrived`: each value read is reported once, before the batch
  // returns, by its index; the absent key never.
  std::vector<int> arrived(reads.size(), 0);
  results = fs->BatchRead(reads, [&](size_t i) { ++arrived[i]; });
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(results[i].ok());
    EXPECT_EQ(arrived[i], 1) << i;
  }
  EXPECT_EQ(arrived[64], 0);
}

TEST_P(FileStorageTest, OverwriteSupersedesAndSameBytesAreFree) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(Put(*fs, "k", Pattern(10000, 1)).ok());
  const uint64_t used_once = fs->GetStats().bytes_used;
  ASSERT_TRUE(Put(*fs, "k", Pattern(10000, 1)).ok());
  EXPECT_EQ(fs->GetStats().bytes_used, used_once) << "same bytes rewritten";

  ASSERT_TRUE(Put(*fs, "k", Pattern(5000, 2)).ok());
  auto got = Get(*fs, "k");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == Pattern(5000, 2));
  FileStorageStats s = fs->GetStats();
  EXPECT_EQ(s.records, 1u);
  EXPECT_EQ(s.bytes_live, RecordSpan(5000));
  EXPECT_EQ(s.bytes_used, RecordSpan(10000) + RecordSpan(5000));

  // The superseded version stays dead after a restart.
  fs.reset();
  fs = MustOpen(Config());
  got = Get(*fs, "k");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == Pattern(5000, 2));
  EXPECT_EQ(fs->GetStats().records, 1u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
}

TEST_P(FileStorageTest, ObjectVersionIsStoredListedAndKeptAcrossRestart) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  const std::map<std::string, uint64_t> versions = {
      {"a", 11}, {"b", 0}, {"c", UINT64_MAX}};
  for (const auto& [k, ver] : versions) {
    ASSERT_TRUE(PutVersion(*fs, k, Pattern(3000, ver), ver).ok());
  }
  ASSERT_TRUE(Put(*fs, "d", Pattern(10, 4)).ok());  // the default: 0
  EXPECT_EQ(fs->LookupVersion("t", "nope").code(), ErrorCode::OBJECT_NOT_FOUND);
  auto check = [&](FileStorage& s) {
    for (const auto& [k, ver] : versions) {
      auto got = s.LookupVersion("t", k);
      ASSERT_TRUE(got.ok()) << k;
      EXPECT_EQ(*got, ver) << k;
      EXPECT_TRUE(*Get(s, k) == Pattern(3000, ver)) << k;
    }
    EXPECT_EQ(*s.LookupVersion("t", "d"), 0u);
    auto list = s.List();
    ASSERT_EQ(list.size(), 4u);
    for (const StoredObject& o : list) {
      EXPECT_EQ(o.object_version, o.key == "d" ? 0u : versions.at(o.key))
          << o.key;
    }
  };
  check(*fs);
  fs.reset();
  fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  check(*fs);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
}

TEST_P(FileStorageTest, SameBytesUnderANewObjectVersionUpdateTheVersion) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  const auto v = Pattern(10000, 1);
  ASSERT_TRUE(PutVersion(*fs, "k", v, 5).ok());
  const uint64_t used_once = fs->GetStats().bytes_used;
  ASSERT_TRUE(PutVersion(*fs, "k", v, 5).ok());
  EXPECT_EQ(fs->GetStats().bytes_used, used_once) << "same bytes and version";

  ASSERT_TRUE(PutVersion(*fs, "k", v, 6).ok());
  EXPECT_EQ(*fs->LookupVersion("t", "k"), 6u);
  FileStorageStats s = fs->GetStats();
  EXPECT_EQ(s.records, 1u);
  EXPECT_EQ(s.bytes_used, 2 * used_once) << "written as a new record";
  EXPECT_EQ(s.bytes_live, RecordSpan(v.size()));
  EXPECT_TRUE(*Get(*fs, "k") == v);
  // Going back to an older version number is the master's call, not ours.
  ASSERT_TRUE(PutVersion(*fs, "k", v, 5).ok());
  EXPECT_EQ(*fs->LookupVersion("t", "k"), 5u);
  ASSERT_TRUE(PutVersion(*fs, "k", v, 7).ok());

  fs.reset();
  fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(*fs->LookupVersion("t", "k"), 7u);
  EXPECT_EQ(fs->GetStats().records, 1u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
  EXPECT_TRUE(*Get(*fs, "k") == v);
}

TEST_P(FileStorageTest, RemoveIfVersionRemovesOnlyTheStoredVersion) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(PutVersion(*fs, "k", Pattern(9000, 1), 3).ok());
  ASSERT_TRUE(PutVersion(*fs, "other", Pattern(9000, 2), 3).ok());
  const uint64_t live = fs->GetStats().bytes_live;

  Status st = fs->RemoveIfVersion("t", "k", 2);
  EXPECT_EQ(st.code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_NE(st.message().find("object version 2"), std::string::npos)
      << st.message();
  EXPECT_EQ(fs->RemoveIfVersion("t", "absent", 3).code(),
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().bytes_live, live);
  EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 1));
  EXPECT_EQ(*fs->LookupVersion("t", "k"), 3u);

  // A restart with the record untouched by the refused remove.
  fs.reset();
  fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_TRUE(*Get(*fs, "k") == Pattern(9000, 1));

  ASSERT_TRUE(fs->RemoveIfVersion("t", "k", 3).ok());
  EXPECT_EQ(Get(*fs, "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->LookupVersion("t", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->RemoveIfVersion("t", "k", 3).code(),
            ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().bytes_live, RecordSpan(9000));

  fs.reset();
  fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->LookupSize("t", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().records, 1u);
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
  EXPECT_TRUE(*Get(*fs, "other") == Pattern(9000, 2));
}

TEST_P(FileStorageTest, KeyLengthLimitOfFormatV2IsEnforced) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  const auto v = Pattern(10, 1);
  ASSERT_EQ(kMaxTenantPlusKey, 4024u);
  const std::string tenant(24, 'T');
  Status st = PutVersion(*fs, std::string(4001, 'k'), v, 1, tenant);
  EXPECT_EQ(st.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(st.message().find("tenant + key is 4025 bytes; at most 4024"),
            std::string::npos)
      << st.message();
  // The v1 limit (4032) is no longer accepted for new writes.
  EXPECT_EQ(Put(*fs, std::string(4031, 'k'), v).code(),
            ErrorCode::INVALID_PARAMS);
  const std::string longest(4000, 'k');
  ASSERT_TRUE(PutVersion(*fs, longest, v, 77, tenant).ok());
  fs.reset();
  fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(*fs->LookupVersion(tenant, longest), 77u);
  EXPECT_TRUE(*Get(*fs, longest, false, tenant) == v);
}

TEST_P(FileStorageTest, TenantsAreSeparate) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(Put(*fs, "k", Pattern(100, 1), "a").ok());
  ASSERT_TRUE(Put(*fs, "k", Pattern(200, 2), "b").ok());
  EXPECT_TRUE(*Get(*fs, "k", false, "a") == Pattern(100, 1));
  EXPECT_TRUE(*Get(*fs, "k", false, "b") == Pattern(200, 2));
  // No tenant/key split can alias another pair.
  ASSERT_TRUE(Put(*fs, "bk", Pattern(300, 3), "a").ok());
  EXPECT_EQ(fs->LookupSize("ab", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(fs->Remove("a", "k").ok());
  EXPECT_EQ(fs->LookupSize("a", "k").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(*fs->LookupSize("b", "k"), 200u);
}

TEST_P(FileStorageTest, RemoveMakesAMissThatSurvivesRestart) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  ASSERT_TRUE(Put(*fs, "gone", Pattern(9000, 1)).ok());
  ASSERT_TRUE(Put(*fs, "kept", Pattern(9000, 2)).ok());
  ASSERT_TRUE(fs->Remove("t", "gone").ok());
  EXPECT_EQ(fs->Remove("t", "gone").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(Get(*fs, "gone").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(fs->GetStats().bytes_live, RecordSpan(9000));

  fs.reset();
  fs = MustOpen(Config());
  EXPECT_EQ(fs->LookupSize("t", "gone").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(*Get(*fs, "kept") == Pattern(9000, 2));
  auto list = fs->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].key, "kept");
  EXPECT_EQ(list[0].size, 9000u);
}

TEST_P(FileStorageTest, OneStorePerDirectory) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(FileStorage::Open(Config()).code(),
            ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
  fs.reset();
  EXPECT_TRUE(FileStorage::Open(Config()).ok());
}

TEST_P(FileStorageTest, RejectsBadArguments) {
  auto fs = MustOpen(Config());
  ASSERT_NE(fs, nullptr);
  const auto v = Pattern(10, 1);
  EXPECT_EQ(Put(*fs, "", v).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(Put(*fs, std::string(kMaxTenantPlusKey, 'x'), v).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(Put(*fs, std::string(kMaxTenantPlusKey - 1, 'x'), v).ok());
  EXPECT_EQ(fs->BatchWrite({WriteItem{"t", "k", nullptr, 5}})[0].code(),
            ErrorCode::INVALID_PARAMS);

  ASSERT_TRUE(Put(*fs, "k", Pattern(5000, 1)).ok());
  AlignedBuffer small(4096);
  auto r = fs->BatchRead({ReadItem{"t", "k", small.data(), 4999}});
  EXPECT_EQ(r[0].code(), ErrorCode::BUFFER_OVERFLOW);

  FileStorageConfig c = Config();
  c.segment_file_size = 5000;
  EXPECT_EQ(FileStorage::Open(c).code(), ErrorCode::INVALID_PARAMS);
  c = Config();
  c.ssd_low_watermark_ratio = 0.95;
  EXPECT_EQ(FileStorage::Open(c).code(), ErrorCode::INVALID_PARAMS);
}

TEST_P(FileStorageTest, FullCapacityRefusesAndEvictionPicksOldestFirst) {
  FileStorageConfig c = Config();
  c.segment_file_size = 64 * 1024;
  c.ssd_capacity_bytes = 100 * RecordSpan(8000);  // 100 records of 12 KiB
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  EXPECT_TRUE(fs->PickEvictionCandidates().empty());
  int stored = 0;
  for (;; ++stored) {
    Status st = Put(*fs, Key(stored), Pattern(8000, stored));
    if (!st.ok()) {
      EXPECT_EQ(st.code(), ErrorCode::NO_AVAILABLE_HANDLE) << st.ToString();
      break;
    }
  }
  EXPECT_EQ(stored, 100);
  EXPECT_EQ(fs->LookupSize("t", "k100").code(), ErrorCode::OBJECT_NOT_FOUND);

  auto victims = fs->PickEvictionCandidates();
  // From 100% to below 80%: the 21 oldest, oldest first.
  ASSERT_EQ(victims.size(), 21u);
  for (size_t i = 0; i < victims.size(); ++i) {
    EXPECT_EQ(victims[i].key, Key(i));
    EXPECT_EQ(victims[i].size, 8000u);
  }
  // Picking removes nothing; space comes back only after Remove and GC.
  EXPECT_EQ(fs->GetStats().records, 100u);
  for (const auto& v : victims) ASSERT_TRUE(fs->Remove(v.tenant, v.key).ok());
  EXPECT_EQ(Put(*fs, "new", Pattern(8000, 7)).code(),
            ErrorCode::NO_AVAILABLE_HANDLE);
  ASSERT_TRUE(fs->CollectGarbage().ok());
  FileStorageStats s = fs->GetStats();
  EXPECT_LT(double(s.bytes_used), 0.8 * double(c.ssd_capacity_bytes) + 1);
  EXPECT_TRUE(Put(*fs, "new", Pattern(8000, 7)).ok());
  EXPECT_TRUE(fs->PickEvictionCandidates().empty());
  for (int i = 21; i < 100; ++i) {
    auto got = Get(*fs, Key(i));
    ASSERT_TRUE(got.ok()) << i;
    EXPECT_TRUE(*got == Pattern(8000, i)) << i;
  }
}

TEST_P(FileStorageTest, EvictionAgeSurvivesGcAndRestart) {
  FileStorageConfig c = Config();
  c.segment_file_size = 64 * 1024;
  c.ssd_capacity_bytes = 40 * RecordSpan(8000);
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(PutVersion(*fs, Key(i), Pattern(8000, i), 500 + i).ok());
  }
  // Kill most of the two oldest files, so GC moves k1, k5, k9 forward.
  for (int i = 0; i < 12; ++i) {
    if (i % 4 != 1) {
      ASSERT_TRUE(fs->Remove("t", Key(i)).ok());
    }
  }
  ASSERT_TRUE(fs->CollectGarbage().ok());
  EXPECT_GT(fs->GetStats().gc_records_moved, 0u);
  // The moved records keep their object version.
  for (int i : {1, 5, 9}) {
    EXPECT_EQ(*fs->LookupVersion("t", Key(i)), uint64_t(500 + i)) << i;
  }
  // Fill up with newer records, so eviction has work to do.
  for (int i = 20; i < 100; ++i) {
    if (!Put(*fs, Key(i), Pattern(8000, i)).ok()) break;
  }
  fs.reset();
  fs = MustOpen(c);
  auto victims = fs->PickEvictionCandidates();
  ASSERT_GE(victims.size(), 3u);
  EXPECT_EQ(victims[0].key, "k1");
  EXPECT_EQ(victims[1].key, "k5");
  EXPECT_EQ(victims[2].key, "k9");
  EXPECT_EQ(victims[0].object_version, 501u);
  EXPECT_EQ(victims[1].object_version, 505u);
  EXPECT_EQ(victims[2].object_version, 509u);
  for (const StoredObject& o : fs->List()) {
    if (o.key == "k1") {
      EXPECT_EQ(o.object_version, 501u);
    }
  }
}

TEST_P(FileStorageTest, GarbageCollectionReclaimsDeadSpace) {
  FileStorageConfig c = Config();
  c.segment_file_size = 128 * 1024;
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(Put(*fs, Key(i), Pattern(5000 + i, i)).ok());
  }
  const FileStorageStats before = fs->GetStats();
  for (int i = 0; i < kN; ++i) {
    if (i % 4 != 0) {
      ASSERT_TRUE(fs->Remove("t", Key(i)).ok());
    }
  }
  ASSERT_TRUE(fs->CollectGarbage().ok());
  const FileStorageStats after = fs->GetStats();
  EXPECT_LT(after.bytes_used, before.bytes_used / 2);
  EXPECT_LT(after.files, before.files);
  EXPECT_GT(after.gc_files_deleted, 0u);
  EXPECT_EQ(after.records, size_t(kN / 4));
  auto check = [&](FileStorage& s) {
    for (int i = 0; i < kN; ++i) {
      auto got = Get(s, Key(i));
      if (i % 4 == 0) {
        ASSERT_TRUE(got.ok()) << i << " " << got.status().ToString();
        EXPECT_TRUE(*got == Pattern(5000 + i, i)) << i;
      } else {
        EXPECT_EQ(got.code(), ErrorCode::OBJECT_NOT_FOUND) << i;
      }
    }
  };
  check(*fs);
  // Every deleted file is gone from the directory.
  size_t on_disk = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    on_disk += e.path().filename().string().rfind("seg-", 0) == 0;
  }
  EXPECT_EQ(on_disk, after.files);

  fs.reset();
  fs = MustOpen(c);
  EXPECT_EQ(fs->GetStats().records, size_t(kN / 4));
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
  check(*fs);
}

TEST_P(FileStorageTest, BackgroundCollectorRuns) {
  FileStorageConfig c = Config();
  c.segment_file_size = 64 * 1024;
  c.ssd_gc_interval_ms = 10;
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Put(*fs, Key(i), Pattern(8000, i)).ok());
  }
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(fs->Remove("t", Key(i)).ok());
  }
  for (int w = 0; w < 500 && fs->GetStats().gc_files_deleted == 0; ++w) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(fs->GetStats().gc_files_deleted, 0u);
  for (int i = 30; i < 40; ++i) {
    EXPECT_TRUE(*Get(*fs, Key(i)) == Pattern(8000, i));
  }
}

// Readers, writers, removers and the collector at once. Every value encodes
// its key and version, so any successful read is checked byte for byte.
TEST_P(FileStorageTest, ConcurrentReadersWritersRemoversAndGc) {
  FileStorageConfig c = Config();
  c.segment_file_size = 256 * 1024;
  auto fs = MustOpen(c);
  ASSERT_NE(fs, nullptr);
  constexpr int kKeys = 64;
  auto size_of = [](int key, int version) {
    return size_t(1000 + (key * 131 + version * 977) % 30000);
  };
  auto seed_of = [](int key, int version) {
    return uint64_t(key) * 1000003 + uint64_t(version);
  };
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads_ok{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 40; ++round) {
        std::vector<std::vector<uint8_t>> vals;
        std::vector<WriteItem> items;
        for (int k = w; k < kKeys; k += 2) {
          const int version = round;
          vals.push_back(Pattern(size_of(k, version), seed_of(k, version)));
        }
        int j = 0;
        for (int k = w; k < kKeys; k += 2, ++j) {
          items.push_back({"t", Key(k), vals[j].data(), vals[j].size()});
        }
        for (const Status& st : fs->BatchWrite(items)) {
          if (!st.ok()) bad.fetch_add(1);
        }
        if (round % 3 == 0) {
          for (int k = w; k < kKeys; k += 6) {
            fs->Remove("t", Key(k)).IgnoreError();  // may be gone already
          }
        }
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      std::vector<AlignedBuffer> bufs;
      for (int i = 0; i < 8; ++i) bufs.emplace_back(64 * 1024);
      int k0 = 0;
      while (!stop.load()) {
        std::vector<ReadItem> items;
        for (int i = 0; i < 8; ++i) {
          items.push_back(
              {"t", Key((k0 + i) % kKeys), bufs[i].data(), bufs[i].size()});
        }
        auto res = fs->BatchRead(items);
        for (int i = 0; i < 8; ++i) {
          if (!res[i].ok()) {
            if (res[i].code() != ErrorCode::OBJECT_NOT_FOUND) bad.fetch_add(1);
            continue;
          }
          // Find the version whose size and bytes match.
          const int k = (k0 + i) % kKeys;
          bool matched = false;
          for (int v = 0; v < 40 && !matched; ++v) {
            if (size_of(k, v) != *res[i]) continue;
            auto want = Pattern(size_of(k, v), seed_of(k, v));
            matched =
                std::memcmp(want.data(), bufs[i].data(), want.size()) == 0;
          }
          if (!matched) bad.fetch_add(1);
          reads_ok.fetch_add(1);
        }
        k0 += 5;
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      if (!fs->CollectGarbage().ok()) bad.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  threads[0].join();
  threads[1].join();
  stop.store(true);
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads_ok.load(), 0);
  const FileStorageStats s = fs->GetStats();
  EXPECT_EQ(s.corrupt_reads, 0u);
  EXPECT_EQ(s.write_errors, 0u);

  // The final state reads back and survives a restart unchanged.
  std::map<std::string, std::vector<uint8_t>> final_values;
  for (const StoredObject& o : fs->List()) {
    auto got = Get(*fs, o.key);
    ASSERT_TRUE(got.ok());
    final_values[o.key] = *got;
  }
  uint64_t live = 0;
  for (const auto& [k, v] : final_values) live += RecordSpan(v.size());
  EXPECT_EQ(s.bytes_live, live);
  fs.reset();
  fs = MustOpen(c);
  EXPECT_EQ(fs->GetStats().records, final_values.size());
  EXPECT_EQ(fs->GetStats().corrupt_skipped, 0u);
  for (const auto& [k, v] : final_values) {
    auto got = Get(*fs, k);
    ASSERT_TRUE(got.ok()) << k;
    EXPECT_TRUE(*got == v) << k;
  }
}

KVPOOL_STORAGE_BOTH_BACKENDS(FileStorageTest);

TEST(FileStorageBackendTest, FallsBackToPreadWhenIoUringIsRefused) {
  testing::TempDir dir;
  FileStorageConfig c;
  c.ssd_dir = dir.path();
  // Above the kernel's limit of entries, so io_uring_queue_init fails.
  c.ssd_io_queue_depth = 1u << 20;
  c.ssd_io_backend = SsdIoBackend::kIoUring;
  EXPECT_FALSE(FileStorage::Open(c).ok());
  c.ssd_io_backend = SsdIoBackend::kAuto;
  auto fs = FileStorage::Open(c);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_FALSE((*fs)->io_uring_enabled());
  const auto v = Pattern(12345, 9);
  ASSERT_TRUE(
      (*fs)->BatchWrite({WriteItem{"t", "k", v.data(), v.size()}})[0].ok());
  EXPECT_EQ(*(*fs)->LookupSize("t", "k"), v.size());
}

TEST(FileStorageBackendTest, RefusesADirectoryWithoutODirect) {
  // tmpfs took O_DIRECT from Linux 6.6 on; only older kernels refuse here.
  const std::string shm =
      fmt::format("/dev/shm/kvpool-storage-test-{}", ::getpid());
  std::filesystem::create_directories(shm);
  Status probe = ProbeDirectIo(shm);
  FileStorageConfig c;
  c.ssd_dir = shm;
  auto fs = FileStorage::Open(c);
  std::filesystem::remove_all(shm);
  if (probe.ok()) GTEST_SKIP() << "this kernel's tmpfs accepts O_DIRECT";
  EXPECT_EQ(fs.code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(fs.status().message().find("O_DIRECT"), std::string::npos);
}

}  // namespace
}  // namespace kvpool::storage
