// Whether this master may serve now, for a master that is one of several
// (docs/ha.md). MasterGrpcService asks before every RPC; without a gate (one
// master, the default) it always serves and its epoch is 0.
#ifndef KVPOOL_MASTER_SERVING_GATE_H_
#define KVPOOL_MASTER_SERVING_GATE_H_

#include <cstdint>
#include <string>

#include "common/epoch_header.h"

namespace kvpool {

class ServingGate {
 public:
  virtual ~ServingGate() = default;
  // The epoch this master leads under, or 0 when it must not serve (a
  // standby, or a leader no longer sure of its lease). Cheap: every RPC.
  virtual uint64_t ServingEpoch() const = 0;
  // Why it does not serve, for the caller's error ("standby; the leader is
  // 10.0.0.2:50051 (epoch 7)").
  virtual std::string NotServingReason() const = 0;
  // A peer has seen a leader of a later epoch: this master is stale and
  // must stop serving at once.
  virtual void SupersededBy(uint64_t epoch) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_SERVING_GATE_H_
