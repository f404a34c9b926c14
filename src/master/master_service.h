// MasterService: the metadata brain of kvpool. Objects and their replicas,
// leases, allocation across segments, eviction, put timeouts, node liveness,
// and the SSD tier's bookkeeping (offload tasks, LOCAL_DISK replicas, the
// promotion RPCs, whose entry, gates and reaper are PromotionScheduler's,
// promotion_scheduler.h). Never touches value bytes. Transport-agnostic: the
// gRPC layer (master_grpc_service.h) converts messages to these calls, and
// tests call them directly with a FakeClock.
//
// Thread-safe. Lock order: object shard -> node registry -> segment
// allocator (the registry releases acknowledged ranges under its lock);
// nothing takes a shard lock while holding one of the others. The tenant
// table's lock is a leaf, taken under any of them.
#ifndef KVPOOL_MASTER_MASTER_SERVICE_H_
#define KVPOOL_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "events/event_queue.h"
#include "kvpool/status.h"
#include "master/client_liveness.h"
#include "master/closed_segments.h"
#include "master/eviction_policy.h"
#include "master/lease_policy.h"
#include "master/lost_versions.h"
#include "master/master_config.h"
#include "master/node_registry.h"
#include "master/object_store.h"
#include "master/offload_scheduler.h"
#include "master/placement_policy.h"
#include "master/promotion_scheduler.h"
#include "master/segment_manager.h"
#include "master/tiering_metrics.h"
#include "master/version_clock.h"
#include "master/version_floor.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace kvpool {

// The default of MasterConfig::max_key_bytes, and its bound: the data
// plane's (wire::kMaxKeySize).
inline constexpr size_t kMaxKeyLength = 4096;
inline constexpr const char* kDefaultTenant = "default";

struct PutOptions {
  int replica_num = 1;
  std::string preferred_node;  // node id whose segments to try first
  std::vector<std::string> preferred_nodes;  // then these, in order
  bool soft_pin = false;
  int64_t soft_pin_ttl_ms = 0;  // 0: default_kv_soft_pin_ttl
  bool hard_pin = false;
  bool upsert = false;  // replace an existing value when this put completes
  // Nodes the client could not reach on the data plane (a retried put):
  // nothing is placed there, and they stay avoided by every put until they
  // heartbeat again.
  std::vector<std::string> excluded_nodes;
  // The client that puts (ClientLiveness): if it falls silent for
  // client_ttl, the put is released. None: only the put timeouts do.
  ClientId client;
};

// What a client needs to reach one replica.
struct ReplicaDesc {
  ReplicaKind kind = ReplicaKind::kMemory;
  ReplicaStatus status = ReplicaStatus::kComplete;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::shared_ptr<const SegmentInfo> segment;  // kMemory
  std::shared_ptr<const NodeInfo> holder;      // kLocalDisk
  // A replica to be written (PutStart, PromotionAllocStart): the write
  // generation its WRITE token carries, drawn after its range was allocated
  // and greater than that of every earlier write grant (docs/security.md).
  // 0 otherwise.
  uint64_t write_generation = 0;
};

struct GetResult {
  uint64_t size = 0;
  std::vector<ReplicaDesc> replicas;  // COMPLETE only, MEMORY first
  int64_t lease_ttl_ms = 0;
};

struct QueryResult {
  ErrorCode code = ErrorCode::OK;
  uint64_t size = 0;
  std::vector<ReplicaDesc> replicas;  // every replica, any status
  int64_t lease_remaining_ms = 0;
};

// Results of a batched tier lookup, flat so a batch costs two allocations:
// item i's replicas are replicas[first_replica, first_replica+num_replicas).
struct QueryItem {
  ErrorCode code = ErrorCode::OK;
  uint64_t size = 0;
  int64_t lease_remaining_ms = 0;
  uint32_t first_replica = 0;
  uint32_t num_replicas = 0;
};
struct BatchQueryResult {
  std::vector<QueryItem> items;
  std::vector<Replica> replicas;
};

