// SSD holders that live in this process, by node id. When a client's get
// finds that the holder of a LOCAL_DISK replica lives in its own process (an
// engine that is also a node, or a LocalCluster), it reads that SSD directly
// instead of asking the holder over a socket. The node's SSD tier implements
// LocalHolder and registers itself here, and the client looks it up here:
// the data plane's in-process path, so neither includes the other.
// Thread-safe.
#ifndef KVPOOL_TRANSPORT_LOCAL_HOLDERS_H_
#define KVPOOL_TRANSPORT_LOCAL_HOLDERS_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvpool/status.h"
#include "transport/data_plane_types.h"

namespace kvpool {

// The two data-plane key ops (SSD_READ, PREFETCH), served in process.
class LocalHolder {
 public:
  virtual ~LocalHolder() = default;

  // Serves SSD_READ of the data plane: fills each op's dest and result.
  virtual void ServeReads(std::span<KeyReadOp> ops) = 0;

  // Prefetch-on-exist at the holder. Returns at once, one code per key: OK =
  // accepted (held here), OBJECT_NOT_FOUND = not on this SSD. Accepted keys
  // are registered with the master (RegisterPrefetchTask) by a background
  // thread and promoted by the shared chain on the promotion worker;
  // `on_done(key, code)` (optional) reports each key's outcome:
  // OK, PROMOTION_ALREADY_EXISTS (skipped quietly), NO_AVAILABLE_HANDLE
  // (DRAM pressure), UNAVAILABLE_IN_CURRENT_STATUS (an older master), ...
  // `for_next_get`: a get's kick, whose promotions are for the next get of
  // each key (the get that kicked reads the SSD itself), so the holder never
  // drops them for coming after that get's read.
  using PrefetchDone =
      std::function<void(const std::string& key, ErrorCode code)>;
  virtual std::vector<ErrorCode> PrefetchKeys(
      const std::string& tenant, const std::vector<std::string>& keys,
      PrefetchDone on_done, bool for_next_get) = 0;
};

void RegisterLocalHolder(const std::string& node_id,
                         std::weak_ptr<LocalHolder> holder);
void UnregisterLocalHolder(const std::string& node_id);
// The holder if it is in this process and running, else nullptr. The
// returned pointer keeps the holder alive while the caller reads.
std::shared_ptr<LocalHolder> FindLocalHolder(const std::string& node_id);

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_LOCAL_HOLDERS_H_
