// Internal to SsdTier's implementation files (ssd_tier*.cc): what more
// than one of them uses. Not for other users of the SSD tier.
#ifndef KVPOOL_NODE_SSD_TIER_INTERNAL_H_
#define KVPOOL_NODE_SSD_TIER_INTERNAL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "common/metrics.h"
#include "rpc/master_client.h"

namespace kvpool::ssd_tier_internal {

using Stub = rpc::MasterService::Stub;

// Adds the microseconds since `start` to the chain's time in `phase`
// (SsdTier's kvpool_node_promotion_phase_microseconds_total): where a
// promotion's time goes, summed over every worker, so a reader can tell a
// chain bound by its round trips from one bound by the disk. `phase` is a
// string literal (CounterVec::With finds its series by address).
inline void AddPhaseTime(CounterVec* phases, const char* phase,
                         std::chrono::steady_clock::time_point start) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  phases->With(phase).Inc(uint64_t(std::max<int64_t>(0, us)));
}

}  // namespace kvpool::ssd_tier_internal

#endif  // KVPOOL_NODE_SSD_TIER_INTERNAL_H_
