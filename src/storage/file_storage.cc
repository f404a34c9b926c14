// FileStorage's life cycle and bookkeeping: configuration, Open (lock the
// directory, pick the I/O backend, recover), lookups, removes, eviction
// candidates and statistics. The data paths live beside it, one file each:
// file_storage_write.cc (space reservation, BatchWrite, dead headers),
// file_storage_read.cc (BatchRead), file_storage_recovery.cc (the start-up
// scan) and file_storage_gc.cc (garbage collection).
#include "storage/file_storage.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "common/thread_name.h"
#include "storage/file_storage_internal.h"
#include "storage/record_format.h"

namespace kvpool {

using storage::IndexEntry;
using storage::IoBackend;
using storage::kBlockSize;
using storage::ObjectOf;
using storage::RecordSpan;

namespace {

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

// Creates `dir` and takes the exclusive lock on its LOCK file: two stores
// appending to one directory would corrupt each other. Returns the locked
// descriptor.
Result<int> LockDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  "cannot create " + dir + ": " + ec.message());
  }
  const std::string lock_path = dir + "/LOCK";
  const int lock_fd =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  "open " + lock_path + ": " + std::strerror(errno));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd);
    return Status(
        ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
        dir + " is in use by another FileStorage (" + std::strerror(err) + ")");
  }
  return lock_fd;
}

// The backend config.ssd_io_backend asks for (io_backend_override is
// handled by the caller).
Result<std::unique_ptr<IoBackend>> NewIoBackend(
    const FileStorageConfig& config) {
  if (config.ssd_io_backend == SsdIoBackend::kPread) {
    return storage::NewPreadBackend();
  }
  auto ring = storage::NewIoUringBackend(config.ssd_io_queue_depth,
                                         config.ssd_io_rings);
  if (ring.ok()) return std::move(ring).value();
  if (config.ssd_io_backend == SsdIoBackend::kIoUring) return ring.status();
  return FallBackToPread(ring.status());
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
  auto lock_fd = LockDirectory(config.ssd_dir);
  if (!lock_fd.ok()) return lock_fd.status();
  std::unique_ptr<FileStorage> fs(new FileStorage(config));
  fs->lock_fd_ = *lock_fd;  // released by the destructor, also on failure
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
    auto backend = NewIoBackend(config);
    if (!backend.ok()) return backend.status();
    fs->owned_io_ = std::move(backend).value();
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

void FileStorage::DropLive(const IndexEntry& e) {
  e.file->live_bytes.fetch_sub(e.span());
  bytes_live_.fetch_sub(e.span());
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
