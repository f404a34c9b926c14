#include "master/object_store.h"

namespace kvpool {

int64_t TenantTable::Pin(std::string_view name, size_t max_tenants) {
  {
    ReaderLock lock(&mu_);
    auto it = ids_.find(name);
    if (it != ids_.end()) {
      // Under the shared lock, so no Unref's reclaim (exclusive) can see
      // the count at zero and free the tenant under this reference.
      entries_.find(it->second)->second.refs.fetch_add(1);
      return it->second;
    }
  }
  WriterLock lock(&mu_);
  auto it = ids_.find(name);
  if (it != ids_.end()) {
    entries_.find(it->second)->second.refs.fetch_add(1);
    return it->second;
  }
  if (entries_.size() >= max_tenants) return -1;
  uint32_t id = next_id_++;
  while (entries_.contains(id)) id = next_id_++;
  Entry& e = entries_[id];
  e.name.assign(name);
  e.name_hash = HashName(name);
  e.refs.store(1);
  ids_.emplace(std::string_view(e.name), id);
  return id;
}

void TenantTable::Unref(uint32_t id) {
  {
    ReaderLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.refs.fetch_sub(1) != 1) return;
  }
  // The count may have gone up again meanwhile (a Pin): only a tenant still
  // at zero under the exclusive lock is forgotten, and by id, so a tenant
  // of the same name created since is not.
  WriterLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.refs.load() != 0) return;
  ids_.erase(std::string_view(it->second.name));
  entries_.erase(it);
  forgotten_.fetch_add(1, std::memory_order_release);
}

int64_t TenantTable::Lookup(std::string_view name) const {
  ReaderLock lock(&mu_);
  auto it = ids_.find(name);
  return it == ids_.end() ? -1 : int64_t{it->second};
}

std::string TenantTable::Name(uint32_t id) const {
  return std::string(NameView(id));
}

std::string_view TenantTable::NameView(uint32_t id) const {
  using Cache = PerThreadCache<TenantTable, std::string>;
  if (const std::string* name = Cache::Find(
          cache_owner_, forgotten_.load(std::memory_order_acquire), id))
    return *name;
  ReaderLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return {};
  // Forgetting takes the lock exclusively: the count read here is the one
  // this name is current under.
  const uint64_t gen = forgotten_.load(std::memory_order_relaxed);
  Cache::Fill(cache_owner_, gen, id, it->second.name);
  return *Cache::Find(cache_owner_, gen, id);
}

uint64_t TenantTable::NameHash(uint32_t id) const {
  ReaderLock lock(&mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.name_hash;
}

uint64_t TenantTable::HashName(std::string_view name) {
  return std::hash<std::string_view>()(name);
}

size_t TenantTable::size() const {
  ReaderLock lock(&mu_);
  return entries_.size();
}

size_t ObjectStore::Size() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& s = shards_[i];
    MutexLock lock(&s.mu());
    n += s.objects().size();
  }
  return n;
}

int64_t ObjectStore::MaxHoldNs() const {
  int64_t most = 0;
  for (size_t i = 0; i < kShards; ++i)
    most = std::max(most, shards_[i].hold().max_hold_ns());
  return most;
}

int64_t ObjectStore::MaxCpuHoldNs() const {
  int64_t most = 0;
  for (size_t i = 0; i < kShards; ++i)
    most = std::max(most, shards_[i].hold().max_cpu_hold_ns());
  return most;
}

void ObjectStore::ResetMaxHold() {
  for (size_t i = 0; i < kShards; ++i) shards_[i].ResetHold();
}

}  // namespace kvpool
