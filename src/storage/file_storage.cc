#include "storage/file_storage.h"
#include "common/failpoint.h"

#include "common/thread_name.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "storage/aligned_buffer.h"
#include "storage/record_format.h"
#include "storage/segment_scanner.h"

namespace kvpool {

using storage::AlignedBuffer;
using storage::AlignUp;
using storage::IndexEntry;
using storage::IoBackend;
using storage::IoOp;
using storage::IoRequest;
using storage::kBlockSize;
using storage::RecordHeader;
using storage::RecordKind;
using storage::RecordSpan;
using storage::SegmentFile;

namespace {

// GC moves records in chunks so that its buffers stay bounded.
constexpr size_t kGcChunkRecords = 32;
constexpr uint64_t kGcChunkBytes = 64ull << 20;
// A read that meets a record invalidated under it looks the key up again.
constexpr int kReadAttempts = 3;
// How a batch of reads is cut into pieces (see BatchRead); measured on
// virtio disks, where 256 KiB requests moved fewer bytes per second than
// whole 1-4 MiB values once several values were in flight.
constexpr uint64_t kMinReadPiece = 256ull << 10;
constexpr uint64_t kReadPiecesPerBatch = 8;

std::string IoError(int64_t result, uint64_t expected) {
  if (result < 0) return std::strerror(int(-result));
  return "short transfer (" + std::to_string(result) + " of " +
         std::to_string(expected) + " bytes)";
}

Status WriteFailure(int64_t result, uint64_t expected, const SegmentFile& f) {
  std::string what = result == -ENOSPC ? "disk full" : "write failed";
  return Status(ErrorCode::FILE_WRITE_FAIL,
                what + " on " + f.path() + ": " + IoError(result, expected));
}

StoredObject ObjectOf(std::string_view tenant, std::string_view key,
                      const IndexEntry& e) {
  return StoredObject{std::string(tenant), std::string(key), e.value_len, e.seq,
                      e.object_version};
}

std::unique_ptr<IoBackend> FallBackToPread(const Status& why) {
  static std::once_flag logged;
  std::call_once(logged, [&] {
    spdlog::warn(
        "io_uring is not available ({}); the SSD tier uses pread/pwrite with "
        "O_DIRECT",
        why.message());
  });
  return storage::NewPreadBackend();
}

}  // namespace

Status FileStorageConfig::Validate() const {
  auto bad = [](const std::string& m) {
    return Status(ErrorCode::INVALID_PARAMS, m);
  };
  if (ssd_dir.empty()) return bad("ssd_dir is empty");
  if (segment_file_size < 2 * kBlockSize ||
      !storage::IsAligned(segment_file_size)) {
    return bad("segment_file_size must be a multiple of 4096 and >= 8192");
  }
  if (ssd_capacity_bytes == 0) return bad("ssd_capacity_bytes is 0");
  if (!(ssd_low_watermark_ratio > 0 &&
        ssd_low_watermark_ratio <= ssd_high_watermark_ratio &&
        ssd_high_watermark_ratio <= 1)) {
    return bad(
        "need 0 < ssd_low_watermark_ratio <= ssd_high_watermark_ratio "
        "<= 1");
  }
  if (!(ssd_gc_dead_ratio > 0 && ssd_gc_dead_ratio <= 1)) {
    return bad("ssd_gc_dead_ratio must be in (0, 1]");
  }
  if (ssd_gc_interval_ms < 0) return bad("ssd_gc_interval_ms is negative");
  if (ssd_verify_threads > 64) {
    return bad("ssd_verify_threads must be at most 64");
  }
  if (ssd_io_queue_depth == 0 || ssd_io_rings == 0) {
    return bad("ssd_io_queue_depth and ssd_io_rings must be positive");
  }
  return Status::OK();
}

// One record on its way to disk.
struct FileStorage::PendingRecord {
  std::string_view tenant;
  std::string_view key;
  const uint8_t* data = nullptr;
  uint64_t len = 0;
  uint64_t checksum = 0;
  uint64_t seq = 0;  // 0: a new write, numbered at reservation
  uint64_t object_version = 0;

  Status status;
  std::shared_ptr<SegmentFile> file;  // set once space is reserved
  uint64_t offset = 0;
  AlignedBuffer header;
  AlignedBuffer tail;

