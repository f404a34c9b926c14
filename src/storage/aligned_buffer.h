// A heap buffer aligned to kBlockSize, as O_DIRECT requires of memory.
#ifndef KVPOOL_STORAGE_ALIGNED_BUFFER_H_
#define KVPOOL_STORAGE_ALIGNED_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "storage/record_format.h"

namespace kvpool::storage {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `size` is rounded up to a whole number of blocks. Throws std::bad_alloc
  // like any other allocation.
  explicit AlignedBuffer(uint64_t size) : size_(AlignUp(size)) {
    if (size_ == 0) return;
    void* p = nullptr;
    if (::posix_memalign(&p, kBlockSize, size_) != 0) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
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
