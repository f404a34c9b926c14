// MasterService: the metadata brain of kvpool. Objects and their replicas,
// leases, allocation across segments, eviction, put timeouts and node
// liveness. Never touches value bytes. Transport-agnostic: the gRPC layer
// (master_grpc_service.h) converts messages to these calls, and tests call
// them directly with a FakeClock.
//
// Thread-safe. Lock order: object shard -> segment allocator; nothing takes
// a shard lock while holding a segment lock.
#ifndef KVPOOL_MASTER_MASTER_SERVICE_H_
#define KVPOOL_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "kvpool/status.h"
#include "master/master_config.h"
#include "master/object_store.h"
#include "master/segment_manager.h"

namespace kvpool {

inline constexpr size_t kMaxKeyLength = 4096;
inline constexpr const char* kDefaultTenant = "default";

struct PutOptions {
  int replica_num = 1;
  std::string preferred_node;  // node id whose segments to try first
  bool soft_pin = false;
  bool hard_pin = false;
  bool upsert = false;  // replace an existing value when this put completes
};

// What a client needs to reach one replica.
struct ReplicaDesc {
  ReplicaKind kind = ReplicaKind::kMemory;
  ReplicaStatus status = ReplicaStatus::kComplete;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::shared_ptr<const SegmentInfo> segment;  // kMemory
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
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  std::vector<SegmentSnapshot> segments;
};

class MasterService {
 public:
  MasterService(MasterConfig config, const Clock* clock = SystemClock::Default());
  ~MasterService();

  // Starts / stops the background thread (eviction, graveyard, put
  // timeouts, liveness). Tests may instead call the steps directly.
  void Start();
  void Stop();

  // ---- segments and liveness ----
  Result<uint32_t> MountSegment(SegmentInfo info);
  Status UnmountSegment(const std::string& node_id, uint32_t segment_id);
  // CLIENT_NOT_FOUND when the node is unknown (e.g. the master restarted):
  // the node must mount its segments again.
  Status Heartbeat(const std::string& node_id);

  // ---- put ----
  Result<std::vector<ReplicaDesc>> PutStart(const std::string& tenant, const std::string& key,
                                            uint64_t size, const PutOptions& opts);
  Status PutEnd(const std::string& tenant, const std::string& key);
  Status PutRevoke(const std::string& tenant, const std::string& key);

  // ---- get / exist / query ----
  // Grants (extends) the read lease. REPLICA_IS_NOT_READY while only
  // PROCESSING replicas exist.
  Result<GetResult> GetReplicaList(const std::string& tenant, const std::string& key);
  // OK when a COMPLETE replica exists, else OBJECT_NOT_FOUND. Grants the
  // lease unless `grant_lease` is false.
  ErrorCode ExistKey(const std::string& tenant, const std::string& key, bool grant_lease);
  // Tier lookup: no lease, no LRU touch, no get/exist metrics.
  QueryResult QueryReadOnly(const std::string& tenant, const std::string& key) const;
  // The same for many keys of one tenant; segment details are left to the
  // caller (SegmentInfo of each replica's segment id), so the hot path takes
  // no segment lock and copies no strings.
  template <typename KeyRange>
  void QueryReadOnlyBatch(const std::string& tenant, const KeyRange& keys,
                          BatchQueryResult* out) const;

  // ---- remove ----
  Status Remove(const std::string& tenant, const std::string& key, bool force);
  // Removes every object of the tenant that is complete and unleased (all,
  // with force). Returns how many were removed.
  uint64_t RemoveAll(const std::string& tenant, bool force);

  // ---- maintenance steps (run by the background thread) ----
  // Evicts when the MAIN watermark is above the high watermark. Returns the
  // bytes freed.
  uint64_t EvictIfNeeded();
  // Frees at least `bytes` of MAIN memory if it can, LRU first. Returns the
  // bytes freed.
  uint64_t EvictBytes(uint64_t bytes);
  // Graveyard, abandoned puts, dead nodes.
  void Housekeep();

  MasterStats Stats() const;
  MetricsRegistry& metrics() { return metrics_; }
  std::string StatusJson() const;
  const MasterConfig& config() const { return config_; }
  SegmentManager& segments() { return segments_; }

 private:
  Status ValidateKey(const std::string& key) const;
  ObjectKey MakeKey(const std::string& tenant, const std::string& key);
  void QueryOne(int64_t tenant_id, std::string_view key, int64_t now, BatchQueryResult* out) const;
  bool LookupKey(const std::string& tenant, const std::string& key, ObjectKeyView* out) const;
  ReplicaDesc Describe(const Replica& r, uint64_t size) const;
  // Releases the MEMORY ranges of `replicas`: at once, or when `not_before`
  // passes (a reader's lease or a writer's window is still open).
  void ReleaseReplicas(const std::vector<Replica>& replicas, int64_t not_before_ms);
  void DropNode(const std::string& node_id);
  void DropSegments(const std::vector<uint32_t>& segment_ids);
  void CountResult(const char* op, ErrorCode code);
  void BackgroundLoop();

  const MasterConfig config_;
  const Clock* clock_;
  MetricsRegistry metrics_;
  SegmentManager segments_;
  TenantTable tenants_;
  ObjectStore objects_;

  std::mutex nodes_mu_;
  std::unordered_map<std::string, int64_t> node_last_heartbeat_ms_;

  std::atomic<uint64_t> evicted_objects_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  std::mutex evict_mu_;  // one eviction pass at a time

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;
  std::thread bg_thread_;
  int64_t last_slow_housekeep_ms_ = 0;
};

template <typename KeyRange>
void MasterService::QueryReadOnlyBatch(const std::string& tenant, const KeyRange& keys,
                                       BatchQueryResult* out) const {
  int64_t tid = tenants_.Lookup(tenant.empty() ? std::string(kDefaultTenant) : tenant);
  int64_t now = clock_->NowMs();
  out->items.reserve(out->items.size() + static_cast<size_t>(keys.size()));
  for (const auto& k : keys) QueryOne(tid, k, now, out);
}

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_SERVICE_H_
