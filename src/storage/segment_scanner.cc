#include "storage/segment_scanner.h"

#include <algorithm>
#include <cstring>

#include "storage/aligned_buffer.h"

namespace kvpool::storage {

namespace {

// Reads ahead so that files of small records cost few I/Os.
constexpr uint64_t kReadAhead = 4ull << 20;

// A sliding view of the file backed by one aligned buffer.
class Window {
 public:
  Window(IoBackend* io, const SegmentFile& file, uint64_t file_size)
      : io_(io), file_(file), file_size_(file_size) {}

  // Points at [pos, pos + n) of the file; pos is block-aligned and the
  // range lies inside the file.
  Result<const uint8_t*> Get(uint64_t pos, uint64_t n) {
    if (pos >= start_ && pos + n <= start_ + len_) {
      return buf_.data() + (pos - start_);
    }
    const uint64_t want =
        AlignUp(std::min(std::max(n, kReadAhead), file_size_ - pos));
    if (buf_.size() < want) buf_ = AlignedBuffer(want);
    IoRequest r;
    r.op = IoOp::kRead;
    r.fd = file_.fd();
    r.offset = pos;
    r.Add(buf_.data(), want);
    io_->Submit(std::span<IoRequest>(&r, 1));
    if (r.result < 0) {
      len_ = 0;
      return Status(ErrorCode::FILE_READ_FAIL,
                    "scan of " + file_.path() + " at " + std::to_string(pos) +
                        ": " + std::strerror(int(-r.result)));
    }
    start_ = pos;
    len_ = uint64_t(r.result);
    if (len_ < n) {
      return Status(ErrorCode::FILE_READ_FAIL,
                    "short read scanning " + file_.path());
    }
    return buf_.data();
  }

 private:
  IoBackend* io_;
  const SegmentFile& file_;
  const uint64_t file_size_;
  AlignedBuffer buf_;
  uint64_t start_ = 0;
  uint64_t len_ = 0;
};

}  // namespace

Status ScanSegment(IoBackend* io, const SegmentFile& file, uint64_t file_size,
                   bool verify_data,
                   const std::function<void(const ScannedRecord&)>& on_record,
                   ScanCounts* counts) {
  Window win(io, file, file_size);
  uint64_t pos = 0;
  bool in_damage = false;  // inside a run of blocks after a bad header
  while (pos + kBlockSize <= file_size) {
    auto block = win.Get(pos, kBlockSize);
    if (!block.ok()) return block.status();
    auto parsed = ParseHeaderBlock(*block, file.id(), pos);
    if (!parsed.ok()) {
      // Zeros are a hole (an append that never landed), not damage.
      if (!in_damage && !IsZeroBlock(*block)) {
        ++counts->corrupt;
        in_damage = true;
      }
      pos += kBlockSize;
      continue;
    }
    in_damage = false;
    const RecordHeader& h = parsed->header;
    const uint64_t span = RecordSpan(h.value_len);
    counts->max_seq = std::max(counts->max_seq, h.seq);
    // value_len comes from disk: RecordSpan wraps for lengths near 2^64,
    // so the length itself is checked against the room left first.
    if (h.value_len > file_size - pos - kBlockSize || span > file_size - pos) {
      // Torn tail: the value was cut by a crash or a truncation.
      if (parsed->kind() == RecordKind::kData) ++counts->corrupt;
      break;
    }
    ScannedRecord rec{parsed->kind(),  parsed->tenant,
                      parsed->key,     pos,
                      h.value_len,     h.seq,
                      h.data_checksum, parsed->object_version};
    if (parsed->kind() == RecordKind::kDead) {
      ++counts->dead_records;
      pos += span;
      continue;
    }
    if (verify_data) {
      // Re-reads the header with the value; the header's views must then
      // point into the new window contents.
      auto whole = win.Get(pos, kBlockSize + h.value_len);
      if (!whole.ok()) return whole.status();
      const char* names =
          reinterpret_cast<const char*>(*whole + kFixedHeaderSize);
      rec.tenant = std::string_view(names, h.tenant_len);
      rec.key = std::string_view(names + h.tenant_len, h.key_len);
      if (DataChecksum(*whole + kBlockSize, h.value_len) != h.data_checksum) {
        ++counts->corrupt;
        pos += span;
        continue;
      }
    }
    ++counts->data_records;
    on_record(rec);
    pos += span;
  }
  // A trailing piece smaller than a block is what is left of a torn append.
  if (pos < file_size && file_size - pos < kBlockSize && !in_damage) {
    ++counts->corrupt;
  }
  return Status::OK();
}

}  // namespace kvpool::storage
