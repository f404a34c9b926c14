// The master's object table: (tenant, key) -> ObjectMeta, sharded by key
// hash so operations on different keys rarely contend. Structs are compact
// (a tenant is an interned 32-bit id; a replica is 16 bytes) because the
// master holds millions of them.
#ifndef KVPOOL_MASTER_OBJECT_STORE_H_
#define KVPOOL_MASTER_OBJECT_STORE_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>

#include "common/mutex.h"
#include "common/per_thread_cache.h"
#include "master/client_liveness.h"
#include "master/object_key.h"
#include "master/replica_list.h"

namespace kvpool {

enum class TriggerSource : uint8_t { kOnHit = 0, kExist = 1, kRouter = 2 };

// Four signed millisecond times of 48 bits each in 24 bytes (instead of 32
// as int64_t). A stored time saturates at +-2^47 ms (about 4,460 years), so
// the order of any two times is kept (a max() of stored times is the stored
// max), and a deadline compares with a clock reading exactly as long as the
// reading is below 2^47: the master's clock is the steady clock, ms since
// boot (common/clock.h), so that holds for any uptime. Only a deadline
// beyond 4,460 years from now (a TTL of that size) comes back smaller than
// it was set, and still in that far future.
class PackedMillis4 {
 public:
  static constexpr int64_t kMax = (int64_t{1} << 47) - 1;
  static constexpr int64_t kMin = -(int64_t{1} << 47);

  int64_t Get(int i) const {
    const uint16_t* p = &parts_[3 * i];
    const uint64_t u =
        uint64_t{p[0]} | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 32);
    // Sign-extends bit 47.
    return static_cast<int64_t>(u << 16) >> 16;
  }
  void Set(int i, int64_t v) {
    const uint64_t u = static_cast<uint64_t>(std::clamp(v, kMin, kMax));
    uint16_t* p = &parts_[3 * i];
    p[0] = static_cast<uint16_t>(u);
    p[1] = static_cast<uint16_t>(u >> 16);
    p[2] = static_cast<uint16_t>(u >> 32);
  }

 private:
  uint16_t parts_[12] = {};
};
static_assert(sizeof(PackedMillis4) == 24);

struct ObjectMeta {
  // The value's size shares a word with three small fields (sizes are below
  // 2^48: a value fits a segment, SegmentManager::kMaxCapacity, and an SSD
  // copy's size is checked at registration). With the four times in 48 bits
  // each and a 32-byte ReplicaList, an ObjectMeta is 80 bytes and its node
  // in the table (with a 24-byte ObjectKey) a 104-byte allocation, a
  // 112-byte chunk of glibc's malloc (docs/master_envelope.md).
  uint64_t size : 48 = 0;
  bool hard_pin : 1 = false;
  // Its DRAM replica came from a prefetch and no get has read it yet: the
  // fate of the prefetch is counted when it is read, evicted or removed.
  bool prefetched_unread : 1 = false;
  // Router triggers (QUEUED or IN_MEMORY) not yet followed by a get; the
  // get that brings it to 0 may drop the trigger's lease
  // (prefetch_consumed_lease_ms). Saturates.
  uint8_t pending_prefetch_reads : 8 = 0;
  // Changes whenever the value changes (put, upsert): an offload result for
  // an older value is refused, so an SSD copy never carries other bytes.
  uint64_t version = 0;
  // Every get extends the soft pin (soft_pin_deadline_ms) by this much.
  uint32_t soft_pin_ttl_ms = 0;
  // Master-clock ms, modulo 2^32, of the oldest router trigger not yet
  // followed by a get, or of the last get if several were pending (for the
  // trigger -> get window histogram; the window
  // is seconds, so the wrap every 49 days does not matter).
  uint32_t pending_trigger_ms32 = 0;

  // Master-clock times (ms), kept in 48 bits each (PackedMillis4 says why
  // that changes nothing).
  // No live lease when <= now.
  int64_t lease_deadline_ms() const { return times_.Get(kLeaseDeadline); }
  void set_lease_deadline_ms(int64_t v) { times_.Set(kLeaseDeadline, v); }
  // Last get/put completion; while the put is in progress, its start time
  // (the put timeouts count from it).
  int64_t last_access_ms() const { return times_.Get(kLastAccess); }
  void set_last_access_ms(int64_t v) { times_.Set(kLastAccess, v); }
  // Soft pin (evicted only after unpinned objects) lasts until this time.
  int64_t soft_pin_deadline_ms() const { return times_.Get(kSoftPinDeadline); }
  void set_soft_pin_deadline_ms(int64_t v) { times_.Set(kSoftPinDeadline, v); }
  // The part of lease_deadline_ms granted to readers (get, exist): no one
  // may shorten it, since a reader copies bytes until then.
  int64_t reader_lease_deadline_ms() const {
    return times_.Get(kReaderLeaseDeadline);
  }
  void set_reader_lease_deadline_ms(int64_t v) {
    times_.Set(kReaderLeaseDeadline, v);
  }