  IndexEntry Entry() const {
    return IndexEntry{file, offset, len, seq, checksum, object_version};
  }
};

FileStorage::FileStorage(const FileStorageConfig& config)
    : config_(config),
      verify_pool_(
          std::make_unique<storage::VerifyPool>(config.ssd_verify_threads)) {}

FileStorage::~FileStorage() {
  {
    std::lock_guard<std::mutex> lock(gc_thread_mu_);
    stopping_ = true;
  }
  gc_cv_.notify_all();
  if (gc_thread_.joinable()) gc_thread_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<FileStorage>> FileStorage::Open(
    const FileStorageConfig& config) {
  if (Status st = config.Validate(); !st.ok()) return st;
  std::error_code ec;
  std::filesystem::create_directories(config.ssd_dir, ec);
  if (ec) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  "cannot create " + config.ssd_dir + ": " + ec.message());
  }
  // Two stores appending to one directory would corrupt each other.
  const std::string lock_path = config.ssd_dir + "/LOCK";
  const int lock_fd =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  "open " + lock_path + ": " + std::strerror(errno));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd);
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  config.ssd_dir + " is in use by another FileStorage (" +
                      std::strerror(err) + ")");
  }
  std::unique_ptr<FileStorage> fs(new FileStorage(config));
  fs->lock_fd_ = lock_fd;  // released by the destructor, also on failure
  bool full_at_open = false;
  if (Status st = storage::ProbeDirectIo(config.ssd_dir); !st.ok()) {
    // A full disk still serves what it holds: start, and write nothing
    // until it has room.
    if (st.code() != ErrorCode::NO_AVAILABLE_HANDLE) return st;
    full_at_open = true;
  }

  if (config.io_backend_override) {
    fs->io_ = config.io_backend_override.get();
  } else {
    if (config.ssd_io_backend != SsdIoBackend::kPread) {
      auto ring = storage::NewIoUringBackend(config.ssd_io_queue_depth,
                                             config.ssd_io_rings);
      if (ring.ok()) {
        fs->owned_io_ = std::move(ring).value();
      } else if (config.ssd_io_backend == SsdIoBackend::kIoUring) {
        return ring.status();
      } else {
        fs->owned_io_ = FallBackToPread(ring.status());
      }
    } else {
      fs->owned_io_ = storage::NewPreadBackend();
    }
    fs->io_ = fs->owned_io_.get();
  }
  if (Status st = fs->Recover(); !st.ok()) return st;
  if (full_at_open) fs->MarkDiskFull();
  if (config.ssd_gc_interval_ms > 0) {
    fs->gc_thread_ = std::thread([p = fs.get()] {
      SetThreadName("kvp-ssd-gc");
      p->GcLoop();
    });
  }
  return fs;
}

