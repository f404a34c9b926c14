// FileStorage's write path: space reservation in the active segment file,
// the record writes themselves, publishing the written records in the index,
// and the dead headers that keep removed or superseded records from coming
// back after a restart. Garbage collection moves records through the same
// steps. One of the files of the FileStorage class (file_storage.cc lists
// them).
#include <errno.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <cstring>

#include "common/failpoint.h"
#include "storage/file_storage.h"
#include "storage/file_storage_internal.h"
#include "storage/record_format.h"

namespace kvpool {

using storage::AlignedBuffer;
using storage::IndexEntry;
using storage::IoError;
using storage::IoOp;
using storage::IoRequest;
using storage::kBlockSize;
using storage::ObjectOf;
using storage::RecordHeader;
using storage::RecordKind;
using storage::RecordSpan;
using storage::SegmentFile;

namespace {

Status WriteFailure(int64_t result, uint64_t expected, const SegmentFile& f) {
  std::string what = result == -ENOSPC ? "disk full" : "write failed";
  return Status(ErrorCode::FILE_WRITE_FAIL,
                what + " on " + f.path() + ": " + IoError(result, expected));
}

// Why `it` cannot be written at all, or OK.
Status CheckWriteItem(const WriteItem& it) {
  if (it.key.empty()) return Status(ErrorCode::INVALID_PARAMS, "empty key");
  if (it.tenant.size() + it.key.size() > storage::kMaxTenantPlusKey) {
    return Status(
        ErrorCode::INVALID_PARAMS,
        "tenant + key is " + std::to_string(it.tenant.size() + it.key.size()) +
            " bytes; at most " + std::to_string(storage::kMaxTenantPlusKey) +
            " fit in a record header (format v" +
            std::to_string(storage::kFormatVersion) + ")");
  }
  if (it.data == nullptr && it.size > 0) {
    return Status(ErrorCode::INVALID_PARAMS, "null data");
  }
  return Status::OK();
}

}  // namespace

IoRequest FileStorage::PendingRecord::WriteRequest() {
  RecordHeader h;
  h.kind = static_cast<uint16_t>(RecordKind::kData);
  h.file_id = file->id();
  h.offset = offset;
  h.seq = seq;
  h.value_len = len;
  h.data_checksum = checksum;
  header = AlignedBuffer(kBlockSize);
  storage::EncodeHeaderBlock(h, tenant, key, object_version, header.data());
  IoRequest q;
  q.op = IoOp::kWrite;
  q.fd = file->fd();
  q.offset = offset;
  q.Add(header.data(), kBlockSize);
  // Whole blocks of an aligned source go to disk straight from the
  // caller's memory; only the last partial block is copied and padded.
  const uint64_t direct =
      storage::IsAligned(data) ? len & ~(kBlockSize - 1) : 0;
  if (direct > 0) q.Add(const_cast<uint8_t*>(data), direct);
  const uint64_t rest = len - direct;
  if (rest > 0) {
    tail = AlignedBuffer(rest);
    std::memcpy(tail.data(), data + direct, rest);
    std::memset(tail.data() + rest, 0, tail.size() - rest);
    q.Add(tail.data(), tail.size());
  }
  return q;
}

Result<std::shared_ptr<SegmentFile>> FileStorage::ActiveFileFor(uint64_t span) {
  // A record larger than a whole segment file gets a file of its own.
  if (active_ && (active_->used_bytes == 0 ||
                  active_->used_bytes + span <= config_.segment_file_size)) {
    return active_;
  }
  if (active_) active_->sealed = true;
  active_.reset();
  auto made = SegmentFile::Create(config_.ssd_dir, next_file_id_);
  if (!made.ok()) return made.status();
  ++next_file_id_;
  active_ = *made;
  files_[active_->id()] = active_;
  return active_;
}

Status FileStorage::CheckDiskRoomLocked(uint64_t span) {
  if (!disk_full_) return Status::OK();
  // The configured capacity is more than the disk holds: ask the
  // filesystem (one statvfs per record while full; cheap next to a write
  // that would fail).
  struct statvfs vfs {};
  const uint64_t free_bytes =
      ::statvfs(config_.ssd_dir.c_str(), &vfs) == 0
          ? uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize)
          : 0;
  // Room for the record and a new segment file's metadata.
  if (free_bytes < span + (1ull << 20)) {
    return Status(ErrorCode::NO_AVAILABLE_HANDLE,
                  "SSD disk full: " + std::to_string(free_bytes) +
                      " bytes free on the filesystem, the record needs " +
                      std::to_string(span) + " (the tier holds " +
                      std::to_string(bytes_used_) + " of " +
                      std::to_string(config_.ssd_capacity_bytes) +
                      " configured bytes)");
  }
  disk_full_ = false;
  spdlog::info("SSD tier at {}: the disk has room again", config_.ssd_dir);
  return Status::OK();
}

void FileStorage::Reserve(std::span<PendingRecord> recs,
                          bool over_capacity_ok) {
  std::lock_guard<std::mutex> lock(files_mu_);
  for (PendingRecord& r : recs) {
    if (!r.status.ok()) continue;
    const uint64_t span = RecordSpan(r.len);
    r.status = CheckDiskRoomLocked(span);
    if (!r.status.ok()) continue;
    if (!over_capacity_ok && bytes_used_ + span > config_.ssd_capacity_bytes) {
      r.status =
          Status(ErrorCode::NO_AVAILABLE_HANDLE,
                 "SSD tier full: " + std::to_string(bytes_used_) + " of " +
                     std::to_string(config_.ssd_capacity_bytes) +
                     " bytes used, the record needs " + std::to_string(span));
      continue;
    }
    auto file = ActiveFileFor(span);
    if (!file.ok()) {
      write_errors_.fetch_add(1);
      r.status = file.status();
      continue;
    }
    r.file = *file;
    r.offset = r.file->used_bytes;
    r.file->used_bytes += span;
    ++r.file->inflight_writes;
    bytes_used_ += span;
    if (r.seq == 0) r.seq = next_seq_.fetch_add(1);
  }
}