 private:
  enum : int {
    kLeaseDeadline = 0,
    kLastAccess = 1,
    kSoftPinDeadline = 2,
    kReaderLeaseDeadline = 3,
  };
  PackedMillis4 times_;

 public:
  // Inline room for a MEMORY and a LOCAL_DISK replica: a lookup reads the
  // replicas from the node itself instead of following a pointer to the heap
  // (one cache miss fewer per key on a large table).
  ReplicaList replicas;

  bool SoftPinned(int64_t now) const { return soft_pin_deadline_ms() > now; }
  bool HasCompleteMemory() const {
    for (const auto& r : replicas) {
      if (r.kind == ReplicaKind::kMemory &&
          r.status == ReplicaStatus::kComplete)
        return true;
    }
    return false;
  }
  bool HasDiskOn(uint32_t node) const {
    for (const auto& r : replicas) {
      if (r.kind == ReplicaKind::kLocalDisk && r.segment == node) return true;
    }
    return false;
  }
  // Removes and returns the replicas for which `pred` holds.
  template <typename Pred>
  std::vector<Replica> TakeReplicas(Pred pred) {
    std::vector<Replica> taken;
    auto keep =
        std::stable_partition(replicas.begin(), replicas.end(),
                              [&](const Replica& r) { return !pred(r); });
    taken.assign(keep, replicas.end());
    replicas.erase(keep, replicas.end());
    return taken;
  }
  const Replica* FirstCompleteDisk() const {
    for (const auto& r : replicas) {
      if (r.kind == ReplicaKind::kLocalDisk &&
          r.status == ReplicaStatus::kComplete)
        return &r;
    }
    return nullptr;
  }

  bool HasComplete() const {
    for (const auto& r : replicas) {
      if (r.status == ReplicaStatus::kComplete) return true;
    }
    return false;
  }
  bool HasProcessing() const {
    for (const auto& r : replicas) {
      if (r.status == ReplicaStatus::kProcessing) return true;
    }
    return false;
  }
  bool LeaseLive(int64_t now_ms) const { return lease_deadline_ms() > now_ms; }
};
// The master's memory per object is a measured figure (bench master).
static_assert(sizeof(ObjectMeta) == 80);
static_assert(sizeof(std::pair<const ObjectKey, ObjectMeta>) == 104);
// The largest value size an ObjectMeta holds.
inline constexpr uint64_t kMaxObjectSize = (uint64_t{1} << 48) - 1;

// The single promotion entry of a key, shared by every promotion path
// (promote-on-hit, prefetch-on-exist, router trigger): at most one per key.
struct PromotionState {
  uint64_t task_id = 0;
  uint32_t holder = 0;  // node index of the LOCAL_DISK source (pinned)
  int64_t created_ms = 0;
  TriggerSource source = TriggerSource::kOnHit;
  bool from_prefetch = false;
  // A get arrived before the promoted replica landed: the prefetch missed
  // its window (fate "landed_after_get").
  bool get_before_landing = false;
  // Bytes reserved in the holder's prefetch buffer (router promotions).
  uint64_t buffer_reserved = 0;
  bool staged = false;  // PromotionAllocStart reserved `staged_*`
  uint32_t staged_segment = 0;
  uint32_t staged_handle = 0;
  uint64_t staged_offset = 0;
  // Master-clock ms after which the promotion is no longer worth starting
  // (0 = never): the latest deadline of the router triggers that asked for
  // it; a trigger without one clears it.
  int64_t deadline_ms = 0;
  // Its holder has the task: handed out from the mailbox, or given to the
  // holder's exist trigger while still queued (ClaimForExist). A mailbox
  // copy met after that is a duplicate and is not delivered.
  bool with_holder = false;
};

// An offload handed to a holder and not yet answered; pins the memory
// replica it copies.
struct OffloadState {
  uint32_t node = 0;
  uint64_t version = 0;
  int64_t created_ms = 0;
};