struct MasterStats {
  uint64_t objects = 0;
  uint64_t memory_replicas = 0;
  uint64_t disk_replicas = 0;
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  // Housekeeping found the master had not run for over a second (SIGSTOP,
  // a VM stall) and did not count that time against the nodes.
  uint64_t pauses_survived = 0;
  std::vector<SegmentSnapshot> segments;
};

// Offload and disk-object messages from holders.
struct OffloadResultIn {
  std::string tenant;
  std::string key;
  uint64_t version = 0;
  ErrorCode code = ErrorCode::OK;
};
struct DiskObjectIn {
  std::string tenant;
  std::string key;
  uint64_t size = 0;
  uint64_t version = 0;  // 0: written before versions (or by an older node)
};
// A COMPLETE replica in a remounted node's DRAM directory.
struct MemoryObjectIn {
  std::string tenant;
  std::string key;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t version = 0;
};

class MasterService {
 public:
  MasterService(MasterConfig config,
                const Clock* clock = SystemClock::Default());
  ~MasterService();

  // Starts / stops the background thread (eviction, graveyard, put
  // timeouts, liveness, reaper). Tests may instead call the steps directly.
  void Start();
  void Stop();

  // ---- segments and liveness ----
  // `remount`: the node served this memory under an earlier mount, so
  // readers may hold leases this master never granted; nothing new is
  // placed in the segment (it is closed) for default_kv_lease_ttl, after
  // which every such lease has run out. `keeps_dram_directory`: the node
  // tracks its COMPLETE replicas from DramEvents (see NodeRegistry) and,
  // after a remount, re-registers them (RegisterMemoryObjects); the segment
  // stays closed until its last batch is in. `opens_when_served`: the
  // segment is closed until the node calls OpenExtraSegment (it serves the
  // segment), or, after a remount with a directory, until that is in.
  Result<uint32_t> MountSegment(SegmentInfo info, bool ssd_enabled = false,
                                bool pulls_promotions = false,
                                bool remount = false,
                                bool keeps_dram_directory = false,
                                bool opens_when_served = false);
  // A remounted node's directory of segment `segment_id`, in batches sorted
  // by offset. Per object: OK = it is the key's value again, readable at
  // once; OBJECT_ALREADY_EXISTS = the pool has a newer value;
  // OBJECT_NOT_FOUND = the key was removed or replaced since (or a slot it
  // shares with such a key was: a clean miss, never a stale value);
  // INVALID_PARAMS = the range is not free or out of bounds, or the key or
  // tenant is over its limit; NO_AVAILABLE_HANDLE = its tenant would be one
  // more than max_tenants. `done` ends the directory. SEGMENT_NOT_FOUND /
  // CLIENT_NOT_FOUND for the whole call.
  Result<std::vector<ErrorCode>> RegisterMemoryObjects(
      const std::string& node_id, uint32_t segment_id,
      const std::vector<MemoryObjectIn>& objects, bool done);
  // Random, new at each start; on every get reply, so clients drop leases
  // they cached from an earlier master.
  uint64_t incarnation() const { return incarnation_; }
  // MasterConfig::emulate_pre_prefetch_master, changeable by rolling-upgrade
  // tests (a master "rolled back" and "forward" without a restart).
  bool emulating_pre_prefetch() const { return emulate_pre_prefetch_.load(); }
  void SetEmulatePrePrefetchForTest(bool on) { emulate_pre_prefetch_ = on; }
  // A further MAIN segment of a mounted node (rpc::MountExtraSegmentRequest):
  // it shares the node's key, endpoint and host and is never offloaded
  // from; `shm_path` empty = reached over TCP only. CLIENT_NOT_FOUND if the
  // node is unknown. Leaves the node's registration as it is (a second
  // MountSegment of a main segment would take the node for a restarted one).
  // It mounts closed: nothing is placed in it before OpenExtraSegment (the
  // node serves it), nor, with `remount`, for default_kv_lease_ttl.
  Result<uint32_t> MountExtraSegment(const std::string& node_id, uint64_t size,
                                     const std::string& shm_path, bool remount);
  // The node serves `segment_id`, one of its segments mounted closed until
  // it says so (an extra segment, or one mounted with opens_when_served):
  // it takes puts once nothing else holds it closed. SEGMENT_NOT_FOUND
  // unless the segment is such a segment of the node.
  Status OpenExtraSegment(const std::string& node_id, uint32_t segment_id);
  Status UnmountSegment(const std::string& node_id, uint32_t segment_id);
  // CLIENT_NOT_FOUND when the node is unknown (e.g. the master restarted):
  // the node must mount its segments again. With `tasks`, also hands over
  // the node's queued tasks, waiting up to `wait_ms` for some.
  // `dram_acked_seq`: the node applied every DramEvent up to it, so the
  // ranges their frees held can be reused. `promotion_room`: the node's
  // executor takes up to this many promotion tasks (at most
  // kMaxPromotionRoom), and none at 0, unless promotion_max_per_heartbeat
  // is 0 (no promotions by heartbeat); unset (an older node, the
  // sequential worker): that knob's count.
  static constexpr size_t kMaxPromotionRoom = 256;
  Status Heartbeat(const std::string& node_id, int64_t wait_ms = 0,
                   size_t max_offload = 0, NodeTasks* tasks = nullptr,
                   uint64_t dram_acked_seq = 0,
                   std::optional<size_t> promotion_room = std::nullopt);

