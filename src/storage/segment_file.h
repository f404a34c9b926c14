// One log file of the SSD tier: its descriptor, opened with O_DIRECT, and
// its space accounting. Shared by the index entries that point into it, so a
// file deleted by garbage collection stays readable until the last reader
// drops its reference (the descriptor is closed in the destructor).
#ifndef KVPOOL_STORAGE_SEGMENT_FILE_H_
#define KVPOOL_STORAGE_SEGMENT_FILE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "kvpool/status.h"

namespace kvpool::storage {

class SegmentFile {
 public:
  // Creates `<dir>/seg-<id>.log`; fails if it exists.
  static Result<std::shared_ptr<SegmentFile>> Create(const std::string& dir,
                                                     uint32_t id);
  // Opens an existing file; `size` receives its length.
  static Result<std::shared_ptr<SegmentFile>> OpenExisting(
      const std::string& dir, uint32_t id, uint64_t* size);
  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;

  uint32_t id() const { return id_; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Bytes of records that the index points at. Atomic because writers,
  // Remove and GC change it under different locks.
  std::atomic<uint64_t> live_bytes{0};

  // Guarded by FileStorage's file table mutex.
  uint64_t used_bytes = 0;  // next append offset = bytes handed out
  int inflight_writes = 0;  // reservations whose I/O has not finished
  bool sealed = false;      // no more appends (full, or found at start-up)

 private:
  SegmentFile(uint32_t id, int fd, std::string path)
      : id_(id), fd_(fd), path_(std::move(path)) {}

  const uint32_t id_;
  const int fd_;
  const std::string path_;
};

// Opens `path` with O_DIRECT; EINVAL (the filesystem refuses O_DIRECT, as
// tmpfs does) becomes an INVALID_PARAMS error that says so.
Result<int> OpenDirect(const std::string& path, int flags);

// Fails with a clear message if files in `dir` cannot be written and read
// with O_DIRECT. Never falls back to buffered I/O: the SSD tier must not
// fill the page cache.
Status ProbeDirectIo(const std::string& dir);

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_SEGMENT_FILE_H_
