// The SSD tiers hosted by this process, by node id. When a client's get
// finds that the holder of a LOCAL_DISK replica lives in its own process (an
// engine that is also a node, or a LocalCluster), it reads that SSD directly
// instead of asking the holder over a socket. Thread-safe.
#ifndef KVPOOL_NODE_LOCAL_HOLDERS_H_
#define KVPOOL_NODE_LOCAL_HOLDERS_H_

#include <memory>
#include <string>

namespace kvpool {

class SsdTier;

void RegisterLocalHolder(const std::string& node_id,
                         std::weak_ptr<SsdTier> tier);
void UnregisterLocalHolder(const std::string& node_id);
// The holder's tier if it is in this process and running, else nullptr. The
// returned pointer keeps the tier alive while the caller reads.
std::shared_ptr<SsdTier> FindLocalHolder(const std::string& node_id);

}  // namespace kvpool

#endif  // KVPOOL_NODE_LOCAL_HOLDERS_H_
