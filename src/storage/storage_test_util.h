// Shared pieces of the SSD tier's tests: a temporary directory on the main
// disk, self-checking value patterns, and a fixture run on both backends.
#ifndef KVPOOL_STORAGE_STORAGE_TEST_UTIL_H_
#define KVPOOL_STORAGE_STORAGE_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "storage/aligned_buffer.h"
#include "storage/fault_backend.h"
#include "storage/file_storage.h"

namespace kvpool::storage::testing {

// /tmp is disk-backed here (O_DIRECT needs a filesystem that takes it; the
// probe in FileStorage::Open fails clearly otherwise).
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvpool-storage-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Bytes that depend on every input, so a value read back under the wrong
// key, version or offset never compares equal.
inline std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

// "k17". (Built with fmt: GCC 12 warns falsely on "k" + std::to_string.)
inline std::string Key(int i, const char* prefix = "k") {
  return fmt::format("{}{}", prefix, i);
}

// A header block in the layout of format v1 (no object version), built
// byte by byte from docs/ssd_format.md rather than by EncodeHeaderBlock, so
// that reading old files is checked against the documented layout.
// `version` other than 1 makes blocks the reader must refuse.
struct HandHeader {
  uint16_t version = 1;
  RecordKind kind = RecordKind::kData;
  std::string_view tenant;
  std::string_view key;
  uint32_t file_id = 1;
  uint64_t offset = 0;
  uint64_t seq = 1;
  uint64_t value_len = 0;
  uint64_t data_checksum = 0;
};
inline std::vector<uint8_t> HandHeaderBlock(const HandHeader& h) {
  std::vector<uint8_t> b(kBlockSize, 0);
  auto put = [&](size_t at, auto v) { std::memcpy(&b[at], &v, sizeof(v)); };
  std::memcpy(&b[0], "KVPSSD\0\1", 8);
  put(8, uint16_t{h.version});
  put(10, static_cast<uint16_t>(h.kind));
  put(12, static_cast<uint16_t>(h.tenant.size()));
  put(14, static_cast<uint16_t>(h.key.size()));
  put(16, h.file_id);
  put(24, h.offset);
  put(32, h.seq);
  put(40, h.value_len);
  put(48, h.data_checksum);
  // Names longer than the block (for blocks the reader must refuse) are
  // cut at its end; the length fields above keep the full sizes.
  const size_t tenant_n = std::min(h.tenant.size(), kBlockSize - 64);
  const size_t key_n = std::min(h.key.size(), kBlockSize - 64 - tenant_n);
  std::memcpy(&b[64], h.tenant.data(), tenant_n);
  std::memcpy(&b[64 + tenant_n], h.key.data(), key_n);
  // XXH3-64 of the block while the checksum field (56..63) is still zero.
  put(56, uint64_t{XXH3_64bits(b.data(), b.size())});
  return b;
}

inline bool IoUringWorks() {
  static const bool works = NewIoUringBackend(8, 1).ok();
  return works;
}

// Changes one byte of a file with ordinary (buffered) I/O, as a failing
// disk or a stray writer would.
inline void FlipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, off_t(offset)), 1);
  b ^= 0xFF;
  ASSERT_EQ(::pwrite(fd, &b, 1, off_t(offset)), 1);
  ::fsync(fd);
  ::close(fd);
}

inline uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  return std::filesystem::file_size(path, ec);
}

class StorageTest : public ::testing::TestWithParam<SsdIoBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == SsdIoBackend::kIoUring && !IoUringWorks()) {
      GTEST_SKIP() << "io_uring is not permitted here";
    }
  }

  FileStorageConfig Config() const {
    FileStorageConfig c;
    c.ssd_dir = dir_.path();
    c.ssd_io_backend = GetParam();
    c.segment_file_size = 1ull << 20;
    c.ssd_capacity_bytes = 1ull << 30;
    return c;
  }

  std::unique_ptr<IoBackend> RealBackend() const {
    if (GetParam() == SsdIoBackend::kPread) return NewPreadBackend();
    return std::move(NewIoUringBackend(64, 2)).value();
  }

  // A fault injector over this test's backend, plugged into `c`.
  std::shared_ptr<FaultBackend> InjectFaults(FileStorageConfig* c) const {
    auto fb = std::make_shared<FaultBackend>(RealBackend());
    c->io_backend_override = fb;
    return fb;
  }

  static std::unique_ptr<FileStorage> MustOpen(const FileStorageConfig& c) {
    auto fs = FileStorage::Open(c);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    if (!fs.ok()) return nullptr;
    return std::move(fs).value();
  }

  static Status Put(FileStorage& fs, const std::string& key,
                    const std::vector<uint8_t>& v,
                    const std::string& tenant = "t") {
    return fs.BatchWrite({WriteItem{tenant, key, v.data(), v.size()}})[0];
  }
  static Status PutVersion(FileStorage& fs, const std::string& key,
                           const std::vector<uint8_t>& v,
                           uint64_t object_version,
                           const std::string& tenant = "t") {
    return fs.BatchWrite(
        {WriteItem{tenant, key, v.data(), v.size(), object_version}})[0];
  }

  // Reads into a 4096-aligned buffer (the zero-copy path), or at an odd
  // address inside one when `unaligned` (the bounce path).
  static Result<std::vector<uint8_t>> Get(FileStorage& fs,
                                          const std::string& key,
                                          bool unaligned = false,
                                          const std::string& tenant = "t") {
    auto size = fs.LookupSize(tenant, key);
    const uint64_t cap = size.ok() ? *size : 0;
    AlignedBuffer buf(cap + kBlockSize);
    uint8_t* dest = buf.data() + (unaligned ? 3 : 0);
    auto r = fs.BatchRead({ReadItem{tenant, key, dest, cap}})[0];
    if (!r.ok()) return r.status();
    return std::vector<uint8_t>(dest, dest + *r);
  }

  std::string SegPath(uint32_t id) const {
    return dir_.path() + "/" + SegmentFileName(id);
  }

  TempDir dir_;
};

inline std::string BackendName(
    const ::testing::TestParamInfo<SsdIoBackend>& info) {
  return info.param == SsdIoBackend::kPread ? "pread" : "io_uring";
}

#define KVPOOL_STORAGE_BOTH_BACKENDS(Fixture)                          \
  INSTANTIATE_TEST_SUITE_P(                                            \
      Backends, Fixture,                                               \
      ::testing::Values(SsdIoBackend::kPread, SsdIoBackend::kIoUring), \
      ::kvpool::storage::testing::BackendName)

}  // namespace kvpool::storage::testing

#endif  // KVPOOL_STORAGE_STORAGE_TEST_UTIL_H_
