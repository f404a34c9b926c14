#include "node/shared_reads.h"

#include <cstring>
#include <new>

#include "node/tenant_key_id.h"

namespace kvpool {

void SharedReads::Want(std::string_view tenant, std::string_view key) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  ++entries_[TenantKeyId(tenant, key)].wants;
}

void SharedReads::Unwant(std::string_view tenant, std::string_view key) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  auto it = entries_.find(TenantKeyId(tenant, key));
  if (it == entries_.end()) return;
  if (--it->second.wants > 0) return;
  if (it->second.bytes.data) {
    ++stats_.dropped;
    stats_.held_bytes -= it->second.bytes.size;
  }
  entries_.erase(it);
}

bool SharedReads::Wanted(std::string_view tenant, std::string_view key) const {
  if (!enabled()) return false;
  MutexLock lock(&mu_);
  auto it = entries_.find(TenantKeyId(tenant, key));
  return it != entries_.end() && it->second.bytes.data == nullptr;
}

bool SharedReads::HasBytes(std::string_view tenant,
                           std::string_view key) const {
  if (!enabled()) return false;
  MutexLock lock(&mu_);
  auto it = entries_.find(TenantKeyId(tenant, key));
  return it != entries_.end() && it->second.bytes.data != nullptr;
}

bool SharedReads::Offer(std::string_view tenant, std::string_view key,
                        uint64_t version, std::span<const uint8_t> bytes) {
  if (!enabled()) return false;
  const std::string id = TenantKeyId(tenant, key);
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.bytes.data) return false;
    if (stats_.held_bytes + bytes.size() > max_bytes_) {
      ++stats_.refused;
      return false;
    }
    // Reserve the budget before copying outside the lock.
    stats_.held_bytes += bytes.size();
  }
  std::unique_ptr<storage::AlignedBuffer> copy;
  try {
    copy = std::make_unique<storage::AlignedBuffer>(bytes.size());
  } catch (const std::bad_alloc&) {
    copy.reset();
  }
  if (copy && !bytes.empty())
    std::memcpy(copy->data(), bytes.data(), bytes.size());
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  // The promotion may have gone (or another offer won) while we copied.
  if (!copy || it == entries_.end() || it->second.bytes.data) {
    stats_.held_bytes -= bytes.size();
    if (!copy) ++stats_.refused;
    return false;
  }
  it->second.bytes = Bytes{version, std::move(copy), bytes.size()};
  ++stats_.offered;
  return true;
}

SharedReads::Bytes SharedReads::Take(std::string_view tenant,
                                     std::string_view key) {
  if (!enabled()) return {};
  MutexLock lock(&mu_);
  auto it = entries_.find(TenantKeyId(tenant, key));
  if (it == entries_.end() || !it->second.bytes.data) return {};
  Bytes out = std::move(it->second.bytes);
  it->second.bytes = Bytes{};
  stats_.held_bytes -= out.size;
  ++stats_.taken;
  return out;
}

SharedReads::Stats SharedReads::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kvpool
