// fuzz_ssd_record: the SSD tier's record decoder (ParseHeaderBlock), its
// segment scanner (ScanSegment) and the recovery that rebuilds the index
// from them (FileStorage::Open), on arbitrary segment file contents.
//
// Input: byte 0 = mode, byte 1 = where the bytes are split into two segment
// files (in blocks), the rest = the files' bytes. Mode bits:
//   1: verify values at open (ssd_verify_on_open)
//   2: "fix headers": every block that starts with the record magic gets its
//      file id, offset and header checksum made right before the files are
//      written (so the fuzzer explores lengths, kinds and sequence numbers
//      past the checksum)
//   4: also fix the data checksum of such records whose value fits
//
// Invariants checked (docs/fuzzing.md):
//  1. A header block ParseHeaderBlock accepts has its names inside the
//     block, and re-encodes (EncodeHeaderBlock) to a block that parses to
//     the same fields; a v2 block with zero padding re-encodes bit for bit.
//  2. Every record ScanSegment reports starts on a block boundary, lies
//     inside the file (header and padded value), has a header that parses
//     at that place with the same fields, and (verify_data) a value whose
//     checksum is the header's.
//  3. After FileStorage::Open of the two files the index is exactly the
//     newest data record of each key among those the scanner reports (same
//     size, seq, object version), the stats agree (records, corrupt
//     skipped), and reading each key gives the bytes of its record (or
//     OBJECT_NOT_FOUND when the value fails its checksum, which only an
//     unverified open may index).
//  4. A second Open of the same directory (after recovery invalidated the
//     losing versions and dropped dead files) gives the same index.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "storage/aligned_buffer.h"
#include "storage/file_storage.h"
#include "storage/io_backend.h"
#include "storage/record_format.h"
#include "storage/segment_file.h"
#include "storage/segment_scanner.h"

namespace {

using namespace kvpool;
using namespace kvpool::storage;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", what);
  std::abort();
}

// One block as a header, checked on its own (invariant 1).
void CheckHeaderBlock(const uint8_t* block, uint32_t file_id, uint64_t pos) {
  auto p = ParseHeaderBlock(block, file_id, pos);
  if (!p.ok()) return;
  const RecordHeader& h = p->header;
  const auto* names = reinterpret_cast<const char*>(block + kFixedHeaderSize);
  const size_t n = size_t{h.tenant_len} + h.key_len;
  if (p->tenant.data() != names || p->key.data() != names + h.tenant_len ||
      kFixedHeaderSize + n + (h.version == kFormatVersion ? 8 : 0) >
          kBlockSize) {
    Fail("parsed names lie outside the header block");
  }
  alignas(8) uint8_t again[kBlockSize];
  EncodeHeaderBlock(h, p->tenant, p->key, p->object_version, again);
  auto q = ParseHeaderBlock(again, file_id, pos);
  if (!q.ok() || q->tenant != p->tenant || q->key != p->key ||
      q->object_version != p->object_version || q->header.seq != h.seq ||
      q->header.value_len != h.value_len ||
      q->header.data_checksum != h.data_checksum || q->header.kind != h.kind) {
    Fail("a parsed header does not re-encode to the same fields");
  }
  if (h.version == kFormatVersion) {
    bool zero_tail = true;
    for (size_t i = kFixedHeaderSize + n + 8; i < kBlockSize; ++i) {
      zero_tail &= block[i] == 0;
    }
    if (zero_tail && std::memcmp(again, block, kBlockSize) != 0) {
      Fail("a canonical v2 header block does not re-encode bit for bit");
    }
  }
}

