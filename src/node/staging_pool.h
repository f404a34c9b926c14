// Reusable I/O memory for the promotion chain's SSD reads: one region of
// transparent huge pages, touched once at start, handed out in runs of
// fixed-size slots. Why: a holder's DRAM segment is a /dev/shm file, which
// the kernel maps in 4 KiB pages (tmpfs huge pages are off by default), so
// an O_DIRECT read of a 1 MiB value into it needs 256 memory segments and a
// virtio disk (254 at most per request) splits it in two; a read into a
// huge page is one request. A read into a fresh heap buffer instead pays a
// page fault per 4 KiB. Thread-safe.
#ifndef KVPOOL_NODE_STAGING_POOL_H_
#define KVPOOL_NODE_STAGING_POOL_H_

#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace kvpool {

class StagingPool {
 public:
  // `bytes` rounded up to whole slots; 0 makes an empty pool (Acquire
  // always fails).
  StagingPool(uint64_t bytes, uint64_t slot_bytes);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A run of slots holding `size` bytes, or nullptr when no free run is
  // long enough (the caller reads elsewhere rather than wait).
  uint8_t* TryAcquire(uint64_t size);
  // Gives back what TryAcquire returned.
  void Release(uint8_t* p);

  uint64_t capacity() const { return slots_ * slot_bytes_; }
  uint64_t in_use() const;

 private:
  const uint64_t slot_bytes_;
  uint64_t slots_ = 0;
  uint8_t* base_ = nullptr;
  mutable Mutex mu_;
  // run_[i] > 0: slot i starts a run of that many slots in use.
  std::vector<uint32_t> run_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> used_ ABSL_GUARDED_BY(mu_);
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_STAGING_POOL_H_