// Interns tenant names ("default", ...) into small ids, and forgets a name
// once nothing of its tenant is left, so a name costs memory only while the
// master holds something of it. Thread-safe; takes no other lock (a leaf in
// the master's lock order).
//
// A tenant lives while its reference count is above zero: one reference per
// object and per upsert the master holds of it, and one per Pin of a request
// that may give it such a thing (a put, a re-registration), so that it
// cannot go between the request's lookup of its id and its insert; the
// insert takes over the request's reference.
//
// Ids count up and are not reused (until they wrap after 2^32 tenants, and
// then never one in use): a reader that looked a tenant up just before it
// went finds nothing under the old id, not another tenant's objects.
class TenantTable {
 public:
  // The id of `name` with one reference more; a new tenant is created
  // unless `max_tenants` exist already (then -1, and nothing changes).
  int64_t Pin(std::string_view name, size_t max_tenants);
  // One reference fewer; the tenant is forgotten when it was the last.
  void Unref(uint32_t id);
  // -1 when the tenant does not exist (so it holds nothing). Never creates.
  int64_t Lookup(std::string_view name) const;
  // Without the table's lock when this thread asked for the id before and
  // no tenant was forgotten since (it is asked per event, per put).
  std::string Name(uint32_t id) const;
  // The same as a view into this thread's cache of names, valid until this
  // thread's next Name or NameView call (empty for an unknown id): the
  // events' hot path copies it at once and so copies no std::string.
  std::string_view NameView(uint32_t id) const;
  // HashName of the tenant's name; 0 for an unknown id.
  uint64_t NameHash(uint32_t id) const;
  // What state that must outlive a tenant (version floors, lost versions)
  // is keyed by: the name, since a tenant created again gets a new id.
  static uint64_t HashName(std::string_view name);
  size_t size() const;

 private:
  struct Entry {
    std::string name;
    uint64_t name_hash = 0;
    std::atomic<int64_t> refs{0};
  };
  // Readers (lookups, and Pin/Unref of a tenant that exists, whose count is
  // atomic) share it; creating or forgetting a tenant takes it exclusively.
  mutable SharedMutex mu_;
  // Node-based, so each name stays put and `ids_` can key on views of it.
  absl::node_hash_map<uint32_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string_view, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Name's per-thread cache (common/per_thread_cache.h): bumped under the
  // exclusive lock whenever a tenant is forgotten, the only time an id's
  // name can go (an id's name never changes while it exists).
  const uint64_t cache_owner_ = NewCacheOwnerSerial();
  std::atomic<uint64_t> forgotten_{0};
};

// A reference a request holds on its tenant while it works (TenantTable::Pin),
// dropped when it goes out of scope unless handed to what the request
// inserted.
class TenantPin {
 public:
  TenantPin() = default;
  TenantPin(TenantTable* table, uint32_t id) : table_(table), id_(id) {}
  TenantPin(const TenantPin&) = delete;
  TenantPin& operator=(const TenantPin&) = delete;
  TenantPin(TenantPin&& o) noexcept : table_(o.table_), id_(o.id_) {
    o.table_ = nullptr;
  }
  TenantPin& operator=(TenantPin&& o) noexcept {
    if (this != &o) {
      Release();
      table_ = std::exchange(o.table_, nullptr);
      id_ = o.id_;
    }
    return *this;
  }
  ~TenantPin() { Release(); }
  // The reference now belongs to the object or upsert the caller inserted
  // (and goes with its erase).
  void Transfer() { table_ = nullptr; }

 private:
  void Release() {
    if (table_ != nullptr) table_->Unref(id_);
    table_ = nullptr;
  }
  TenantTable* table_ = nullptr;
  uint32_t id_ = 0;
};

// One table of a shard, with exactly the operations the master uses on it
// (find, count, insert, erase, iterate; prefetch for QueryReadOnlyBatch).
// The shard hands a table out only to a caller that holds the shard's lock
// (Shard::objects() etc. require it), so -Wthread-safety proves that every
// access to a table happens under its lock. A reference or iterator must
// not be kept past the unlock.
template <typename Map>
class ShardTable {
 public:
  using iterator = typename Map::iterator;
  using const_iterator = typename Map::const_iterator;

  template <typename K>
  iterator find(const K& k) {
    return map_.find(k);
  }
  template <typename K>
  const_iterator find(const K& k) const {
    return map_.find(k);
  }
  template <typename K>
  size_t count(const K& k) const {
    return map_.count(k);
  }
  // Inserts a default value for a key not present yet.
  template <typename K>
  decltype(auto) operator[](K&& k) {
    return map_[std::forward<K>(k)];
  }
  template <typename... Args>
  decltype(auto) emplace(Args&&... args) {
    return map_.emplace(std::forward<Args>(args)...);
  }
  template <typename... Args>
  decltype(auto) insert(Args&&... args) {
    return map_.insert(std::forward<Args>(args)...);
  }
  // By iterator or by key, as the underlying container does.
  template <typename... Args>
  decltype(auto) erase(Args&&... args) {
    return map_.erase(std::forward<Args>(args)...);
  }
  // Pulls the key's control bytes and slot into the cache (absl tables).
  template <typename K>
  void prefetch(const K& k) const {
    map_.prefetch(k);
  }
  iterator begin() { return map_.begin(); }
  iterator end() { return map_.end(); }
  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  void clear() { map_.clear(); }

 private:
  Map map_;
};

