// Heap memory for O_DIRECT transfers. Here rather than in storage because
// the data server's SSD_READ buffers (transport) are filled by the SSD tier
// and so need the same alignment, and transport does not include storage.
#ifndef KVPOOL_COMMON_IO_MEMORY_H_
#define KVPOOL_COMMON_IO_MEMORY_H_

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace kvpool {

// The alignment O_DIRECT needs of buffers, offsets and lengths on the block
// devices kvpool runs on (storage::kBlockSize, the SSD record format's
// block, is this size).
inline constexpr uint64_t kIoAlign = 4096;

// Memory for O_DIRECT transfers, aligned to kIoAlign; nullptr when out of
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
  if (::posix_memalign(&p, huge ? kHuge : kIoAlign, size) != 0) return nullptr;
  if (huge) ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace kvpool

#endif  // KVPOOL_COMMON_IO_MEMORY_H_