  // ---- put ----
  Result<std::vector<ReplicaDesc>> PutStart(const std::string& tenant,
                                            const std::string& key,
                                            uint64_t size,
                                            const PutOptions& opts);
  Status PutEnd(const std::string& tenant, const std::string& key);
  // PutEnd of many keys of one tenant, waiting for the holders (removes of
  // upserted values, put_waits_for_holders) once for all of them.
  std::vector<Status> BatchPutEnd(const std::string& tenant,
                                  const std::vector<std::string>& keys);
  Status PutRevoke(const std::string& tenant, const std::string& key);

  // ---- client liveness ----
  // The client is alive (it has puts in flight). Returns the ttl (ms) after
  // which a silent client's puts are released, for the client to ping well
  // within; INVALID_PARAMS without an id.
  Result<int64_t> ClientPing(const ClientId& client);
  // How many clients the master tracks (those heard of within client_ttl).
  size_t tracked_clients() const { return clients_.size(); }
  // Most clients tracked at once: 64 Ki, a few MiB.
  static constexpr size_t kMaxTrackedClients = size_t{1} << 16;

  // ---- get / exist / query ----
  // Grants (extends) the read lease. REPLICA_IS_NOT_READY while only
  // PROCESSING replicas exist. For an SSD-only key with promotion_on_hit,
  // may admit a promotion (never waits for it).
  Result<GetResult> GetReplicaList(const std::string& tenant,
                                   const std::string& key);
  // OK when a COMPLETE replica exists, else OBJECT_NOT_FOUND. Grants the
  // lease unless `grant_lease` is false.
  ErrorCode ExistKey(const std::string& tenant, const std::string& key,
                     bool grant_lease);
  // Tier lookup: no lease, no LRU touch, no get/exist metrics.
  QueryResult QueryReadOnly(const std::string& tenant,
                            const std::string& key) const;
  // The same for many keys of one tenant; segment/holder details are left to
  // the caller, so the hot path takes no segment lock and copies no strings.
  template <typename KeyRange>
  void QueryReadOnlyBatch(const std::string& tenant, const KeyRange& keys,
                          BatchQueryResult* out) const;

  // ---- remove ----
  Status Remove(const std::string& tenant, const std::string& key, bool force);
  // Removes every object of the tenant that is complete and unleased (all,
  // with force). Returns how many were removed; INVALID_PARAMS for a tenant
  // name over max_tenant_name_bytes.
  Result<uint64_t> RemoveAll(const std::string& tenant, bool force);
  // The same, only for keys `key_regex` matches as a whole (ECMAScript
  // syntax); INVALID_PARAMS for a malformed expression.
  Result<uint64_t> RemoveByRegex(const std::string& tenant,
                                 const std::string& key_regex, bool force);