class ObjectStore {
 public:
  // Every operation on a shard is bounded by the shard's size: a scan
  // (eviction, a node's death) or a table's rehash holds its lock for about
  // 160-300 ns per object of the shard. With 8192 shards that stays under
  // 10 ms up to a few hundred million objects (1024 shards passed it near
  // 30 million: bench master-envelope, docs/master_envelope.md).
  static constexpr size_t kShards = 8192;
  // Node-based (an ObjectMeta never moves, so references survive inserts)
  // SwissTable: per lookup one group of control bytes and one slot before
  // the node, and both can be prefetched for a whole batch of keys
  // (QueryReadOnlyBatch), which std::unordered_map's bucket chains cannot.
  using ObjectMap = ShardTable<
      absl::node_hash_map<ObjectKey, ObjectMeta, ObjectKeyHash, ObjectKeyEq>>;
  using PromotionMap =
      ShardTable<std::unordered_map<ObjectKey, PromotionState, ObjectKeyHash,
                                    ObjectKeyEq>>;
  using OffloadMap = ShardTable<
      std::unordered_map<ObjectKey, OffloadState, ObjectKeyHash, ObjectKeyEq>>;
  // Keys with a put in progress, each with the client that started it
  // (none: an older client).
  using PendingPutMap = ShardTable<
      std::unordered_map<ObjectKey, ClientId, ObjectKeyHash, ObjectKeyEq>>;

  // A slice of the key space under one lock. Callers take it with
  // `MutexLock lock(&shard.mu());`; the tables are reachable only while it
  // is held, and functions handed a locked shard say so with
  // ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()).
  class Shard {
   public:
    Shard() { mu_.TrackHolds(&hold_); }
    Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
    // For code the analysis cannot follow into (a callback run under the
    // lock): states that the caller holds it. Checks nothing at run time.
    void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(mu_) {}

    ObjectMap& objects() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return objects_; }
    const ObjectMap& objects() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return objects_;
    }
    ObjectMap& upserts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return upserts_; }
    const ObjectMap& upserts() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return upserts_;
    }
    PromotionMap& promotions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return promotions_;
    }
    const PromotionMap& promotions() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return promotions_;
    }
    OffloadMap& offloads() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return offloads_;
    }
    const OffloadMap& offloads() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return offloads_;
    }
    PendingPutMap& pending_puts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_puts_;
    }
    const PendingPutMap& pending_puts() const
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_puts_;
    }

    const LockHoldTracker& hold() const { return hold_; }
    void ResetHold() { hold_.Reset(); }

   private:
    // Before mu_, which reports to it.
    LockHoldTracker hold_;
    mutable Mutex mu_;
    ObjectMap objects_ ABSL_GUARDED_BY(mu_);
    // Upserts in progress: the new replicas, invisible to readers until
    // PutEnd swaps them in (the old value stays readable meanwhile).
    ObjectMap upserts_ ABSL_GUARDED_BY(mu_);
    PromotionMap promotions_ ABSL_GUARDED_BY(mu_);
    OffloadMap offloads_ ABSL_GUARDED_BY(mu_);
    // Keys that got a PROCESSING replica from PutStart (in `objects` or
    // `upserts`), so that the reclaim of abandoned puts visits these and not
    // every object. A key may stay here after its put ended; the next
    // reclaim pass drops it. The client of each, so that a dead client's
    // puts are released (ClientLiveness).
    PendingPutMap pending_puts_ ABSL_GUARDED_BY(mu_);
  };

  Shard& ShardFor(const ObjectKey& k) {
    return shards_[ShardIndex(ObjectKeyHash()(k))];
  }
  Shard& ShardFor(const ObjectKeyView& k) {
    return shards_[ShardIndex(ObjectKeyHash()(k))];
  }
  // From the hash's mixed top bits: the shard's table takes its control
  // byte from the low 7 bits of the same hash, and when those chose the
  // shard (hash % kShards), every key of a shard had the same one, so a
  // probe compared the key of every full slot of its group.
  static size_t ShardIndex(size_t hash) {
    static_assert(std::has_single_bit(kShards));
    constexpr int kBits = std::countr_zero(kShards);
    return static_cast<size_t>((uint64_t{hash} * 0x9E3779B97F4A7C15ull) >>
                               (64 - kBits));
  }
  Shard& shard(size_t i) { return shards_[i]; }
  size_t Size() const;
  // The longest any shard's lock was held since ResetMaxHold, while
  // LockHoldTracker::enabled() (0 if never).
  int64_t MaxHoldNs() const;
  // The same in the holder's thread CPU time (common/mutex.h).
  int64_t MaxCpuHoldNs() const;
  void ResetMaxHold();

 private:
  // On the heap: 8192 shards are a few MiB, too much for a stack frame
  // (tests build a MasterService on the stack).
  const std::unique_ptr<Shard[]> shards_{new Shard[kShards]};
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_OBJECT_STORE_H_
