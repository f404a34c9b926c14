// On-disk record format of the SSD tier (see docs/ssd_format.md).
//
// A record is one 4096-byte header block followed by the value, padded to a
// multiple of 4096, so that every record starts and ends on a block boundary
// and can be read or written with O_DIRECT without read-modify-write.
#ifndef KVPOOL_STORAGE_RECORD_FORMAT_H_
#define KVPOOL_STORAGE_RECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvpool/status.h"

namespace kvpool::storage {

// O_DIRECT unit: offsets, lengths and buffer addresses are multiples of it.
inline constexpr uint64_t kBlockSize = 4096;
// "KVPSSD\0\1" read as a little-endian integer.
inline constexpr uint64_t kRecordMagic = 0x010044535350564Bull;
// Version 2 added the object version after the tenant and key; version 1
// records (object version 0) are still read.
inline constexpr uint16_t kFormatVersion = 2;
inline constexpr uint16_t kFormatVersionV1 = 1;
// Bytes of the fixed fields at the start of the header block.
inline constexpr size_t kFixedHeaderSize = 64;
// Little-endian object version stored after tenant and key (v2 only): the
// fixed header has no room left.
inline constexpr size_t kObjectVersionSize = sizeof(uint64_t);
// Tenant and key share the rest of the header block; in v2 the object
// version takes 8 bytes of it. kMaxTenantPlusKey is the limit of new writes.
inline constexpr size_t kMaxTenantPlusKeyV1 = kBlockSize - kFixedHeaderSize;
inline constexpr size_t kMaxTenantPlusKey =
    kMaxTenantPlusKeyV1 - kObjectVersionSize;

enum class RecordKind : uint16_t {
  kData = 1,
  // A record that is no longer current (removed or superseded). Written over
  // the header in place so that a restart does not bring the value back.
  kDead = 2,
};

inline constexpr uint64_t AlignUp(uint64_t n) {
  return (n + kBlockSize - 1) & ~(kBlockSize - 1);
}
inline constexpr bool IsAligned(uint64_t n) {
  return (n & (kBlockSize - 1)) == 0;
}
inline bool IsAligned(const void* p) {
  return IsAligned(reinterpret_cast<uintptr_t>(p));
}

// Bytes a record of `value_len` occupies on disk: header block + padded value.
inline constexpr uint64_t RecordSpan(uint64_t value_len) {
  return kBlockSize + AlignUp(value_len);
}

// The fixed part of the header block; little-endian on disk (this code only
// builds on little-endian hosts, checked below).
struct RecordHeader {
  uint64_t magic = kRecordMagic;
  uint16_t version = kFormatVersion;
  uint16_t kind = static_cast<uint16_t>(RecordKind::kData);
  uint16_t tenant_len = 0;
  uint16_t key_len = 0;
  // The file and offset the record was written at: a record image stored as
  // a value inside another record can never pass for a real one at scan time.
  uint32_t file_id = 0;
  uint32_t reserved = 0;
  uint64_t offset = 0;
  // Global write sequence, kept by garbage collection: orders versions of a
  // key and gives the age used by eviction.
  uint64_t seq = 0;
  uint64_t value_len = 0;
  uint64_t data_checksum = 0;
  // XXH3-64 of the whole header block with this field zero; it covers
  // data_checksum, so the pair covers header and value.
  uint64_t header_checksum = 0;
};
static_assert(sizeof(RecordHeader) == kFixedHeaderSize);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the record format is little-endian");

// XXH3-64 of a value; also the streaming form for values read in pieces.
uint64_t DataChecksum(const void* data, uint64_t len);
class DataHasher {
 public:
  DataHasher();
  ~DataHasher();
  DataHasher(const DataHasher&) = delete;
  DataHasher& operator=(const DataHasher&) = delete;
  void Update(const void* data, uint64_t len);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

// Fills `block` (kBlockSize bytes) with a header block: `h` with its
// header_checksum computed, then tenant, key and the object version, then
// zeros. The block is format v2, except when tenant and key are longer than
// kMaxTenantPlusKey: only a v1 record (read from disk, object version 0)
// can have such names, and moving it or marking it dead keeps it in v1.
// Requires tenant.size() + key.size() <= kMaxTenantPlusKeyV1, and
// object_version == 0 when they are over kMaxTenantPlusKey.
void EncodeHeaderBlock(RecordHeader h, std::string_view tenant,
                       std::string_view key, uint64_t object_version,
                       void* block);

// A header block that passed every check.
struct ParsedHeader {
  RecordHeader header;
  std::string_view tenant;  // point into the block given to ParseHeaderBlock
  std::string_view key;
  uint64_t object_version = 0;  // 0 for a v1 record
  RecordKind kind() const { return static_cast<RecordKind>(header.kind); }
};

// Checks magic, version (1 or 2), kind, lengths and the header checksum of
// a block read from `file_id` at `offset`. An error's message says what
// failed.
Result<ParsedHeader> ParseHeaderBlock(const void* block, uint32_t file_id,
                                      uint64_t offset);

// True when the block is all zeros (a hole left by a write that never
// landed), which a scan skips without calling it corruption.
bool IsZeroBlock(const void* block);

// "seg-000001.log"; ParseSegmentFileName returns false for any other name.
std::string SegmentFileName(uint32_t file_id);
bool ParseSegmentFileName(std::string_view name, uint32_t* file_id);

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_RECORD_FORMAT_H_
