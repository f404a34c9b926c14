#include "transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace kvpool {
namespace {

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

// Closes the descriptor on every exit path; the mapping outlives it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

ShmSegment::ShmSegment(std::string path, uint8_t* base, uint64_t size,
                       bool owner, uint64_t dev, uint64_t ino, uint64_t offset,
                       uint64_t block_size)
    : path_(std::move(path)),
      base_(base),
      size_(size),
      owner_(owner),
      dev_(dev),
      ino_(ino),
      offset_(offset),
      block_size_(block_size) {}

// The owner's lock: a read lock on byte 0, so it never conflicts with
// another owner's test of the same kind and any number of viewers can ask.
struct flock OwnerLockRange(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  return fl;
}

void ShmSegment::Unlink() {
  if (owner_) ::unlink(path_.c_str());
  owner_ = false;
  // The name is gone, and so is the claim that a node serves these bytes:
  // a write a same-host client copies in from now on is not acknowledged.
  if (!viewer_ && owner_lock_held_.exchange(false) && lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

bool ShmSegment::OwnerAlive() const {
  if (range_) return true;
  if (!viewer_) return owner_lock_held_.load();
  struct flock fl = OwnerLockRange(F_WRLCK);
  if (::fcntl(lock_fd_, F_OFD_GETLK, &fl) != 0) return false;
  return fl.l_type != F_UNLCK;
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) ::munmap(base_, size_);
  Unlink();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name,
                                                       uint64_t size,
                                                       const std::string& dir,
                                                       bool populate) {
  // The name becomes one path component; anything else could escape
  // the directory or collide with a nested path.
  if (name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "invalid shm segment name '" + name + "'");
  }
  // mmap of length 0 fails, and an empty segment can hold nothing.
  if (size == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "shm segment '" + name + "' must have a non-zero size");
  }
  if (size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "shm segment size " + std::to_string(size) + " too large");
  }
  if (dir.empty() || dir.front() != '/') {
    return Status(ErrorCode::INVALID_PARAMS,
                  "segment directory '" + dir + "' must be an absolute path");
  }
  std::string path = (dir.back() == '/' ? dir : dir + "/") + name;
  // O_EXCL so that two nodes (or a stale file from a crashed one) never end
  // up sharing a segment unknowingly.
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    return Status(err == EEXIST ? ErrorCode::SEGMENT_ALREADY_EXISTS
                                : ErrorCode::INTERNAL_ERROR,
                  "cannot create " + path + ": " + ErrnoText(err));
  }
  FdCloser closer(fd);
  // Allocates every page now (and sizes the file): on tmpfs, ftruncate
  // alone reserves nothing, and a full /dev/shm would surface as SIGBUS on
  // some later first touch instead of as this error.
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) {
    ::unlink(path.c_str());
    std::string why = ErrnoText(err);
    if (err == ENOSPC) {
      why += " (" + dir + " is full or smaller than the segment: check `df " +
             dir + "` and the segment size; on hugetlbfs, the free huge pages)";
    } else if (err == EINVAL) {
      why += " (on hugetlbfs the size must be a multiple of the huge page)";
    }
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot allocate " + std::to_string(size) + " bytes for " +
                      path + ": " + why);
  }
  // MAP_POPULATE sets up the page tables up front: page faults are costly
  // on some hosts, and the data plane would otherwise take one per 4 KiB on
  // the first write of every page, each also zeroing its page (fallocate
  // allocates tmpfs pages but leaves the zeroing to the first access).
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot stat " + path + ": " + ErrnoText(err));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    ::unlink(path.c_str());
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot mmap " + path + ": " + ErrnoText(err));
  }
  // On a descriptor of its own: the mapping keeps `fd`'s open file
  // description (and a lock on it) alive after a close, so Unlink could
  // not end the claim.
  const int lock_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct flock fl = OwnerLockRange(F_RDLCK);
  if (lock_fd < 0 || ::fcntl(lock_fd, F_OFD_SETLK, &fl) != 0) {
    int err = errno;
    if (lock_fd >= 0) ::close(lock_fd);
    ::munmap(base, size);
    ::unlink(path.c_str());
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot lock " + path +
                      " (the liveness lock same-host "
                      "clients check before acknowledging a write): " +
                      ErrnoText(err));
  }
  std::unique_ptr<ShmSegment> seg(new ShmSegment(
      std::move(path), static_cast<uint8_t*>(base), size,
      /*owner=*/true, st.st_dev, st.st_ino, 0, uint64_t(st.st_blksize)));
  seg->lock_fd_ = lock_fd;
  seg->owner_lock_held_.store(true);
  return seg;
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& path,
                                                     uint64_t expected_size) {
  if (expected_size == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "expected size of " + path + " must be non-zero");
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status(err == ENOENT ? ErrorCode::SEGMENT_NOT_FOUND
                                : ErrorCode::INTERNAL_ERROR,
                  "cannot open " + path + ": " + ErrnoText(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot stat " + path + ": " + ErrnoText(err));
  }
  // A size mismatch means a stale file from an earlier run or a different
  // segment: mapping it would hand out wrong bytes, or SIGBUS past its end.
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::INVALID_PARAMS, path + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) != expected_size) {
    return Status(ErrorCode::INVALID_PARAMS,
                  path + " has size " + std::to_string(st.st_size) +
                      ", expected " + std::to_string(expected_size));
  }
  // No MAP_POPULATE: Prepare sets up the page tables of the chunks a copy
  // touches, so no first copy pays for the whole segment.
  void* base =
      ::mmap(nullptr, expected_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot mmap " + path + ": " + ErrnoText(err));
  }
  std::unique_ptr<ShmSegment> seg(new ShmSegment(
      path, static_cast<uint8_t*>(base), expected_size,
      /*owner=*/false, st.st_dev, st.st_ino, 0, uint64_t(st.st_blksize)));
  seg->viewer_ = true;
  seg->lock_fd_ = closer.Release();  // OwnerAlive asks through it
  const uint64_t chunks = (expected_size + kPrepareChunk - 1) / kPrepareChunk;
  seg->prepared_ =
      std::make_unique<std::atomic<uint64_t>[]>((chunks + 63) / 64);
  return seg;
}

