#include "capi/local_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kvpool::compat {

namespace {
constexpr uint64_t kAlign = 64;
uint64_t RoundUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

BufferHandle::BufferHandle(uint8_t* data, uint64_t size,
                           std::function<void()> release)
    : data_(data), size_(size), release_(std::move(release)) {}

BufferHandle::~BufferHandle() {
  if (release_) release_();
}

std::shared_ptr<BufferHandle> BufferHandle::OnHeap(uint64_t size) {
  // new[] of zero bytes is valid and gives a unique non-null pointer.
  auto* p = new uint8_t[size];
  return std::make_shared<BufferHandle>(p, size, [p] { delete[] p; });
}

Result<std::shared_ptr<LocalBuffer>> LocalBuffer::Create(uint64_t size) {
  if (size == 0) {
    return Status(ErrorCode::INVALID_PARAMS, "local buffer size must be > 0");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  std::string("mmap of the local buffer: ") + strerror(errno));
  }
  return std::shared_ptr<LocalBuffer>(new LocalBuffer(p, size));
}

LocalBuffer::LocalBuffer(void* base, uint64_t size) : base_(base), size_(size) {
  free_[0] = size;
}

LocalBuffer::~LocalBuffer() { munmap(base_, size_); }

std::shared_ptr<BufferHandle> LocalBuffer::Allocate(uint64_t size) {
  const uint64_t need = RoundUp(size == 0 ? 1 : size);
  uint64_t offset = 0;
  {
    MutexLock lock(&mu_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < need) ++it;
    if (it == free_.end()) return nullptr;
    offset = it->first;
    uint64_t len = it->second;
    free_.erase(it);
    if (len > need) free_[offset + need] = len - need;
  }
  auto self = shared_from_this();
  return std::make_shared<BufferHandle>(
      static_cast<uint8_t*>(base_) + offset, size,
      [self, offset, need] { self->Free(offset, need); });
}

void LocalBuffer::Free(uint64_t offset, uint64_t size) {
  MutexLock lock(&mu_);
  auto [it, inserted] = free_.emplace(offset, size);
  if (!inserted) return;  // a double free would be a bug; keep the map sane
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

uint64_t LocalBuffer::free_bytes() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [off, len] : free_) n += len;
  return n;
}

}  // namespace kvpool::compat
