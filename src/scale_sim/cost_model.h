// The per-operation costs the scale simulation charges a master shard: what
// one call holds one of the shard's service threads for, per operation,
// plus the figures of memory, heartbeats and failover. Read from a JSON
// file whose schema docs/scale.md ("The cost file") documents, so that
// measurements (today's, and later `kvpool bench master-envelope`'s) feed the
// simulation without a rebuild. Plain data; no thread-safety concerns.
#ifndef KVPOOL_SCALE_SIM_COST_MODEL_H_
#define KVPOOL_SCALE_SIM_COST_MODEL_H_

#include <array>
#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool::scale_sim {

// The master calls a request makes, in the order a request makes them.
enum class Op : uint8_t {
  kLookup = 0,  // the router's BatchQueryReadOnly of the prompt's keys
  kGet = 1,     // the engine's BatchGetReplicaList of the keys it found
  kPut = 2,     // BatchPutStart + BatchPutEnd of the keys it did not
};
inline constexpr int kOpCount = 3;
const char* OpName(Op op);

// One operation's service time on one service thread of the shard it
// reaches: `calls` calls of `call_us` each, plus `key_us` per key of the
// batch, split evenly over the calls. Deterministic: the variance of a
// shard's latency is the queueing, not the service.
struct OpCost {
  int calls = 1;
  double call_us = 0;
  double key_us = 0;
  // Service time of one call of this operation carrying `keys` keys.
  double CallServiceUs(uint32_t keys) const {
    return call_us + key_us * keys / calls;
  }
};

struct CostModel {
  // Parallel service threads of one master (rpc_thread_num): the servers of
  // each shard's queue.
  int service_threads = 4;
  std::array<OpCost, kOpCount> ops;
  // Master resident bytes per object (object table, replicas, allocator).
  double bytes_per_object = 0;
  // One node heartbeat's service time at the master, and how often a node
  // sends one to each master it talks to.
  double heartbeat_us = 0;
  double heartbeat_interval_ms = 1000;
  // Failover of one shard: the successor leads `failover_detect_s` after
  // the leader died, remounts take `restart_base_s`, then the nodes
  // re-register the shard's objects at `reregister_objects_per_s`.
  double failover_detect_s = 0;
  double restart_base_s = 0;
  double reregister_objects_per_s = 1;

  const OpCost& cost(Op op) const { return ops[static_cast<int>(op)]; }
  // Seconds from a shard leader's death until the shard serves all of its
  // `objects` again.
  double FailoverSeconds(double objects) const {
    return failover_detect_s + restart_base_s +
           objects / reregister_objects_per_s;
  }
  // INVALID_PARAMS naming the first field out of range.
  Status Validate() const;
};

// Parses the cost file's JSON text (schema "kvpool-scale-sim-costs/1").
// Unknown fields are ignored (the file carries its sources as text);
// a missing required field or a wrong schema is INVALID_PARAMS.
Result<CostModel> ParseCostModel(const std::string& json_text);
Result<CostModel> LoadCostModel(const std::string& path);

}  // namespace kvpool::scale_sim

#endif  // KVPOOL_SCALE_SIM_COST_MODEL_H_