void ShmSegment::Prepare(uint64_t offset, uint64_t len) const {
  if (!prepared_ || len == 0 || offset >= size_) return;
  const uint64_t last = std::min(size_, offset + len) - 1;
  for (uint64_t c = offset / kPrepareChunk; c <= last / kPrepareChunk; ++c) {
    std::atomic<uint64_t>& word = prepared_[c / 64];
    const uint64_t bit = uint64_t{1} << (c % 64);
    if (word.load(std::memory_order_relaxed) & bit) continue;
    const uint64_t start = c * kPrepareChunk;
    // READ, not WRITE: it maps the pages in batches (fault-around) and, as
    // tmpfs tracks no dirty pages, writable; measured here on 512 MiB:
    // 37-45 ms against 113-115 ms for MADV_POPULATE_WRITE, 59-69 ms for
    // MAP_POPULATE and 145-179 ms of first-write faults, with no fault on
    // the writes that follow. Two threads may both populate a chunk:
    // harmless. A failure (a kernel older than 5.14) leaves the pages to be
    // faulted in.
    ::madvise(base_ + start, std::min(kPrepareChunk, size_ - start),
              MADV_POPULATE_READ);
    word.fetch_or(bit, std::memory_order_relaxed);
  }
}

Status ShmSegment::Populate(uint64_t offset, uint64_t len) const {
  if (offset > size_ || len > size_ - offset) {
    return Status(ErrorCode::INVALID_PARAMS, "populate range outside " + path_);
  }
  if (len == 0) return Status::OK();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // madvise wants a page-aligned start; the mapping starts on a page.
  const uint64_t start = offset / page * page;
  uint8_t* const from = base_ + start;
  const uint64_t span = offset + len - start;
  // WRITE, not READ as Prepare: this is the owner's mapping, whose pages
  // the TCP data server writes into, and a write fault is the one the
  // first put would otherwise take. It only simulates the fault: no byte
  // changes, so copies into the range may run at the same time.
  if (::madvise(from, span, MADV_POPULATE_WRITE) == 0) return Status::OK();
  const int err = errno;
  if (err != EINVAL) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot populate " + path_ + ": " + ErrnoText(err));
  }
  // A kernel before 5.14: a read of a byte per page zeroes and maps it (a
  // write could race a put's copy into the same page).
  uint64_t sink = 0;
  for (uint64_t at = 0; at < span; at += page) {
    sink += *reinterpret_cast<volatile const uint8_t*>(from + at);
  }
  static_cast<void>(sink);
  return Status::OK();
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::OpenRange(
    const std::string& path, uint64_t offset, uint64_t size) {
  if (path.empty()) {
    return Status(ErrorCode::INVALID_PARAMS, "no file to map");
  }
  if (size == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "a segment of " + path + " must have a non-zero size");
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0 || offset % static_cast<uint64_t>(page) != 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "offset " + std::to_string(offset) + " into " + path +
                      " is not a multiple of the page size (" +
                      std::to_string(page) + ")");
  }
  constexpr uint64_t kMaxOff =
      static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  if (offset > kMaxOff || size > kMaxOff - offset) {
    return Status(ErrorCode::INVALID_PARAMS, "range of " + path + " too large");
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status(
        err == ENOENT ? ErrorCode::FILE_NOT_FOUND : ErrorCode::INVALID_PARAMS,
        "cannot open " + path + ": " + ErrnoText(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot stat " + path + ": " + ErrnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::INVALID_PARAMS, path + " is not a regular file");
  }
  // Past the end of the file a mapping faults (SIGBUS) instead of failing.
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size || size > file_size - offset) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "range [" + std::to_string(offset) + ", " +
                      std::to_string(offset + size) + ") is not inside " +
                      path + " (" + std::to_string(file_size) + " bytes)");
  }
  void* base =
      ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
             fd, static_cast<off_t>(offset));
  if (base == MAP_FAILED) {
    int err = errno;
    return Status(ErrorCode::INVALID_PARAMS,
                  "cannot mmap " + path + ": " + ErrnoText(err));
  }
  std::unique_ptr<ShmSegment> seg(new ShmSegment(
      path, static_cast<uint8_t*>(base), size,
      /*owner=*/false, st.st_dev, st.st_ino, offset, uint64_t(st.st_blksize)));
  seg->range_ = true;
  return seg;
}

}  // namespace kvpool
