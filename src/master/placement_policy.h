// PlacementPolicy: where a new put's replicas go. MAIN segments first
// (preferred nodes first, none on a node the client could not reach or
// NodeRegistry holds unreachable); when they are full, a synchronous
// eviction pass and a bounded wait for room already on its way (offloads in
// flight, frees the nodes have still to apply); then the overflow into
// prefetch buffers. It decides and allocates; what eviction drops is the
// owner's business, reached through the one callback below.
//
// Promise: every returned Placement is allocated (the caller frees it if
// it does not use it); none lies on an excluded or unreachable node; a
// prefetch buffer is used only when MAIN segments had no room even after
// eviction. Empty when there is no room. A put waits at most
// put_offload_wait_ms (plus one wait slice) for room.
//
// Thread-safe: it keeps no state of its own (its counters live in the
// MetricsRegistry). Called without any shard lock held: the eviction
// callback takes shard locks.
#ifndef KVPOOL_MASTER_PLACEMENT_POLICY_H_
#define KVPOOL_MASTER_PLACEMENT_POLICY_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "master/master_config.h"
#include "master/node_registry.h"
#include "master/offload_scheduler.h"
#include "master/segment_manager.h"

namespace kvpool {

class PlacementPolicy {
 public:
  // The knobs it reads, named as in MasterConfig.
  struct Options {
    double eviction_ratio = 0.05;
    bool enable_offload = false;
    int64_t put_offload_wait_ms = 5000;
    static Options FromConfig(const MasterConfig& c);
  };

  // Frees at least `bytes` of MAIN replicas in `segments` (ascending ids)
  // if it can; returns the bytes freed. Called without locks held.
  using EvictFn = std::function<uint64_t(
      uint64_t bytes, const std::vector<uint32_t>& segments)>;

  // One put's request. The views must outlive the Allocate call.
  struct Request {
    uint64_t size = 0;
    int replica_num = 1;
    std::string_view preferred_node;               // tried first; empty: none
    std::span<const std::string> preferred_nodes;  // then these, in order
    // Nodes the client could not reach on the data plane: reported to
    // NodeRegistry, so every later put avoids them too until they
    // heartbeat again.
    std::span<const std::string> excluded_nodes;
  };

  PlacementPolicy(Options options, SegmentManager& segments,
                  NodeRegistry& nodes, OffloadScheduler& offloads,
                  MetricsRegistry& metrics, EvictFn evict);
  PlacementPolicy(const PlacementPolicy&) = delete;
  PlacementPolicy& operator=(const PlacementPolicy&) = delete;

  // Up to request.replica_num ranges of request.size bytes on distinct
  // segments (fewer when space is short; the caller decides what is
  // enough).
  std::vector<Placement> Allocate(const Request& request);

 private:
  // Evicts synchronously and retries, waiting for room that is on its way
  // up to put_offload_wait_ms. Evicts only in segments that were open and
  // still had no room for the put: none while every segment is closed.
  std::vector<Placement> AllocateAfterEviction(
      uint64_t size, int replica_num, const std::vector<std::string>& preferred,
      const std::vector<std::string>& excluded);

  const Options options_;
  SegmentManager& segments_;
  NodeRegistry& nodes_;
  OffloadScheduler& offloads_;
  MetricsRegistry& metrics_;
  const EvictFn evict_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_PLACEMENT_POLICY_H_
