// Heap memory aligned for O_DIRECT (kBlockSize), and a buffer that owns it.
#ifndef KVPOOL_STORAGE_ALIGNED_BUFFER_H_
#define KVPOOL_STORAGE_ALIGNED_BUFFER_H_

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "storage/record_format.h"

namespace kvpool::storage {

// Memory for O_DIRECT transfers, aligned to kBlockSize; nullptr when out of
// memory; release with std::free. Buffers of 2 MiB and more are aligned to
// 2 MiB and advised MADV_HUGEPAGE: a virtual disk takes a bounded number of
// memory segments per request (virtio-blk: 254), so a 4 MiB read into 4 KiB
// pages is cut into several requests, while into huge pages it is one; on
// the development VM this doubles the bytes per second of large reads.
// Where transparent huge pages are off the advice is ignored.
inline void* AllocateIoMemory(uint64_t size) {
  constexpr uint64_t kHuge = 2ull << 20;
  const bool huge = size >= kHuge;
  void* p = nullptr;
  if (::posix_memalign(&p, huge ? kHuge : kBlockSize, size) != 0)
    return nullptr;
  if (huge) ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `size` is rounded up to a whole number of blocks. Throws std::bad_alloc
  // like any other allocation.
  explicit AlignedBuffer(uint64_t size) : size_(AlignUp(size)) {
    if (size_ == 0) return;
    data_ = static_cast<uint8_t*>(AllocateIoMemory(size_));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_ALIGNED_BUFFER_H_
