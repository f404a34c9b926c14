// Internal to FileStorage's implementation files (file_storage*.cc): the
// record on its way to disk that writes and garbage collection share, and
// small helpers for messages. Not for other users of the SSD tier.
#ifndef KVPOOL_STORAGE_FILE_STORAGE_INTERNAL_H_
#define KVPOOL_STORAGE_FILE_STORAGE_INTERNAL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "kvpool/status.h"
#include "storage/aligned_buffer.h"
#include "storage/file_storage.h"
#include "storage/io_backend.h"
#include "storage/segment_file.h"
#include "storage/storage_index.h"

namespace kvpool {

// One record on its way to disk: a new write (BatchWrite) or a live record
// moved by garbage collection (CollectFile). Reserve gives it its place,
// WriteRecords its I/O; `status` says how far it got.
struct FileStorage::PendingRecord {
  std::string_view tenant;
  std::string_view key;
  const uint8_t* data = nullptr;
  uint64_t len = 0;
  uint64_t checksum = 0;
  uint64_t seq = 0;  // 0: a new write, numbered at reservation
  uint64_t object_version = 0;

  Status status;
  std::shared_ptr<storage::SegmentFile> file;  // set once space is reserved
  uint64_t offset = 0;
  storage::AlignedBuffer header;
  storage::AlignedBuffer tail;

  storage::IndexEntry Entry() const {
    return storage::IndexEntry{file, offset,   len,
                               seq,  checksum, object_version};
  }
  // Once space is reserved: encodes the header block into `header`, copies
  // the last partial block into `tail`, and returns the write of the whole
  // record (whole blocks of an aligned `data` go out in place).
  storage::IoRequest WriteRequest();
};

namespace storage {

// Why a transfer of `expected` bytes that returned `result` failed: the
// errno text, or how short it fell.
inline std::string IoError(int64_t result, uint64_t expected) {
  if (result < 0) return std::strerror(int(-result));
  return "short transfer (" + std::to_string(result) + " of " +
         std::to_string(expected) + " bytes)";
}

inline StoredObject ObjectOf(std::string_view tenant, std::string_view key,
                             const IndexEntry& e) {
  return StoredObject{std::string(tenant), std::string(key), e.value_len, e.seq,
                      e.object_version};
}

}  // namespace storage
}  // namespace kvpool

#endif  // KVPOOL_STORAGE_FILE_STORAGE_INTERNAL_H_
