// The local buffer of a Mooncake-compatible store: a region of
// local_buffer_size bytes, registered with the client, that get_buffer
// results are read into, as in Mooncake (the memory of live buffer handles
// is bounded by it). When it has no room a handle falls back to the heap
// instead of failing the get.
#ifndef KVPOOL_CAPI_LOCAL_BUFFER_H_
#define KVPOOL_CAPI_LOCAL_BUFFER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "common/mutex.h"
#include "kvpool/status.h"

namespace kvpool::compat {

// The bytes of one value returned by get_buffer. Frees its memory (back to
// the local buffer, or the heap) when the last reference goes. Thread-safe
// to share; the bytes are written once, before the handle is returned.
class BufferHandle {
 public:
  BufferHandle(uint8_t* data, uint64_t size, std::function<void()> release);
  ~BufferHandle();
  BufferHandle(const BufferHandle&) = delete;
  BufferHandle& operator=(const BufferHandle&) = delete;
  static std::shared_ptr<BufferHandle> OnHeap(uint64_t size);

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The value turned out shorter than the allocation (an upsert in between).
  void Truncate(uint64_t size) { size_ = size < size_ ? size : size_; }

 private:
  uint8_t* data_;
  uint64_t size_;
  std::function<void()> release_;
};

class LocalBuffer : public std::enable_shared_from_this<LocalBuffer> {
 public:
  // An anonymous private mapping of `size` bytes (> 0).
  static Result<std::shared_ptr<LocalBuffer>> Create(uint64_t size);
  ~LocalBuffer();
  LocalBuffer(const LocalBuffer&) = delete;
  LocalBuffer& operator=(const LocalBuffer&) = delete;

  // First fit, 64-byte aligned; nullptr when no free range is large enough.
  // The handle keeps this buffer alive.
  std::shared_ptr<BufferHandle> Allocate(uint64_t size);
  void* base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t free_bytes() const;

 private:
  LocalBuffer(void* base, uint64_t size);
  void Free(uint64_t offset, uint64_t size);

  void* base_;
  uint64_t size_;
  mutable Mutex mu_;
  // Free ranges: offset -> length, coalesced.
  std::map<uint64_t, uint64_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool::compat

#endif  // KVPOOL_CAPI_LOCAL_BUFFER_H_