void FileStorage::ReleaseReservation(SegmentFile* file) {
  std::lock_guard<std::mutex> lock(files_mu_);
  --file->inflight_writes;
}

void FileStorage::WriteRecords(std::span<PendingRecord> recs) {
  std::vector<IoRequest> reqs;
  std::vector<PendingRecord*> owners;
  reqs.reserve(recs.size());
  owners.reserve(recs.size());
  for (PendingRecord& r : recs) {
    if (!r.status.ok() || !r.file) continue;
    reqs.push_back(r.WriteRequest());
    owners.push_back(&r);
  }
  io_->Submit(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    PendingRecord& r = *owners[i];
    const uint64_t want = reqs[i].length();
    if (reqs[i].result != int64_t(want)) {
      write_errors_.fetch_add(1);
      r.status = WriteFailure(reqs[i].result, want, *r.file);
      if (reqs[i].result == -ENOSPC) MarkDiskFull();
    }
    r.header = AlignedBuffer();
    r.tail = AlignedBuffer();
  }
}

size_t FileStorage::Invalidate(const NamedRecords& records) {
  if (records.empty()) return 0;
  std::vector<AlignedBuffer> blocks;
  std::vector<IoRequest> reqs;
  blocks.reserve(records.size());
  reqs.reserve(records.size());
  for (const auto& [obj, e] : records) {
    RecordHeader h;
    h.kind = static_cast<uint16_t>(RecordKind::kDead);
    h.file_id = e.file->id();
    h.offset = e.offset;
    h.seq = e.seq;
    h.value_len = e.value_len;  // keeps the span, so a scan steps over it
    h.data_checksum = e.data_checksum;
    blocks.emplace_back(kBlockSize);
    storage::EncodeHeaderBlock(h, obj.tenant, obj.key, e.object_version,
                               blocks.back().data());
    IoRequest q;
    q.op = IoOp::kWrite;
    q.fd = e.file->fd();
    q.offset = e.offset;
    q.Add(blocks.back().data(), kBlockSize);
    reqs.push_back(q);
  }
  io_->Submit(reqs);
  size_t failed = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].result == int64_t(kBlockSize)) continue;
    ++failed;
    write_errors_.fetch_add(1);
    spdlog::warn("SSD tier: could not mark {}/{} dead in {}: {}",
                 records[i].first.tenant, records[i].first.key,
                 records[i].second.file->path(),
                 IoError(reqs[i].result, kBlockSize));
  }
  return failed;
}

std::vector<Status> FileStorage::BatchWrite(
    const std::vector<WriteItem>& items) {
  KVPOOL_FAILPOINT("storage.write");  // a slow disk, for fault tests
  std::vector<Status> out(items.size());
  std::vector<PendingRecord> recs;
  std::vector<size_t> slot;
  recs.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const WriteItem& it = items[i];
    out[i] = CheckWriteItem(it);
    if (!out[i].ok()) continue;
    PendingRecord r;
    r.tenant = it.tenant;
    r.key = it.key;
    r.data = static_cast<const uint8_t*>(it.data);
    r.len = it.size;
    r.checksum = storage::DataChecksum(it.data, it.size);
    r.object_version = it.object_version;
    // The same bytes again (a repeated offload) cost no I/O. Under a new
    // object version they are written again rather than the header patched
    // in place: a torn header write would lose the record, while a new
    // record either lands (and wins by its seq) or leaves the old one.
    if (auto cur = index_.Get(it.tenant, it.key);
        cur && cur->value_len == r.len && cur->data_checksum == r.checksum &&
        cur->object_version == r.object_version) {
      continue;
    }
    recs.push_back(std::move(r));
    slot.push_back(i);
  }
  Reserve(recs, /*over_capacity_ok=*/false);
  WriteRecords(recs);
  for (size_t j = 0; j < recs.size(); ++j) out[slot[j]] = recs[j].status;
  // Failing to mark an old version dead only risks its return after a
  // restart, where the newer version still wins: the write has succeeded.
  Invalidate(PublishWrites(recs));
  return out;
}

FileStorage::NamedRecords FileStorage::PublishWrites(
    std::span<PendingRecord> recs) {
  NamedRecords dead;
  for (PendingRecord& r : recs) {
    if (!r.file) continue;
    if (r.status.ok()) {
      // Counted live before it is visible, so that a concurrent supersede
      // never subtracts bytes that were not added yet.
      const IndexEntry mine = r.Entry();
      mine.file->live_bytes.fetch_add(mine.span());
      bytes_live_.fetch_add(mine.span());
      auto up = index_.Upsert(r.tenant, r.key, mine);
      // Either the old version or this one (beaten by a newer write) is dead.
      if (up.superseded) DropLive(*up.superseded);
      if (up.superseded) {
        dead.push_back(
            {ObjectOf(r.tenant, r.key, *up.superseded), *up.superseded});
      }
    }
    ReleaseReservation(r.file.get());
  }
  return dead;
}

}  // namespace kvpool