  // ---- SSD tier (holders) ----
  // The promotion pull thread's poll: at most `max` queued promotion tasks
  // of the node (CLIENT_NOT_FOUND if unknown). Also a liveness beat.
  Status PullPromotionTasks(const std::string& node_id, size_t max,
                            std::vector<PromotionTaskMsg>* out);
  // One code per result: OK = the LOCAL_DISK replica is recorded (duplicates
  // are idempotent); else the node must drop its copy. A NACK releases the
  // pin at once.
  std::vector<ErrorCode> NotifyOffload(
      const std::string& node_id, const std::vector<OffloadResultIn>& results);
  // A restarted node's SSD contents, with the versions of the values. OK =
  // recorded; else drop the copy (codes as for RegisterMemoryObjects).
  std::vector<ErrorCode> RegisterDiskObjects(
      const std::string& node_id, const std::vector<DiskObjectIn>& objects);
  // Two-phase SSD eviction: OK = the replica is gone from the master (or was
  // never there) and the node may free the space; else keep it.
  std::vector<ErrorCode> RemoveDiskReplicas(
      const std::string& node_id, const std::vector<DiskObjectIn>& objects);
  // The promotion chain, called by the holder of the task's source.
  Result<ReplicaDesc> PromotionAllocStart(const std::string& node_id,
                                          const std::string& tenant,
                                          const std::string& key, uint64_t size,
                                          uint64_t task_id);
  // `expired`: the holder dropped the task unread because its deadline had
  // passed (counted as expired, not failed).
  Status NotifyPromotion(const std::string& node_id, const std::string& tenant,
                         const std::string& key, uint64_t task_id, bool success,
                         bool expired = false);
  PromotionCounters promotion_counters() const {
    return promotions_.counters();
  }

  // Prefetch-on-exist: registers a promotion of `keys` held on the caller's
  // SSD (the seed's decision flow). Per key: OK with a task id and size, or
  // UNAVAILABLE_IN_CURRENT_STATUS, OBJECT_NOT_FOUND, REPLICA_IS_NOT_READY,
  // PROMOTION_ALREADY_EXISTS (skip quietly), INVALID_PARAMS (not the
  // holder, or a tenant over max_tenant_name_bytes), INVALID_KEY,
  // KEYS_ULTRA_LIMIT (shared in-flight cap). No sketch, no
  // watermark, no mailbox: the caller runs the promotion itself.
  struct PrefetchRegistration {
    ErrorCode code = ErrorCode::OK;
    uint64_t task_id = 0;
    uint64_t size = 0;
  };
  std::vector<PrefetchRegistration> RegisterPrefetchTask(
      const std::string& node_id, const std::string& tenant,
      const std::vector<std::string>& keys);
  // Router-triggered prefetch (docs/router_prefetch.md):
  // the RFC's per-key statuses. Inside the promote-on-hit gates (watermark,
  // dedup, shared in-flight cap) except the frequency sketch; the lease is
  // granted at enqueue. UNAVAILABLE_IN_CURRENT_STATUS for every key when
  // enable_prefetch_trigger is off; INVALID_PARAMS for a tenant over
  // max_tenant_name_bytes (a key over max_key_bytes is kNotFound).
  enum class PrefetchStatus : uint8_t {
    kInMemory,
    kQueued,
    kThrottledWatermark,
    kThrottledCap,
    kNoLocalDisk,
    kNotFound,
  };
  // `deadline_in_ms` > 0: the caller's estimate of when the engine reads the
  // blocks, in ms from now; the holders are handed such tasks earliest
  // deadline first (before tasks without one), and a task whose deadline
  // passes before its SSD read starts is dropped as fate "expired" (so is
  // one whose announced gets have all read the SSD already).
  Result<std::vector<PrefetchStatus>> BatchPrefetchToMemory(
      const std::string& tenant, const std::vector<std::string>& keys,
      int64_t deadline_in_ms = 0);
  // Hand-out of queued promotions (heartbeat or pull): drops those whose
  // deadline has passed, releasing their entry, and the copies of those an
  // exist trigger of their holder claimed; fills in the time left of the
  // others. Returns how many were dropped.
  size_t DropExpiredPromotions(std::vector<PromotionTaskMsg>* tasks);
  // Test hook: runs between the read-only and the read-write phase of
  // BatchPrefetchToMemory (the TOCTOU window). Not for production use.
  void SetPrefetchPhaseHookForTest(std::function<void()> hook) {
    prefetch_phase_hook_ = std::move(hook);
  }

