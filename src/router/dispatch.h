// The router's dispatch policy, as a pure function so it can be tested
// without a cluster: tier affinity first, then load.
#ifndef KVPOOL_ROUTER_DISPATCH_H_
#define KVPOOL_ROUTER_DISPATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/router.h"

namespace kvpool {

struct DispatchChoice {
  int engine = -1;  // index into the engine list; -1 when there is none
  bool affinity = false;
};

// `holders` is the holder node of each block of the matched prefix, in
// order. Among the nodes that have at least one local engine, the ones
// holding the most prefix blocks win; the least loaded engine local to them
// is chosen (ties: config order). When no engine is local to any holder,
// the least loaded engine overall. `in_flight` is indexed like `engines`.
DispatchChoice PickEngine(const std::vector<EngineInfo>& engines,
                          const std::vector<uint64_t>& in_flight,
                          const std::vector<std::string>& holders);

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_DISPATCH_H_
