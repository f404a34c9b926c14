// A DRAM segment backed by a file under /dev/shm and mapped MAP_SHARED.
//
// The node that contributes the segment Create()s it (and unlinks the file
// when the ShmSegment is destroyed); same-host clients Open() the same path
// once and copy into and out of it directly, with no socket in the path.
// Thread-safe after construction (the mapping never moves).
#ifndef KVPOOL_TRANSPORT_SHM_SEGMENT_H_
#define KVPOOL_TRANSPORT_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

class ShmSegment {
 public:
  // Creates <dir>/<name> of `size` bytes (O_EXCL), allocates all of its
  // memory (posix_fallocate: a file system too full for it fails here
  // rather than with SIGBUS later) and maps it read-write. The file is
  // removed by the destructor. `dir` is a memory file system: /dev/shm
  // (4 KiB pages), or a tmpfs mounted with huge=always or a hugetlbfs mount
  // for 2 MiB pages (docs/ssd_tier.md, "Huge pages for the segment").
  // `populate`: zero every page and set up the page tables now
  // (MAP_POPULATE, ~0.3-0.4 s per GiB here); without it a page is zeroed
  // and mapped by its first touch, or by Populate (a node does that in the
  // background, so a large segment mounts at once).
  static Result<std::unique_ptr<ShmSegment>> Create(
      const std::string& name, uint64_t size,
      const std::string& dir = "/dev/shm", bool populate = true);
  // Maps an existing segment file (a client's view of a node's segment).
  // Fails (INVALID_PARAMS) if its size is not `expected_size`, so a stale
  // or foreign file is never used. Page tables are set up lazily, by
  // Prepare, kPrepareChunk at a time: populating a whole segment up front
  // stalled the first copy for ~0.25 s per GiB.
  static Result<std::unique_ptr<ShmSegment>> Open(const std::string& path,
                                                  uint64_t expected_size);
  // Maps [offset, offset + size) of an existing regular file read-write
  // (MAP_SHARED, page tables populated): memory a caller hands to the pool
  // (Mooncake's mount_segment). `offset` must be a multiple of the page
  // size and the range must lie inside the file (INVALID_PARAMS); a
  // missing file is FILE_NOT_FOUND. The file stays the caller's: it is
  // never removed or resized, and must keep its size while it is mapped
  // (bytes cut off by a truncation would fault).
  static Result<std::unique_ptr<ShmSegment>> OpenRange(const std::string& path,
                                                       uint64_t offset,
                                                       uint64_t size);
  // Removes the file of a segment made by Create now rather than when the
  // mapping goes (nothing for a segment made by Open or OpenRange): the
  // mapping stays valid for whoever still holds it, and a new segment can
  // be created under the same name at once.
  void Unlink();
  // Before a copy of [offset, offset + len) through data(): sets up the page
  // tables of each kPrepareChunk that the range touches and no earlier call
  // prepared (one madvise(MADV_POPULATE_READ) per chunk), so the copy
  // takes no page fault per 4 KiB. Only an optimization: an unprepared page
  // is faulted in on access. Nothing to do for Create and OpenRange, which
  // map with page tables populated. Thread-safe.
  void Prepare(uint64_t offset, uint64_t len) const;
  static constexpr uint64_t kPrepareChunk = 2ull << 20;
  // Makes every page of [offset, offset + len) of this mapping exist
  // (zeroed, if never touched) and mapped, without changing a byte:
  // madvise(MADV_POPULATE_WRITE), or, where the kernel refuses it (EINVAL,
  // older than 5.14), a read of one byte per page, which on a memory file
  // system zeroes and maps the page just as well. Safe while others copy
  // into the range. Fails only for a range outside the segment or a
  // mapping that cannot be populated (ENOMEM, EFAULT, SIGBUS-class errors).
  Status Populate(uint64_t offset, uint64_t len) const;
  // Whether the process that Create()d the file still owns it: the creator
  // holds an open-file-description read lock on its first byte from Create
  // until Unlink or exit, and the kernel drops that lock the moment the
  // process dies (kill -9 included); an Open()ed view asks the kernel
  // whether the lock is still there (one fcntl, no side effects on other
  // viewers). A write through shared memory is acknowledged only if this
  // holds after the copy: bytes copied into a dead node's mapping would
  // be committed by the master and lost with the node. False also for a
  // file whose creator predates the lock (then the write goes over TCP).
  // The creator's own mapping answers from its state; OpenRange mappings
  // (memory a caller handed in, never served over shared memory) answer
  // true. Thread-safe.
  bool OwnerAlive() const;
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Which bytes of which file this maps: two segments share memory exactly
  // when they map the same file (device and inode) at overlapping ranges.
  uint64_t file_device() const { return dev_; }
  uint64_t file_inode() const { return ino_; }
  uint64_t file_offset() const { return offset_; }
  // The file system's preferred I/O size for the file (st_blksize): 2 MiB
  // where the segment is backed by huge pages (a huge tmpfs or hugetlbfs),
  // the base page otherwise.
  uint64_t block_size() const { return block_size_; }
  bool Overlaps(const ShmSegment& other) const {
    return dev_ == other.dev_ && ino_ == other.ino_ &&
           offset_ < other.offset_ + other.size_ &&
           other.offset_ < offset_ + size_;
  }

 private:
  ShmSegment(std::string path, uint8_t* base, uint64_t size, bool owner,
             uint64_t dev, uint64_t ino, uint64_t offset, uint64_t block_size);
  std::string path_;
  uint8_t* base_;
  uint64_t size_;
  bool owner_;
  // Create: a descriptor of its own (not the mapped one) that holds the
  // owner's lock, closed, and the lock dropped, by Unlink; Open: the
  // descriptor OwnerAlive asks through; OpenRange: -1.
  int lock_fd_ = -1;
  bool viewer_ = false;  // made by Open
  bool range_ = false;   // made by OpenRange
  std::atomic<bool> owner_lock_held_{false};
  uint64_t dev_;
  uint64_t ino_;
  uint64_t offset_;
  uint64_t block_size_;
  // Open only: a bit per kPrepareChunk, set once its page tables are set up.
  std::unique_ptr<std::atomic<uint64_t>[]> prepared_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_SHM_SEGMENT_H_
