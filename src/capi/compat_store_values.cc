// MooncakeStore's calls on values passed by copy (see compat_store.h): put,
// get, get_buffer, exist, size and remove, whole keys and batches.
#include <memory>
#include <mutex>

#include "capi/compat_store.h"
#include "capi/compat_store_internal.h"

namespace kvpool::compat {

using store_internal::Code;
using store_internal::kInvalid;

int MooncakeStore::Put(std::string_view key, Bytes value,
                       const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {{value}}, rc, false);
}

int MooncakeStore::Upsert(std::string_view key, Bytes value,
                          const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {{value}}, rc, true);
}

int MooncakeStore::PutParts(std::string_view key,
                            const std::vector<Bytes>& parts,
                            const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {parts}, rc, false);
}

int MooncakeStore::UpsertParts(std::string_view key,
                               const std::vector<Bytes>& parts,
                               const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {parts}, rc, true);
}

int MooncakeStore::PutBatch(const std::vector<std::string>& keys,
                            const std::vector<Bytes>& values,
                            const MooncakeReplicateConfig& rc) {
  if (keys.size() != values.size()) return kInvalid;
  std::vector<std::vector<Bytes>> parts;
  parts.reserve(values.size());
  for (const auto& v : values) parts.push_back({v});
  return PutBytes(keys, parts, rc, false);
}

int MooncakeStore::UpsertBatch(const std::vector<std::string>& keys,
                               const std::vector<Bytes>& values,
                               const MooncakeReplicateConfig& rc) {
  if (keys.size() != values.size()) return kInvalid;
  std::vector<std::vector<Bytes>> parts;
  parts.reserve(values.size());
  for (const auto& v : values) parts.push_back({v});
  return PutBytes(keys, parts, rc, true);
}

int MooncakeStore::PutBytes(const std::vector<std::string>& keys,
                            const std::vector<std::vector<Bytes>>& values,
                            const MooncakeReplicateConfig& rc, bool upsert) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  // As Mooncake, an empty value is a successful put that stores nothing.
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> parts;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<ConstSlice> p;
    uint64_t total = 0;
    for (const auto& v : values[i]) {
      p.push_back({v.data(), v.size()});
      total += v.size();
    }
    if (total == 0) continue;
    k.push_back(keys[i]);
    parts.push_back(std::move(p));
  }
  if (k.empty()) return 0;
  // Mooncake stages bytes from Python in its local buffer: with none, such
  // puts fail (and store nothing). kvpool writes them directly, so a value
  // larger than the local buffer is still taken.
  if (!local_buffer_) return kInvalid;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) return Code(cfg.status());
  for (const Status& st :
       client_->BatchPutParts(k, parts, cfg.value(), upsert)) {
    if (!st.ok()) return Code(st);
  }
  return 0;
}

// ----------------------------------------------------------------- gets

Result<std::string> MooncakeStore::Get(std::string_view key) {
  ReaderLock lock(&mu_);
  if (!client_) return Status(ErrorCode::INVALID_PARAMS, "not set up");
  return client_->Get(key);
}

std::shared_ptr<BufferHandle> MooncakeStore::GetBuffer(std::string_view key) {
  return BatchGetBuffer({std::string(key)})[0];
}

std::vector<std::shared_ptr<BufferHandle>> MooncakeStore::BatchGetBuffer(
    const std::vector<std::string>& keys) {
  std::vector<std::shared_ptr<BufferHandle>> out(keys.size());
  ReaderLock lock(&mu_);
  if (!client_ || keys.empty()) return out;
  // Sizes first (read-only lookup) so each value gets a local-buffer range
  // of the right size; keys that do not fit are read onto the heap.
  auto tiers = client_->BatchGetReplicaDesc(keys);
  std::vector<std::string> local_keys, heap_keys;
  std::vector<void*> local_ptrs;
  std::vector<uint64_t> local_sizes;
  std::vector<size_t> local_idx, heap_idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!tiers[i].ok()) continue;
    std::shared_ptr<BufferHandle> h;
    if (local_buffer_) h = local_buffer_->Allocate(tiers[i]->size);
    if (h) {
      out[i] = h;
      local_keys.push_back(keys[i]);
      local_ptrs.push_back(h->data());
      local_sizes.push_back(h->size());
      local_idx.push_back(i);
    } else {
      heap_keys.push_back(keys[i]);
      heap_idx.push_back(i);
    }
  }
  if (!local_keys.empty()) {
    auto reads = client_->BatchGetInto(local_keys, local_ptrs, local_sizes);
    for (size_t j = 0; j < reads.size(); ++j) {
      size_t i = local_idx[j];
      if (reads[j].ok()) {
        out[i]->Truncate(reads[j].value());
      } else {
        out[i].reset();
        // Grown by an upsert since the lookup: read it whole instead.
        if (reads[j].code() == ErrorCode::BUFFER_OVERFLOW) {
          heap_keys.push_back(keys[i]);
          heap_idx.push_back(i);
        }
      }
    }
  }
  if (!heap_keys.empty()) {
    auto values = client_->BatchGet(heap_keys);
    for (size_t j = 0; j < values.size(); ++j) {
      if (!values[j].ok()) continue;
      auto owned = std::make_shared<std::string>(std::move(values[j].value()));
      out[heap_idx[j]] = std::make_shared<BufferHandle>(
          reinterpret_cast<uint8_t*>(owned->data()), owned->size(), [owned] {});
    }
  }
  return out;
}

// ------------------------------------------------------ exist, size, remove

int64_t MooncakeStore::GetSize(std::string_view key) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  auto r = client_->GetSize(key);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

int MooncakeStore::IsExist(std::string_view key) {
  return BatchIsExist({std::string(key)})[0];
}

std::vector<int> MooncakeStore::BatchIsExist(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), -1);
  ReaderLock lock(&mu_);
  if (!client_ || keys.empty()) return out;
  auto r = client_->BatchIsExist(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (r[i].ok()) out[i] = r[i].value() ? 1 : 0;
  }
  return out;
}

int MooncakeStore::Remove(std::string_view key, bool force) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  return Code(client_->Remove(key, force));
}

std::vector<int> MooncakeStore::BatchRemove(
    const std::vector<std::string>& keys, bool force) {
  std::vector<int> out(keys.size(), kInvalid);
  ReaderLock lock(&mu_);
  if (!client_) return out;
  auto r = client_->BatchRemove(keys, force);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

int64_t MooncakeStore::RemoveAll(bool force) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  auto r = client_->RemoveAll(force);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

int64_t MooncakeStore::RemoveByRegex(const std::string& regex, bool force) {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  auto r = client_->RemoveByRegex(regex, force);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

}  // namespace kvpool::compat
