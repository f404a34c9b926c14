#include "storage/storage_index.h"

#include <cstring>

namespace kvpool::storage {

std::string StorageIndex::MakeKey(std::string_view tenant,
                                  std::string_view key) {
  std::string k;
  k.resize(2 + tenant.size() + key.size());
  const uint16_t n = static_cast<uint16_t>(tenant.size());
  std::memcpy(k.data(), &n, 2);
  std::memcpy(k.data() + 2, tenant.data(), tenant.size());
  std::memcpy(k.data() + 2 + tenant.size(), key.data(), key.size());
  return k;
}

StorageIndex::Shard& StorageIndex::ShardOf(const std::string& k) const {
  return shards_[std::hash<std::string>{}(k) % kShards];
}

std::optional<IndexEntry> StorageIndex::Get(std::string_view tenant,
                                            std::string_view key) const {
  const std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(k);
  if (it == s.map.end()) return std::nullopt;
  return it->second;
}

StorageIndex::UpsertOutcome StorageIndex::Upsert(std::string_view tenant,
                                                 std::string_view key,
                                                 IndexEntry e) {
  std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  UpsertOutcome out;
  std::lock_guard<std::mutex> lock(s.mu);
  auto [it, inserted] = s.map.try_emplace(std::move(k), e);
  if (inserted) {
    out.installed = true;
  } else if (it->second.seq < e.seq) {
    out.installed = true;
    out.superseded = std::move(it->second);
    it->second = std::move(e);
  } else {
    out.superseded = std::move(e);
  }
  return out;
}

bool StorageIndex::ReplaceIf(std::string_view tenant, std::string_view key,
                             const IndexEntry& expected,
                             IndexEntry replacement) {
  const std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(k);
  if (it == s.map.end() || !it->second.SameRecord(expected)) return false;
  it->second = std::move(replacement);
  return true;
}

std::optional<IndexEntry> StorageIndex::Remove(std::string_view tenant,
                                               std::string_view key) {
  const std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(k);
  if (it == s.map.end()) return std::nullopt;
  IndexEntry e = std::move(it->second);
  s.map.erase(it);
  return e;
}

bool StorageIndex::RemoveIf(std::string_view tenant, std::string_view key,
                            const IndexEntry& expected) {
  const std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(k);
  if (it == s.map.end() || !it->second.SameRecord(expected)) return false;
  s.map.erase(it);
  return true;
}

std::optional<IndexEntry> StorageIndex::RemoveIfVersion(
    std::string_view tenant, std::string_view key, uint64_t object_version) {
  const std::string k = MakeKey(tenant, key);
  Shard& s = ShardOf(k);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(k);
  if (it == s.map.end() || it->second.object_version != object_version) {
    return std::nullopt;
  }
  IndexEntry e = std::move(it->second);
  s.map.erase(it);
  return e;
}

size_t StorageIndex::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.map.size();
  }
  return n;
}

void StorageIndex::ForEach(
    const std::function<void(std::string_view, std::string_view,
                             const IndexEntry&)>& fn) const {
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [k, e] : s.map) {
      uint16_t n = 0;
      std::memcpy(&n, k.data(), 2);
      std::string_view all(k);
      fn(all.substr(2, n), all.substr(2 + n), e);
    }
  }
}

}  // namespace kvpool::storage
