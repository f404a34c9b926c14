// A heap buffer aligned for O_DIRECT (kBlockSize) that owns its memory.
#ifndef KVPOOL_STORAGE_ALIGNED_BUFFER_H_
#define KVPOOL_STORAGE_ALIGNED_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "common/io_memory.h"
#include "storage/record_format.h"

namespace kvpool::storage {

// O_DIRECT needs a record's blocks and the memory they move through aligned
// alike.
static_assert(kBlockSize == kIoAlign);

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