  // ---- maintenance steps (run by the background thread) ----
  // Evicts when the MAIN segments are above the high watermark, and
  // likewise the PREFETCH_BUFFER segments, each on its own reading. Returns
  // the bytes freed. (EvictionPolicy, eviction_policy.h.)
  uint64_t EvictIfNeeded() { return eviction_.EvictIfNeeded(); }
  // Frees at least `bytes` of the replicas in segments of `kind` if it can,
  // LRU first (objects with an SSD copy before those without). Returns the
  // bytes freed.
  uint64_t EvictBytes(uint64_t bytes, SegmentKind kind = SegmentKind::kMain) {
    return eviction_.EvictBytes(bytes, kind);
  }
  // Graveyard, abandoned puts, dead nodes, expired tasks.
  void Housekeep();

  MasterStats Stats() const;
  // The longest an object shard's lock was held since the last reset, while
  // LockHoldTracker is enabled (bench master-envelope).
  int64_t MaxShardHoldNs() const { return objects_.MaxHoldNs(); }
  int64_t MaxShardCpuHoldNs() const { return objects_.MaxCpuHoldNs(); }
  void ResetMaxShardHold() { objects_.ResetMaxHold(); }
  MetricsRegistry& metrics() { return metrics_; }
  std::string StatusJson() const;
  const MasterConfig& config() const { return config_; }
  // How long a write capability for a value of `size` bytes lives.
  int64_t WriteGrantTtlMs(uint64_t size) const {
    return std::min<int64_t>(
        config_.write_capability_ttl_ms + int64_t(size >> 20) * 10,
        config_.put_start_discard_timeout_sec * 1000);
  }
  SegmentManager& segments() { return segments_; }
  NodeRegistry& nodes() { return nodes_; }
  const TenantTable& tenants() const { return tenants_; }
  // Tenants other than the default one (which always exists): those that
  // hold an object, an upsert, or a request working on their first one.
  size_t tenant_count() const { return tenants_.size() - 1; }

  // KV events (docs/kv_events.md): every change of a key's tiers is pushed
  // into `queue` (a KvEventPublisher's), under the key's shard lock, so a
  // key's events are queued in the order they happened. Set before Start
  // and not changed after; null (the default) = off, and then no event
  // costs more than a null check.
  void set_event_queue(events::EventQueue* queue) { events_ = queue; }

 private:
  using Shard = ObjectStore::Shard;
  using ObjectMap = ObjectStore::ObjectMap;