Status FileStorage::Recover() {
  std::vector<uint32_t> ids;
  std::error_code ec;
  for (const auto& de :
       std::filesystem::directory_iterator(config_.ssd_dir, ec)) {
    uint32_t id = 0;
    if (storage::ParseSegmentFileName(de.path().filename().string(), &id)) {
      ids.push_back(id);
    }
  }
  if (ec) {
    return Status(ErrorCode::FILE_READ_FAIL,
                  "cannot list " + config_.ssd_dir + ": " + ec.message());
  }
  std::sort(ids.begin(), ids.end());

  // Versions of a key that lost to a newer one (left by a crash between
  // writing a new version and invalidating the old one).
  std::vector<std::pair<StoredObject, IndexEntry>> losers;
  uint64_t max_seq = 0;
  std::unordered_set<const SegmentFile*> unreadable;
  for (uint32_t id : ids) {
    uint64_t size = 0;
    auto opened = SegmentFile::OpenExisting(config_.ssd_dir, id, &size);
    if (!opened.ok()) return opened.status();
    std::shared_ptr<SegmentFile> f = std::move(opened).value();
    f->used_bytes = size;
    f->sealed = true;
    bytes_used_ += size;
    files_[id] = f;
    next_file_id_ = std::max(next_file_id_, id + 1);

    storage::ScanCounts counts;
    Status st = storage::ScanSegment(
        io_, *f, size, config_.ssd_verify_on_open,
        [&](const storage::ScannedRecord& r) {
          IndexEntry e{f,     r.offset,        r.value_len,
                       r.seq, r.data_checksum, r.object_version};
          auto out = index_.Upsert(r.tenant, r.key, e);
          if (out.superseded) {
            losers.push_back(
                {ObjectOf(r.tenant, r.key, *out.superseded), *out.superseded});
          }
        },
        &counts);
    if (!st.ok()) {
      // The rest of this file is unreadable; what was found stays usable,
      // and the file is kept (it may hold records past the bad spot).
      unreadable.insert(f.get());
      read_errors_.fetch_add(1);
      spdlog::warn("SSD tier: {}", st.message());
    }
    if (counts.corrupt > 0) {
      spdlog::warn("SSD tier: skipped {} damaged record(s) in {}",
                   counts.corrupt, f->path());
    }
    corrupt_skipped_.fetch_add(counts.corrupt);
    max_seq = std::max(max_seq, counts.max_seq);
  }
  next_seq_.store(max_seq + 1);

  index_.ForEach([&](std::string_view, std::string_view, const IndexEntry& e) {
    e.file->live_bytes.fetch_add(e.span());
    bytes_live_.fetch_add(e.span());
  });
  // Files without a live record are only garbage now.
  std::unordered_set<const SegmentFile*> deleted;
  for (auto it = files_.begin(); it != files_.end();) {
    SegmentFile& f = *it->second;
    if (f.live_bytes.load() != 0 || unreadable.count(&f) > 0) {
      ++it;
      continue;
    }
    ::unlink(f.path().c_str());
    bytes_used_ -= f.used_bytes;
    deleted.insert(&f);
    it = files_.erase(it);
  }
  std::erase_if(losers, [&](const auto& l) {
    return deleted.count(l.second.file.get()) > 0;
  });
  Invalidate(losers);
  spdlog::info(
      "SSD tier at {}: {} file(s), {} record(s), {} of {} bytes used, {} "
      "damaged record(s) skipped, backend {}",
      config_.ssd_dir, files_.size(), index_.size(), bytes_used_,
      config_.ssd_capacity_bytes, corrupt_skipped_.load(), io_->name());
  return Status::OK();
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

void FileStorage::Reserve(std::span<PendingRecord> recs,
                          bool over_capacity_ok) {
  std::lock_guard<std::mutex> lock(files_mu_);
  for (PendingRecord& r : recs) {
    if (!r.status.ok()) continue;
    const uint64_t span = RecordSpan(r.len);
    if (disk_full_) {
      // The configured capacity is more than the disk holds: ask the
      // filesystem (one statvfs per record while full; cheap next to a
      // write that would fail).
      struct statvfs vfs {};
      const uint64_t free_bytes =
          ::statvfs(config_.ssd_dir.c_str(), &vfs) == 0
              ? uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize)
              : 0;
      // Room for the record and a new segment file's metadata.
      if (free_bytes < span + (1ull << 20)) {
        r.status =
            Status(ErrorCode::NO_AVAILABLE_HANDLE,
                   "SSD disk full: " + std::to_string(free_bytes) +
                       " bytes free on the filesystem, the record needs " +
                       std::to_string(span) + " (the tier holds " +
                       std::to_string(bytes_used_) + " of " +
                       std::to_string(config_.ssd_capacity_bytes) +
                       " configured bytes)");
        continue;
      }
      disk_full_ = false;
      spdlog::info("SSD tier at {}: the disk has room again", config_.ssd_dir);
    }
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
    RecordHeader h;
    h.kind = static_cast<uint16_t>(RecordKind::kData);
    h.file_id = r.file->id();
    h.offset = r.offset;
    h.seq = r.seq;
    h.value_len = r.len;
    h.data_checksum = r.checksum;
    r.header = AlignedBuffer(kBlockSize);
    storage::EncodeHeaderBlock(h, r.tenant, r.key, r.object_version,
                               r.header.data());
    IoRequest q;
    q.op = IoOp::kWrite;
    q.fd = r.file->fd();
    q.offset = r.offset;
    q.Add(r.header.data(), kBlockSize);
    // Whole blocks of an aligned source go to disk straight from the
    // caller's memory; only the last partial block is copied and padded.
    const uint64_t direct =
        storage::IsAligned(r.data) ? r.len & ~(kBlockSize - 1) : 0;
    if (direct > 0) q.Add(const_cast<uint8_t*>(r.data), direct);
    const uint64_t rest = r.len - direct;
    if (rest > 0) {
      r.tail = AlignedBuffer(rest);
      std::memcpy(r.tail.data(), r.data + direct, rest);
      std::memset(r.tail.data() + rest, 0, r.tail.size() - rest);
      q.Add(r.tail.data(), r.tail.size());
    }
    reqs.push_back(q);
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

size_t FileStorage::Invalidate(
    const std::vector<std::pair<StoredObject, IndexEntry>>& records) {
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

void FileStorage::DropLive(const IndexEntry& e) {
  e.file->live_bytes.fetch_sub(e.span());
  bytes_live_.fetch_sub(e.span());
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
    if (it.key.empty()) {
      out[i] = Status(ErrorCode::INVALID_PARAMS, "empty key");
      continue;
    }
    if (it.tenant.size() + it.key.size() > storage::kMaxTenantPlusKey) {
      out[i] = Status(ErrorCode::INVALID_PARAMS,
                      "tenant + key is " +
                          std::to_string(it.tenant.size() + it.key.size()) +
                          " bytes; at most " +
                          std::to_string(storage::kMaxTenantPlusKey) +
                          " fit in a record header (format v" +
                          std::to_string(storage::kFormatVersion) + ")");
      continue;
    }
    if (it.data == nullptr && it.size > 0) {
      out[i] = Status(ErrorCode::INVALID_PARAMS, "null data");
      continue;
    }
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

  std::vector<std::pair<StoredObject, IndexEntry>> dead;
  for (size_t j = 0; j < recs.size(); ++j) {
    PendingRecord& r = recs[j];
    out[slot[j]] = r.status;
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
  // Failing to mark an old version dead only risks its return after a
  // restart, where the newer version still wins: the write has succeeded.
  Invalidate(dead);
  return out;
}

std::vector<Result<uint64_t>> FileStorage::BatchRead(
    const std::vector<ReadItem>& items) {
  KVPOOL_FAILPOINT("storage.read");  // a slow disk, for fault tests
  std::vector<Result<uint64_t>> out(items.size(),
                                    Result<uint64_t>(ErrorCode::OK));
  // One object on its way in. Whole blocks of the value go straight into
  // dest when dest is aligned, the rest into bounce. The value is read in
  // pieces, and each piece is hashed as soon as it and those before it have
  // arrived, so the checksum is computed while later pieces are in flight.
  struct Plan {
    size_t item;
    IndexEntry entry;
    uint8_t* dest = nullptr;
    AlignedBuffer header;
    AlignedBuffer bounce;
    uint64_t direct = 0;  // bytes read straight into dest
    size_t first_req = 0;
    size_t pieces = 0;
    size_t hashed = 0;         // pieces hashed so far, in order
    size_t arrived_count = 0;  // pieces arrived (when the pool hashes)
    std::vector<bool> arrived;
    std::unique_ptr<storage::DataHasher> hasher;
    std::string io_error;  // first failed request, if any
  };
  std::vector<size_t> todo(items.size());
  for (size_t i = 0; i < items.size(); ++i) todo[i] = i;

  for (int attempt = 0; attempt < kReadAttempts && !todo.empty(); ++attempt) {
    std::vector<Plan> plans;
    plans.reserve(todo.size());
    uint64_t batch_bytes = 0;
    for (size_t i : todo) {
      const ReadItem& it = items[i];
      auto e = index_.Get(it.tenant, it.key);
      if (!e) {
        out[i] = Status(ErrorCode::OBJECT_NOT_FOUND,
                        it.tenant + "/" + it.key + " is not on SSD");
        continue;
      }
      if (e->value_len > it.capacity) {
        out[i] = Status(ErrorCode::BUFFER_OVERFLOW,
                        "value of " + std::to_string(e->value_len) +
                            " bytes, buffer of " + std::to_string(it.capacity));
        continue;
      }
      if (it.dest == nullptr && e->value_len > 0) {
        out[i] = Status(ErrorCode::INVALID_PARAMS, "null dest");
        continue;
      }
      Plan& p = plans.emplace_back();
      p.item = i;
      p.entry = std::move(*e);
      p.dest = static_cast<uint8_t*>(it.dest);
      batch_bytes += AlignUp(p.entry.value_len);
    }
    // About kReadPiecesPerBatch pieces per batch: a lone large value is cut
    // so that its hashing overlaps its own I/O, while in a batch of many
    // values each value is one piece (hashing one overlaps the reading of
    // the others, and fewer, larger requests move more bytes per second).
    const uint64_t piece = std::max<uint64_t>(
        kMinReadPiece, AlignUp(batch_bytes / kReadPiecesPerBatch + 1));

    std::vector<IoRequest> reqs;
    std::vector<uint32_t> owner;  // plan of each request
    for (size_t j = 0; j < plans.size(); ++j) {
      Plan& p = plans[j];
      const uint64_t len = p.entry.value_len;
      const uint64_t padded = AlignUp(len);
      p.header = AlignedBuffer(kBlockSize);
      p.direct = storage::IsAligned(p.dest) ? len & ~(kBlockSize - 1) : 0;
      if (padded > p.direct) p.bounce = AlignedBuffer(padded - p.direct);
      p.hasher = std::make_unique<storage::DataHasher>();
      p.pieces = (padded + piece - 1) / piece;
      p.arrived.assign(p.pieces, false);
      p.first_req = reqs.size();
      for (size_t k = 0; k < std::max<size_t>(p.pieces, 1); ++k) {
        const uint64_t a = k * piece, b = std::min(padded, a + piece);
        IoRequest q;
        q.op = IoOp::kRead;
        q.fd = p.entry.file->fd();
        q.offset = p.entry.offset + kBlockSize + a;
        if (k == 0) {
          q.offset = p.entry.offset;
          q.Add(p.header.data(), kBlockSize);
        }
        if (a < p.direct) q.Add(p.dest + a, std::min(b, p.direct) - a);
        if (b > p.direct) {
          const uint64_t from = std::max(a, p.direct);
          q.Add(p.bounce.data() + (from - p.direct), b - from);
        }
        reqs.push_back(q);
        owner.push_back(uint32_t(j));
      }
    }
    // Hashes [a, b) of a value, wherever its bytes landed.
    auto hash_range = [](Plan& p, uint64_t a, uint64_t b) {
      if (a < p.direct) p.hasher->Update(p.dest + a, std::min(b, p.direct) - a);
      if (b > p.direct) {
        const uint64_t from = std::max(a, p.direct);
        p.hasher->Update(p.bounce.data() + (from - p.direct), b - from);
      }
    };
    // A lone value is hashed here piece by piece, overlapping its own I/O;
    // the values of a batch are handed whole to the verify pool as they
    // complete, so that another core hashes while this one reaps.
    const bool use_pool = plans.size() > 1 && verify_pool_->threads() > 0;
    storage::VerifyPool::Group verify(verify_pool_.get());
    io_->Submit(reqs, [&](size_t r) {
      Plan& p = plans[owner[r]];
      const uint64_t want = reqs[r].length();
      if (reqs[r].result != int64_t(want)) {
        if (p.io_error.empty()) p.io_error = IoError(reqs[r].result, want);
        return;
      }
      if (p.pieces == 0 || !p.io_error.empty()) return;
      p.arrived[r - p.first_req] = true;
      if (use_pool) {
        if (++p.arrived_count < p.pieces) return;
        verify.Run([&p, &hash_range] {
          hash_range(p, 0, p.entry.value_len);
          p.hashed = p.pieces;
        });
        return;
      }
      while (p.hashed < p.pieces && p.arrived[p.hashed]) {
        const uint64_t a = p.hashed * piece;
        hash_range(p, a, std::min(p.entry.value_len, a + piece));
        ++p.hashed;
      }
    });
    verify.Wait();

    std::vector<size_t> retry;
    for (Plan& p : plans) {
      const ReadItem& it = items[p.item];
      const IndexEntry& e = p.entry;
      if (!p.io_error.empty()) {
        read_errors_.fetch_add(1);
        out[p.item] = Status(ErrorCode::FILE_READ_FAIL,
                             "read of " + e.file->path() + " at " +
                                 std::to_string(e.offset) + ": " + p.io_error);
        continue;
      }
      auto parsed =
          storage::ParseHeaderBlock(p.header.data(), e.file->id(), e.offset);
      std::string damage;
      if (parsed.ok() && parsed->kind() == RecordKind::kDead) {
        damage = "record is dead";
      } else if (!parsed.ok()) {
        damage = parsed.status().message();
      } else if (parsed->tenant != it.tenant || parsed->key != it.key ||
                 parsed->header.value_len != e.value_len ||
                 parsed->header.seq != e.seq ||
                 parsed->header.data_checksum != e.data_checksum ||
                 parsed->object_version != e.object_version) {
        damage = "header does not match the index";
      } else if (p.hashed != p.pieces ||
                 p.hasher->Digest() != e.data_checksum) {
        damage = "value checksum";
      }
      if (!damage.empty()) {
        // Removed or rewritten while this read was on its way (its header
        // was being marked dead): not damage, and the key may live
        // elsewhere now.
        auto now = index_.Get(it.tenant, it.key);
        if (!now || !now->SameRecord(e)) {
          if (now) {
            retry.push_back(p.item);
          } else {
            out[p.item] = Status(ErrorCode::OBJECT_NOT_FOUND,
                                 it.tenant + "/" + it.key + " was removed");
          }
          continue;
        }
        if (index_.RemoveIf(it.tenant, it.key, e)) {
          DropLive(e);
          corrupt_reads_.fetch_add(1);
          spdlog::warn("SSD tier: {}/{} damaged in {} at {} ({}); dropped",
                       it.tenant, it.key, e.file->path(), e.offset, damage);
        }
        out[p.item] = Status(ErrorCode::OBJECT_NOT_FOUND,
                             "checksum mismatch (" + damage + ") for " +
                                 it.tenant + "/" + it.key + "; dropped");
        continue;
      }
      if (e.value_len > p.direct) {
        std::memcpy(p.dest + p.direct, p.bounce.data(), e.value_len - p.direct);
      }
      out[p.item] = e.value_len;
      if (it.checksum_out != nullptr) *it.checksum_out = e.data_checksum;
      if (it.version_out != nullptr) *it.version_out = e.object_version;
      values_read_.fetch_add(1);
    }
    todo = std::move(retry);
  }
  for (size_t i : todo) {
    out[i] = Status(
        ErrorCode::OBJECT_NOT_FOUND,
        items[i].tenant + "/" + items[i].key + " kept moving while being read");
  }
  return out;
}

Result<uint64_t> FileStorage::LookupSize(std::string_view tenant,
                                         std::string_view key) const {
  auto e = index_.Get(tenant, key);
  if (!e) return Status(ErrorCode::OBJECT_NOT_FOUND);
  return e->value_len;
}

Result<uint64_t> FileStorage::LookupVersion(std::string_view tenant,
                                            std::string_view key) const {
  auto e = index_.Get(tenant, key);
  if (!e) return Status(ErrorCode::OBJECT_NOT_FOUND);
  return e->object_version;
}

Status FileStorage::Remove(std::string_view tenant, std::string_view key) {
  auto e = index_.Remove(tenant, key);
  if (!e) return Status(ErrorCode::OBJECT_NOT_FOUND);
  return MarkRemoved(tenant, key, *e);
}

Status FileStorage::RemoveIfVersion(std::string_view tenant,
                                    std::string_view key,
                                    uint64_t object_version) {
  auto e = index_.RemoveIfVersion(tenant, key, object_version);
  if (!e) {
    return Status(ErrorCode::OBJECT_NOT_FOUND,
                  std::string(tenant) + "/" + std::string(key) +
                      " is not on SSD at object version " +
                      std::to_string(object_version));
  }
  return MarkRemoved(tenant, key, *e);
}

Status FileStorage::MarkRemoved(std::string_view tenant, std::string_view key,
                                const IndexEntry& e) {
  DropLive(e);
  if (Invalidate({{ObjectOf(tenant, key, e), e}}) > 0) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  "removed, but the record could not be marked dead on disk; "
                  "it may come back after a restart");
  }
  return Status::OK();
}

std::vector<StoredObject> FileStorage::List() const {
  std::vector<StoredObject> out;
  index_.ForEach(
      [&](std::string_view tenant, std::string_view key, const IndexEntry& e) {
        out.push_back(ObjectOf(tenant, key, e));
      });
  return out;
}

std::vector<StoredObject> FileStorage::PickEvictionCandidates() const {
  const double cap = double(config_.ssd_capacity_bytes);
  uint64_t used;
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    used = bytes_used_;
  }
  if (double(used) <= config_.ssd_high_watermark_ratio * cap) return {};
  const double target = config_.ssd_low_watermark_ratio * cap;
  double live = double(bytes_live_.load());
  // Dead bytes alone are above the mark: collection frees them, no object
  // needs to go.
  if (live < target) return {};
  std::vector<StoredObject> all = List();
  std::sort(all.begin(), all.end(),
            [](const StoredObject& a, const StoredObject& b) {
              return a.seq < b.seq;
            });
  std::vector<StoredObject> out;
  for (StoredObject& o : all) {
    if (live < target) break;
    live -= double(RecordSpan(o.size));
    out.push_back(std::move(o));
  }
  return out;
}

Status FileStorage::CollectGarbage() {
  std::lock_guard<std::mutex> gc_lock(gc_mu_);
  gc_runs_.fetch_add(1);
  std::vector<std::shared_ptr<SegmentFile>> chosen;
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    std::vector<std::shared_ptr<SegmentFile>> others;
    uint64_t projected = bytes_used_;
    for (auto& [id, f] : files_) {
      // Files still taking appends, or with appends in flight, are never
      // collected: a record could land after its file was judged.
      if (f == active_ || !f->sealed || f->inflight_writes > 0) continue;
      const uint64_t live = f->live_bytes.load();
      const uint64_t dead = f->used_bytes - std::min(live, f->used_bytes);
      if (dead == 0) continue;
      if (double(dead) >= config_.ssd_gc_dead_ratio * double(f->used_bytes)) {
        chosen.push_back(f);
        projected -= dead;
      } else {
        others.push_back(f);
      }
    }
    // Under pressure, also the files with the most dead bytes until the low
    // watermark is reached.
    const double cap = double(config_.ssd_capacity_bytes);
    if (double(bytes_used_) > config_.ssd_high_watermark_ratio * cap) {
      auto dead_of = [](const std::shared_ptr<SegmentFile>& f) {
        return f->used_bytes - std::min(f->live_bytes.load(), f->used_bytes);
      };
      std::sort(others.begin(), others.end(),
                [&](const auto& a, const auto& b) {
                  return dead_of(a) > dead_of(b);
                });
      for (auto& f : others) {
        if (double(projected) <= config_.ssd_low_watermark_ratio * cap) break;
        projected -= dead_of(f);
        chosen.push_back(f);
      }
    }
  }
  if (chosen.empty()) return Status::OK();

  std::unordered_map<const SegmentFile*, size_t> pos;
  for (size_t i = 0; i < chosen.size(); ++i) pos[chosen[i].get()] = i;
  std::vector<std::vector<std::pair<StoredObject, IndexEntry>>> live(
      chosen.size());
  index_.ForEach(
      [&](std::string_view tenant, std::string_view key, const IndexEntry& e) {
        auto it = pos.find(e.file.get());
        if (it == pos.end()) return;
        live[it->second].push_back({ObjectOf(tenant, key, e), e});
      });
  Status first_error;
  for (size_t i = 0; i < chosen.size(); ++i) {
    Status st = CollectFile(chosen[i], std::move(live[i]));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  return first_error;
}

Status FileStorage::CollectFile(
    const std::shared_ptr<SegmentFile>& file,
    std::vector<std::pair<StoredObject, IndexEntry>> live) {
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return a.second.offset < b.second.offset;
  });
  size_t next = 0;
  while (next < live.size()) {
    // Read a chunk of records, whole (header and value), in one batch.
    size_t end = next;
    uint64_t bytes = 0;
    while (end < live.size() && end - next < kGcChunkRecords &&
           (end == next || bytes + live[end].second.span() <= kGcChunkBytes)) {
      bytes += live[end].second.span();
      ++end;
    }
    std::vector<AlignedBuffer> bufs;
    std::vector<IoRequest> reqs;
    for (size_t k = next; k < end; ++k) {
      const IndexEntry& e = live[k].second;
      bufs.emplace_back(e.span());
      IoRequest q;
      q.op = IoOp::kRead;
      q.fd = file->fd();
      q.offset = e.offset;
      q.Add(bufs.back().data(), e.span());
      reqs.push_back(q);
    }
    io_->Submit(reqs);

    std::vector<PendingRecord> recs;
    std::vector<size_t> from;  // index into live of each rec
    for (size_t k = next; k < end; ++k) {
      const auto& [obj, e] = live[k];
      const IoRequest& q = reqs[k - next];
      if (q.result != int64_t(q.length())) {
        read_errors_.fetch_add(1);
        return Status(ErrorCode::FILE_READ_FAIL,
                      "garbage collection of " + file->path() + ": " +
                          IoError(q.result, q.length()));
      }
      const uint8_t* b = bufs[k - next].data();
      auto parsed = storage::ParseHeaderBlock(b, file->id(), e.offset);
      if (parsed.ok() && parsed->kind() == RecordKind::kDead) continue;
      if (!parsed.ok() || parsed->header.seq != e.seq ||
          parsed->object_version != e.object_version ||
          storage::DataChecksum(b + kBlockSize, e.value_len) !=
              e.data_checksum) {
        // Never copy damage forward: the key becomes a miss instead. (If
        // the key moved on meanwhile, this was a header being marked dead.)
        if (index_.RemoveIf(obj.tenant, obj.key, e)) {
          DropLive(e);
          corrupt_reads_.fetch_add(1);
        }
        continue;
      }
      PendingRecord r;
      r.tenant = obj.tenant;
      r.key = obj.key;
      r.data = b + kBlockSize;
      r.len = e.value_len;
      r.checksum = e.data_checksum;
      r.seq = e.seq;  // the age survives the move
      r.object_version = e.object_version;
      recs.push_back(std::move(r));
      from.push_back(k);
    }
    // Collection may overshoot the capacity by what it moves: it must be
    // able to run on a full disk, and it frees more than it takes.
    Reserve(recs, /*over_capacity_ok=*/true);
    WriteRecords(recs);
    Status failed;
    std::vector<std::pair<StoredObject, IndexEntry>> lost;
    for (size_t j = 0; j < recs.size(); ++j) {
      PendingRecord& r = recs[j];
      const auto& [obj, old] = live[from[j]];
      if (!r.status.ok()) {
        if (failed.ok()) failed = r.status;
      } else {
        // As in BatchWrite: live before visible.
        r.file->live_bytes.fetch_add(RecordSpan(r.len));
        if (index_.ReplaceIf(obj.tenant, obj.key, old, r.Entry())) {
          file->live_bytes.fetch_sub(old.span());
          gc_records_moved_.fetch_add(1);
        } else {
          // Removed or rewritten meanwhile: the copy must not come back.
          r.file->live_bytes.fetch_sub(RecordSpan(r.len));
          lost.push_back({obj, r.Entry()});
        }
      }
      if (r.file) ReleaseReservation(r.file.get());
    }
    Invalidate(lost);
    if (!failed.ok()) return failed;
    next = end;
  }

  if (uint64_t left = file->live_bytes.load(); left != 0) {
    spdlog::warn("SSD tier: {} still holds {} live bytes after collection",
                 file->path(), left);
    return Status::OK();
  }
  uint64_t freed;
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    // Unlinking first keeps the file in the table if the unlink fails, so
    // that its records cannot come back after a restart unaccounted for.
    if (::unlink(file->path().c_str()) != 0 && errno != ENOENT) {
      return Status(ErrorCode::FILE_WRITE_FAIL,
                    "unlink " + file->path() + ": " + std::strerror(errno));
    }
    files_.erase(file->id());
    freed = file->used_bytes;
    bytes_used_ -= freed;
  }
  gc_files_deleted_.fetch_add(1);
  gc_bytes_reclaimed_.fetch_add(freed);
  return Status::OK();
}

