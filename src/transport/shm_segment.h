// A DRAM segment backed by a file under /dev/shm and mapped MAP_SHARED.
//
// The node that contributes the segment Create()s it (and unlinks the file
// when the ShmSegment is destroyed); same-host clients Open() the same path
// once and copy into and out of it directly, with no socket in the path.
// Thread-safe after construction (the mapping never moves).
#ifndef KVPOOL_TRANSPORT_SHM_SEGMENT_H_
#define KVPOOL_TRANSPORT_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

class ShmSegment {
 public:
  // Creates /dev/shm/<name> of `size` bytes (O_EXCL), allocates all of its
  // memory (posix_fallocate: a /dev/shm too full for it fails here rather
  // than with SIGBUS later) and maps it read-write with page tables
  // populated. The file is removed by the destructor.
  static Result<std::unique_ptr<ShmSegment>> Create(const std::string& name,
                                                    uint64_t size);
  // Maps an existing segment file, page tables populated. Fails
  // (INVALID_PARAMS) if its size is not `expected_size`, so a stale or
  // foreign file is never used.
  static Result<std::unique_ptr<ShmSegment>> Open(const std::string& path,
                                                  uint64_t expected_size);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  ShmSegment(std::string path, uint8_t* base, uint64_t size, bool owner);
  std::string path_;
  uint8_t* base_;
  uint64_t size_;
  bool owner_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_SHM_SEGMENT_H_