// Mode bits 2 and 4: make headers (and values) check out.
void FixRecords(std::string* bytes, uint32_t file_id, bool fix_data) {
  for (uint64_t pos = 0; pos + kBlockSize <= bytes->size(); pos += kBlockSize) {
    auto* b = reinterpret_cast<uint8_t*>(bytes->data() + pos);
    RecordHeader h;
    std::memcpy(&h, b, sizeof(h));
    if (h.magic != kRecordMagic) continue;
    const size_t names = size_t{h.tenant_len} + h.key_len;
    if (names > kMaxTenantPlusKeyV1) continue;
    if (h.version != kFormatVersionV1 && names > kMaxTenantPlusKey) continue;
    h.file_id = file_id;
    h.offset = pos;
    const uint64_t room = bytes->size() - pos - kBlockSize;
    if (fix_data && h.value_len <= room) {
      h.data_checksum = DataChecksum(b + kBlockSize, h.value_len);
    }
    std::string tenant(reinterpret_cast<char*>(b) + kFixedHeaderSize,
                       h.tenant_len);
    std::string key(
        reinterpret_cast<char*>(b) + kFixedHeaderSize + h.tenant_len,
        h.key_len);
    uint64_t version = 0;
    if (h.version == kFormatVersion) {
      std::memcpy(&version, b + kFixedHeaderSize + names, sizeof(version));
    }
    EncodeHeaderBlock(h, tenant, key, version, b);
  }
}

struct Model {
  std::string tenant, key;
  uint64_t value_len = 0, seq = 0, object_version = 0, data_checksum = 0;
  uint32_t file = 0;
  uint64_t offset = 0;
};
using Key = std::pair<std::string, std::string>;

// Invariant 2 for one file; adds its records to `index` like Upsert does
// (a record replaces the key's entry only with a greater seq).
uint64_t ScanAndCheck(const std::string& dir, uint32_t id,
                      const std::string& bytes, bool verify,
                      std::map<Key, Model>* index) {
  uint64_t size = 0;
  auto f = SegmentFile::OpenExisting(dir, id, &size);
  if (!f.ok()) Fail("cannot open a segment file the harness wrote");
  if (size != bytes.size()) Fail("file size differs from the bytes written");
  static auto io = NewPreadBackend();
  ScanCounts counts;
  uint64_t reported = 0;
  Status st = ScanSegment(
      io.get(), **f, size, verify,
      [&](const ScannedRecord& r) {
        ++reported;
        if (!IsAligned(r.offset)) Fail("a record off a block boundary");
        if (r.offset > size || r.offset + kBlockSize > size ||
            r.value_len > size - r.offset - kBlockSize ||
            RecordSpan(r.value_len) > size - r.offset) {
          Fail("a scanned record does not lie inside the file");
        }
        if (r.kind != RecordKind::kData) Fail("a dead record reported");
        const auto* raw =
            reinterpret_cast<const uint8_t*>(bytes.data() + r.offset);
        auto p = ParseHeaderBlock(raw, id, r.offset);
        if (!p.ok() || p->tenant != r.tenant || p->key != r.key ||
            p->header.seq != r.seq || p->header.value_len != r.value_len ||
            p->object_version != r.object_version ||
            p->header.data_checksum != r.data_checksum) {
          Fail("a scanned record differs from its header on disk");
        }
        if (verify &&
            DataChecksum(raw + kBlockSize, r.value_len) != r.data_checksum) {
          Fail("the scanner returned a record whose checksum fails");
        }
        Model m{
            std::string(r.tenant), std::string(r.key), r.value_len, r.seq,
            r.object_version,      r.data_checksum,    id,          r.offset};
        Key k{m.tenant, m.key};
        auto it = index->find(k);
        if (it == index->end()) {
          index->emplace(k, m);
        } else if (it->second.seq < m.seq) {
          it->second = m;
        }
      },
      &counts);
  if (!st.ok()) Fail("scanning a readable file failed");
  if (counts.data_records != reported) Fail("data_records != reported");
  return counts.corrupt;
}

using Listing = std::vector<
    std::tuple<std::string, std::string, uint64_t, uint64_t, uint64_t>>;

