// The router's dispatch policy, as a pure function so it can be tested
// without a cluster: tier affinity weighed against load.
#ifndef KVPOOL_ROUTER_DISPATCH_H_
#define KVPOOL_ROUTER_DISPATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/router.h"

namespace kvpool {

struct DispatchChoice {
  int engine = -1;  // index into the engine list; -1 when there is none
  // The engine is local to the nodes holding the most prefix blocks (among
  // nodes with a local engine).
  bool affinity = false;
};

// `holders` is the holder node of each block of the matched prefix, in
// order (empty strings are skipped). `in_flight` is indexed like
// `engines`. Each engine costs
//   in_flight + affinity_weight x max(1, mean in_flight over engines)
//               x (share of the prefix's blocks held by nodes not local
//                  to it)
// and the cheapest wins; ties go to the engine holding more of the prefix,
// then to config order. So a request leaves the engine local to all of its
// blocks only when that engine is more than `affinity_weight` x the mean
// load (at least that many requests) ahead of another: the load gap
// affinity may open is bounded, and in proportion to the load.
// A negative `affinity_weight` is pure affinity (the engines local to the
// top holder, least loaded among them; load alone only when no holder has
// a local engine).
DispatchChoice PickEngine(const std::vector<EngineInfo>& engines,
                          const std::vector<uint64_t>& in_flight,
                          const std::vector<std::string>& holders,
                          double affinity_weight);

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_DISPATCH_H_