  // INVALID_KEY for an empty key or one over max_key_bytes.
  Status ValidateKey(std::string_view key) const;
  // INVALID_PARAMS for a tenant name over max_tenant_name_bytes.
  Status ValidateTenant(std::string_view tenant) const;
  bool KeyFits(std::string_view key) const {
    return !key.empty() && key.size() <= max_key_bytes_;
  }
  // Both of the above.
  Status ValidateName(std::string_view tenant, std::string_view key) const;
  // The key with its tenant pinned by `pin` (created if new): for requests
  // that may insert it. NO_AVAILABLE_HANDLE when that would make more than
  // max_tenants tenants.
  Status PinKey(const std::string& tenant, const std::string& key,
                ObjectKey* out, TenantPin* pin);
  bool LookupKey(const std::string& tenant, const std::string& key,
                 ObjectKeyView* out) const;
  // What a key's version floor and lost versions are keyed by: the tenant's
  // name and the key, so that they hold for a tenant created again.
  static uint64_t FloorHash(uint64_t tenant_hash, std::string_view key) {
    return ObjectKeyHash::Hash(0, key) ^ (tenant_hash * 0x9E3779B97F4A7C15ull);
  }
  uint64_t FloorHash(const ObjectKeyView& k) const {
    return FloorHash(tenants_.NameHash(k.tenant), k.key);
  }
  ReplicaDesc Describe(const Replica& r, uint64_t size) const;
  void QueryOne(int64_t tenant_id, std::string_view key, int64_t now,
                BatchQueryResult* out) const;
  // The two stages that run ahead of QueryOne in a batch: pull into the
  // cache the table's control bytes and slot for `key` (stage 1), then the
  // object's node (stage 2), so that by the time QueryOne reaches the key its
  // DRAM misses have overlapped those of other keys.
  enum class PrefetchStage { kSlot, kNode };
  void PrefetchLookup(int64_t tenant_id, std::string_view key,
                      PrefetchStage stage) const;
  // Releases the MEMORY ranges of `replicas`: at once, or when `not_before`
  // passes (a reader's lease or a writer's window is still open).
  void ReleaseReplicas(std::span<const Replica> replicas,
                       int64_t not_before_ms);
  // Erases an object and everything hanging off it (promotion entry,
  // pending offload), keeping ranges that someone may still touch until
  // it is safe. Returns the iterator past it.
  // Drops `okey` from shard.pending_puts() once no put of it is in progress.
  // Caller holds shard.mu().
  void ForgetPendingPut(Shard& shard, const ObjectKeyView& okey)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Why an object goes decides which copies of it may come back later
  // (the version floor): after a remove none older than now; after a
  // replacement (an upsert's commit) none of the replaced value or older,
  // but the new value, whose version was drawn before now, still may;
  // after an eviction none older than the evicted value (the value itself
  // was still current); after the loss of its last node any (that node was
  // only declared dead and may hold it still).
  enum class EraseCause { kRemoved, kReplaced, kEvicted, kLost };
  static uint64_t LostKeyHash(uint64_t tenant_hash, std::string_view key);
  // A user's remove of `it` (shard lock held): its SSD copies dropped, its
  // bytes kept while a reader or writer may touch them, and the holders to
  // wait for added to `holders`. Returns the iterator past it.
  // `emit_event`: a BlockRemoved for it (remove_all emits one
  // AllBlocksCleared instead).
  ObjectMap::iterator RemoveObject(
      Shard& shard, ObjectMap::iterator it,
      std::vector<std::pair<uint32_t, uint64_t>>* holders, bool emit_event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  ObjectMap::iterator EraseObject(Shard& shard, ObjectMap::iterator it,
                                  int64_t not_before_ms,
                                  EraseCause cause = EraseCause::kRemoved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Tells the directories of the nodes holding `m`'s COMPLETE memory
  // replicas (or only `only`) that they now hold this value (shard lock
  // held). Returns the tiers of those replicas (events::Medium bits, for
  // KV events: the segments are looked up here anyway).
  uint8_t NotePlaced(const ObjectKey& key, const ObjectMeta& m,
                     const Replica* only = nullptr);
  // KV events (master_events.cc); each a no-op while events are off.
  // `media`: events::Medium bits of the copies on `node`, the holder.
  // Shard lock held.
  // `tenant_name`: the name of key.tenant where the caller has it (the put
  // path), else it is looked up.
  void EmitTierEvent(events::TierEventKind kind, const ObjectKey& key,
                     uint64_t size, uint8_t media, std::string_view node,
                     events::Trigger trigger = events::Trigger::kNone,
                     bool ssd_copy = false,
                     const std::string* tenant_name = nullptr);
  // One event per holder node of the COMPLETE copies among `replicas`,
  // naming the tiers of that node's copies, in the order the nodes first
  // appear; `reverse`: the other way round (a put's copies: a subscriber
  // that puts each new memory copy first then lists them as the master).
  void EmitPerHolder(events::TierEventKind kind, const ObjectKey& key,
                     uint64_t size, std::span<const Replica> replicas,
                     events::Trigger trigger = events::Trigger::kNone,
                     bool ssd_copy = false, bool reverse = false,
                     const std::string* tenant_name = nullptr);
  uint8_t MediumOfSegment(uint32_t segment) const;
  void EmitCleared(const std::string& tenant);
  // Whether a re-registered copy of `version` may become `key`'s value
  // (shard lock held); on OK, `*attach_to` is the existing object with that
  // very version (the copy is another replica of it), or end().
  ErrorCode AdmitCopy(Shard& shard, const ObjectKey& key, uint64_t version,
                      uint64_t size, ObjectMap::iterator* attach_to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // Opens the segments closed at remount whose lease hold has ended and
  // whose directory is in.
  void ReopenSegments(int64_t now);
  // The holders of `m`'s copies and the last event issued to each (shard
  // lock held): after the caller erased `m` and unlocked, waiting for them
  // (AwaitHolders) means every holder has applied the deletion.
  void CollectHolders(std::span<const Replica> replicas,
                      std::vector<std::pair<uint32_t, uint64_t>>* out);
  void AwaitHolders(const std::vector<std::pair<uint32_t, uint64_t>>& want);
  // PutStart's steps (master_put.cc). The request's arguments: size,
  // replica count, the name limits.
  Status ValidatePut(const std::string& tenant, const std::string& key,
                     uint64_t size, const PutOptions& opts) const;
  // Whether a put of `okey` may proceed (shard lock held): an upsert or a
  // put of the key in progress refuses it, a stale unfinished one is
  // discarded (its range released only after the release timeout, since
  // its writer may still be writing), and a complete value refuses it
  // unless `upsert`.
  Status ClearWayForPut(Shard& shard, const ObjectKey& okey, bool upsert,
                        int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // The object a put creates: a PROCESSING replica per placement.
  ObjectMeta NewPendingObject(uint64_t size, const PutOptions& opts,
                              int64_t now,
                              const std::vector<Placement>& placements);
  // Publishes the pending put (as the key's object, or its upsert) unless
  // another put raced it or a segment went meanwhile (then frees
  // `placements`); on OK the tenant's reference passes from `pin` to it.
  // Takes the shard's lock.
  Status RecordPendingPut(Shard& shard, const ObjectKey& okey, bool upsert,
                          int64_t now, const std::vector<Placement>& placements,
                          ObjectMeta meta, TenantPin* pin,
                          const ClientId& client)
      ABSL_LOCKS_EXCLUDED(shard.mu());
  // The reclaim of unfinished puts (master_put_reclaim.cc), once a second:
  // those of dead clients (ClientLiveness) and those past
  // put_start_release_timeout_sec.
  void ReclaimPendingPuts(int64_t now);
  // When the range of a dead client's put `m` may be reused: once no late
  // write of it can land.
  int64_t DeadClientHoldUntil(const ObjectMeta& m, int64_t now) const;
  // PutEnd's work; the holders to wait for are added to `holders`.
  Status CommitPut(const std::string& tenant, const std::string& key,
                   std::vector<std::pair<uint32_t, uint64_t>>* holders);
  // Tells each holder of an SSD copy of `m` to delete it (a user remove or
  // an upsert's old value), so no restart re-registers it (shard lock held).
  void DropDiskCopies(const ObjectKey& key, const ObjectMeta& m);
  void DropNode(const NodeInfo& node);
  void DropSegments(const std::vector<uint32_t>& segment_ids,
                    const std::string& node_id);
  void ReapTasks(int64_t now);
  void CountResult(const char* op, ErrorCode code);
  // CountResult's counters, by op and -code, resolved on first use.
  static constexpr int kResultOps = 3;
  static constexpr const char* kResultOpNames[kResultOps] = {"puts", "gets",
                                                             "exists"};
  static constexpr int kResultCodeSlots = 1300;  // codes 0 .. -1299
  std::unique_ptr<std::atomic<Counter*>[]> result_counters_ {
    new std::atomic<Counter*>[ kResultOps * kResultCodeSlots ]()
  };
  Result<uint64_t> RemoveMatching(const std::string& tenant, bool force,
                                  const re2::RE2* key_regex);
  void BackgroundLoop();

  const MasterConfig config_;
  const size_t max_key_bytes_;
  const size_t max_tenant_name_bytes_;
  const Clock* clock_;
  events::EventQueue* events_ = nullptr;
  MetricsRegistry metrics_;
  TieringMetrics tiering_metrics_{&metrics_};
  SegmentManager segments_;
  TenantTable tenants_;
  NodeRegistry nodes_;
  // Clients with puts in flight, and when each was last heard of.
  ClientLiveness clients_;
  const uint64_t incarnation_;
  std::atomic<bool> emulate_pre_prefetch_;
  ObjectStore objects_;

  VersionClock versions_;
  // Generations of write grants: one per PutStart or PromotionAllocStart,
  // drawn once its ranges are allocated and before anyone can free them, so
  // a range's next owner always has a greater one than its last. A clock of
  // its own, so that grants do not advance object versions.
  VersionClock write_generations_;
  VersionFloor floor_;
  LostVersions lost_versions_;
  // Per tenant name (hashed into shared slots, as floor_ does keys):
  // versions below this were removed by remove_all, whether or not the
  // master knew the key then (a restart's re-registration). Not part of the
  // tenant's entry, which is forgotten once the tenant is empty: a node
  // that re-registers the tenant's old copies later re-creates the tenant
  // and must still be refused. Fixed memory however many tenants come and
  // go; a tenant sharing a slot with another only has copies older than
  // that one's remove_all refused (a clean miss), never a stale one taken.
  VersionFloor tenant_floor_;  // version_floor_slots / 16, at most 2^16
  // A get's read lease and the fate of prefetched replicas (shard lock
  // held by the caller).
  LeasePolicy leases_;
  // Which replicas go when a tier runs full; erases through EraseObject.
  EvictionPolicy eviction_;
  // The promotion entry: its gates, accounting, expiry and reaper.
  PromotionScheduler promotions_;
  // Offload tasks: the pins, the in-flight cap, the SSD-full pause, the
  // reaper, and the wait of puts for room.
  OffloadScheduler offload_scheduler_;
  // Where a put's replicas go (after offload_scheduler_, which it waits on).
  PlacementPolicy placement_;
  // Segments closed at a mount until their lease hold ends and their
  // directory is in (ReopenSegments opens them).
  ClosedSegments closed_segments_;

  std::function<void()> prefetch_phase_hook_;

  Mutex bg_mu_;
  CondVar bg_cv_;
  bool bg_stop_ ABSL_GUARDED_BY(bg_mu_) = false;
  // Started under bg_mu_ (Start); joined by Stop after bg_stop_ is set.
  std::thread bg_thread_;
  int64_t last_slow_housekeep_ms_ = 0;
};

template <typename KeyRange>
void MasterService::QueryReadOnlyBatch(const std::string& tenant,
                                       const KeyRange& keys,
                                       BatchQueryResult* out) const {
  const size_t n = static_cast<size_t>(keys.size());
  out->items.reserve(out->items.size() + n);
  if (tenant.size() > max_tenant_name_bytes_) {
    QueryItem bad;
    bad.code = ErrorCode::INVALID_PARAMS;
    bad.first_replica = static_cast<uint32_t>(out->replicas.size());
    out->items.insert(out->items.end(), n, bad);
    return;
  }
  int64_t tid =
      tenants_.Lookup(tenant.empty() ? std::string_view(kDefaultTenant)
                                     : std::string_view(tenant));
  int64_t now = clock_->NowMs();
  // Key i is looked up while key i+kAhead's node and key i+2*kAhead's slot
  // are on their way: at a million objects a lookup is about three DRAM
  // misses in a row, and one at a time they bound the master's rate.
  constexpr size_t kAhead = 4;
  if (n > 1) {
    for (size_t j = 0; j < std::min(n, 2 * kAhead); ++j) {
      PrefetchLookup(tid, keys[j], PrefetchStage::kSlot);
      if (j < kAhead) PrefetchLookup(tid, keys[j], PrefetchStage::kNode);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (n > 1) {
      if (i + 2 * kAhead < n) {
        PrefetchLookup(tid, keys[i + 2 * kAhead], PrefetchStage::kSlot);
      }
      if (i + kAhead < n) {
        PrefetchLookup(tid, keys[i + kAhead], PrefetchStage::kNode);
      }
    }
    QueryOne(tid, keys[i], now, out);
  }
}

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_SERVICE_H_
