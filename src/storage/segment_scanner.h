// Start-up scan of one segment file: walks its records, checks each header
// (and, when asked, each value's checksum) and reports the good ones.
// Damage never stops the scan: after a bad header it looks for the next
// valid header at each following block boundary.
#ifndef KVPOOL_STORAGE_SEGMENT_SCANNER_H_
#define KVPOOL_STORAGE_SEGMENT_SCANNER_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "kvpool/status.h"
#include "storage/io_backend.h"
#include "storage/record_format.h"
#include "storage/segment_file.h"

namespace kvpool::storage {

struct ScannedRecord {
  RecordKind kind;
  std::string_view tenant;  // valid only during the callback
  std::string_view key;
  uint64_t offset = 0;
  uint64_t value_len = 0;
  uint64_t seq = 0;
  uint64_t data_checksum = 0;
  uint64_t object_version = 0;  // 0 for a v1 record
};

struct ScanCounts {
  uint64_t data_records = 0;
  uint64_t dead_records = 0;
  // Damaged regions skipped: a bad header (counted once however many blocks
  // follow it before the next good header), a value that fails its
  // checksum, or a record cut short by the end of the file.
  uint64_t corrupt = 0;
  uint64_t max_seq = 0;
};

// Scans `file` of `file_size` bytes. Returns an error only when the file
// cannot be read; the records reported before that stay valid.
Status ScanSegment(IoBackend* io, const SegmentFile& file, uint64_t file_size,
                   bool verify_data,
                   const std::function<void(const ScannedRecord&)>& on_record,
                   ScanCounts* counts);

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_SEGMENT_SCANNER_H_