Listing List(const FileStorage& fs) {
  Listing out;
  for (const StoredObject& o : fs.List()) {
    out.emplace_back(o.tenant, o.key, o.size, o.seq, o.object_version);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ResetDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  const bool verify = mode & 1;
  const std::string all(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t split =
      std::min<size_t>(all.size(), size_t{data[1]} * kBlockSize);
  std::string files[2] = {all.substr(0, split), all.substr(split)};
  for (uint32_t i = 0; i < 2; ++i) {
    if (mode & 2) FixRecords(&files[i], i + 1, mode & 4);
    for (uint64_t pos = 0; pos + kBlockSize <= files[i].size();
         pos += kBlockSize) {
      CheckHeaderBlock(reinterpret_cast<const uint8_t*>(files[i].data() + pos),
                       i + 1, pos);
    }
  }

  static const std::string dir =
      "/dev/shm/kvpool-fuzz-ssd-" + std::to_string(getpid());
  // The scratch directory goes when the process exits (libFuzzer's runs end
  // with exit(), which runs atexit handlers), not one per run left behind.
  static const bool cleanup = [] {
    return std::atexit([] {
             std::error_code ec;
             std::filesystem::remove_all(dir, ec);
           }) == 0;
  }();
  (void)cleanup;
  ResetDir(dir);
  for (uint32_t i = 0; i < 2; ++i) {
    WriteFile(dir + "/" + SegmentFileName(i + 1), files[i]);
  }

  // The model: what the scanner reports, newest record per key.
  std::map<Key, Model> model;
  uint64_t corrupt = 0;
  for (uint32_t i = 0; i < 2; ++i) {
    corrupt += ScanAndCheck(dir, i + 1, files[i], verify, &model);
  }

  FileStorageConfig config;
  config.ssd_dir = dir;
  config.ssd_io_backend = SsdIoBackend::kPread;
  config.ssd_verify_threads = 0;
  config.ssd_verify_on_open = verify;
  Listing first;
  {
    auto fs = FileStorage::Open(config);
    if (!fs.ok()) Fail("FileStorage::Open failed on readable files");
    first = List(**fs);
    Listing want;
    for (const auto& [k, m] : model) {
      want.emplace_back(m.tenant, m.key, m.value_len, m.seq, m.object_version);
    }
    std::sort(want.begin(), want.end());
    if (first != want) Fail("the index is not the newest record of each key");
    const FileStorageStats stats = (*fs)->GetStats();
    if (stats.records != model.size()) Fail("stats.records != index size");
    if (stats.corrupt_skipped != corrupt) {
      Fail("stats.corrupt_skipped != what the scanner counted");
    }
    for (const auto& [k, m] : model) {
      auto looked = (*fs)->LookupSize(m.tenant, m.key);
      if (!looked.ok() || looked.value() != m.value_len) {
        Fail("LookupSize differs from the record");
      }
      AlignedBuffer buf(std::max<uint64_t>(m.value_len, 1));
      ReadItem item{m.tenant, m.key, buf.data(), buf.size()};
      auto got = (*fs)->BatchRead({item});
      const std::string& file = files[m.file - 1];
      const auto* value =
          reinterpret_cast<const uint8_t*>(file.data() + m.offset + kBlockSize);
      const bool good = DataChecksum(value, m.value_len) == m.data_checksum;
      if (good) {
        if (!got[0].ok() || got[0].value() != m.value_len ||
            std::memcmp(buf.data(), value, m.value_len) != 0) {
          Fail("reading an indexed key did not give its record's bytes");
        }
      } else if (got[0].ok() ||
                 got[0].status().code() != ErrorCode::OBJECT_NOT_FOUND) {
        Fail("a value that fails its checksum was read back");
      }
    }
  }
  // 4. Recovery is stable. (Reads above may have dropped damaged keys;
  // those are gone from the index only, so compare with what remains.)
  {
    auto fs = FileStorage::Open(config);
    if (!fs.ok()) Fail("the second FileStorage::Open failed");
    Listing second = List(**fs);
    if (verify && second != first) Fail("a second open changed the index");
    for (const auto& e : second) {
      if (std::find(first.begin(), first.end(), e) == first.end()) {
        Fail("a second open brought back a key the first did not have");
      }
    }
  }
  return 0;
}