void FileStorage::GcLoop() {
  std::unique_lock<std::mutex> lock(gc_thread_mu_);
  while (!stopping_) {
    gc_cv_.wait_for(lock, std::chrono::milliseconds(config_.ssd_gc_interval_ms),
                    [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (Status st = CollectGarbage(); !st.ok()) {
      spdlog::warn("SSD tier garbage collection: {}", st.ToString());
    }
    lock.lock();
  }
}

void FileStorage::MarkDiskFull() {
  std::lock_guard<std::mutex> lock(files_mu_);
  if (!disk_full_) {
    spdlog::warn(
        "SSD tier at {}: the disk is full at {} bytes of records (configured "
        "capacity {}); writes fail fast until it has room",
        config_.ssd_dir, bytes_used_, config_.ssd_capacity_bytes);
  }
  disk_full_ = true;
  disk_full_events_.fetch_add(1);
}

FileStorageStats FileStorage::GetStats() const {
  FileStorageStats s;
  s.capacity_bytes = config_.ssd_capacity_bytes;
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    s.bytes_used = bytes_used_;
    s.files = files_.size();
    s.disk_full = disk_full_;
  }
  s.disk_full_events = disk_full_events_.load();
  s.bytes_live = bytes_live_.load();
  s.records = index_.size();
  s.corrupt_skipped = corrupt_skipped_.load();
  s.corrupt_reads = corrupt_reads_.load();
  s.values_read = values_read_.load();
  s.read_errors = read_errors_.load();
  s.write_errors = write_errors_.load();
  s.gc_runs = gc_runs_.load();
  s.gc_files_deleted = gc_files_deleted_.load();
  s.gc_records_moved = gc_records_moved_.load();
  s.gc_bytes_reclaimed = gc_bytes_reclaimed_.load();
  s.io_uring_enabled = io_->is_io_uring();
  return s;
}

}  // namespace kvpool
