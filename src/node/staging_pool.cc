#include "node/staging_pool.h"

#include <cstdlib>
#include <cstring>

#include "common/io_memory.h"

namespace kvpool {

StagingPool::StagingPool(uint64_t bytes, uint64_t slot_bytes)
    : slot_bytes_(slot_bytes) {
  if (bytes == 0 || slot_bytes == 0) return;
  slots_ = (bytes + slot_bytes - 1) / slot_bytes;
  base_ = static_cast<uint8_t*>(
      AllocateIoMemory(std::max<uint64_t>(slots_ * slot_bytes_, 2ull << 20)));
  if (base_ == nullptr) {
    slots_ = 0;
    return;
  }
  // Fault every page in now, not on the promotion path.
  std::memset(base_, 0, slots_ * slot_bytes_);
  run_.assign(slots_, 0);
  used_.assign(slots_, false);
}

StagingPool::~StagingPool() { std::free(base_); }

uint8_t* StagingPool::TryAcquire(uint64_t size) {
  if (slots_ == 0 || size == 0) return nullptr;
  const uint64_t need = (size + slot_bytes_ - 1) / slot_bytes_;
  if (need > slots_) return nullptr;
  MutexLock lock(&mu_);
  uint64_t free_run = 0;
  for (uint64_t i = 0; i < slots_; ++i) {
    free_run = used_[i] ? 0 : free_run + 1;
    if (free_run == need) {
      const uint64_t first = i + 1 - need;
      for (uint64_t j = first; j <= i; ++j) used_[j] = true;
      run_[first] = uint32_t(need);
      in_use_ += need * slot_bytes_;
      return base_ + first * slot_bytes_;
    }
  }
  return nullptr;
}

void StagingPool::Release(uint8_t* p) {
  if (p == nullptr) return;
  const uint64_t first = uint64_t(p - base_) / slot_bytes_;
  MutexLock lock(&mu_);
  const uint32_t n = run_[first];
  for (uint64_t j = first; j < first + n; ++j) used_[j] = false;
  run_[first] = 0;
  in_use_ -= uint64_t(n) * slot_bytes_;
}

uint64_t StagingPool::in_use() const {
  MutexLock lock(&mu_);
  return in_use_;
}

}  // namespace kvpool
