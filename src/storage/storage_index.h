// The in-memory index of the SSD tier: (tenant, key) -> where the current
// record of that key lies. Sharded by key hash, one mutex per shard, so
// concurrent reads and writes of different keys rarely meet on a lock.
#ifndef KVPOOL_STORAGE_STORAGE_INDEX_H_
#define KVPOOL_STORAGE_STORAGE_INDEX_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "storage/record_format.h"
#include "storage/segment_file.h"

namespace kvpool::storage {

struct IndexEntry {
  std::shared_ptr<SegmentFile> file;
  uint64_t offset = 0;  // of the header block
  uint64_t value_len = 0;
  uint64_t seq = 0;
  uint64_t data_checksum = 0;
  // Chosen by the master for the stored value; kept in the record header.
  uint64_t object_version = 0;

  uint64_t span() const { return RecordSpan(value_len); }
  // Same record on disk (not merely the same value).
  bool SameRecord(const IndexEntry& o) const {
    return file == o.file && offset == o.offset;
  }
};

class StorageIndex {
 public:
  std::optional<IndexEntry> Get(std::string_view tenant,
                                std::string_view key) const;

  struct UpsertOutcome {
    bool installed = false;
    // The entry that `e` replaced (installed), or `e` itself was refused
    // because the key holds a newer or equal sequence number: either way,
    // the record that is no longer current.
    std::optional<IndexEntry> superseded;
  };
  // Installs `e` unless the key already maps to a record with seq >= e.seq,
  // so that of two racing writes of one key the later one always wins.
  UpsertOutcome Upsert(std::string_view tenant, std::string_view key,
                       IndexEntry e);

  // Replaces the entry only if it still is the record `expected` (used by
  // garbage collection, which must not undo a concurrent write or remove).
  bool ReplaceIf(std::string_view tenant, std::string_view key,
                 const IndexEntry& expected, IndexEntry replacement);

  std::optional<IndexEntry> Remove(std::string_view tenant,
                                   std::string_view key);
  bool RemoveIf(std::string_view tenant, std::string_view key,
                const IndexEntry& expected);
  // Removes the entry only if it holds `object_version`; returns it, or
  // nullopt when the key is absent or holds another version. Checked under
  // the shard lock, so a concurrent rewrite is never removed by mistake.
  std::optional<IndexEntry> RemoveIfVersion(std::string_view tenant,
                                            std::string_view key,
                                            uint64_t object_version);

  size_t size() const;

  // Calls fn for every entry, locking one shard at a time: entries added or
  // removed meanwhile may or may not be seen. fn must not call the index.
  void ForEach(
      const std::function<void(std::string_view tenant, std::string_view key,
                               const IndexEntry&)>& fn) const;

 private:
  static constexpr size_t kShards = 64;
  struct Shard {
    mutable std::mutex mu;
    // Key: 2-byte tenant length, tenant, key (no separator can collide).
    std::unordered_map<std::string, IndexEntry> map;
  };

  static std::string MakeKey(std::string_view tenant, std::string_view key);
  Shard& ShardOf(const std::string& k) const;

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_STORAGE_INDEX_H_
