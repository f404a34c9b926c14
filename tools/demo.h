// The README's demo workload: a LocalCluster with two nodes and a short
// put/get/exist/evict run that prints what happened.
#ifndef KVPOOL_TOOLS_DEMO_H_
#define KVPOOL_TOOLS_DEMO_H_

#include <cstdint>

namespace kvpool {

struct DemoOptions {
  int keys = 200;
  uint64_t value_size = 1ull << 20;
};

int RunDemo(const DemoOptions& opts);

}  // namespace kvpool

#endif  // KVPOOL_TOOLS_DEMO_H_
