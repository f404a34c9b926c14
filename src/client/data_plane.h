// Moves bytes between caller buffers and replicas: shared memory for
// segments on this host (mapped once, then plain memcpy), the TCP data plane
// otherwise (one batched round trip per node). Also the client-side half of
// the bounds check: a range the master granted must lie inside its segment.
// Thread-safe.
#ifndef KVPOOL_CLIENT_DATA_PLANE_H_
#define KVPOOL_CLIENT_DATA_PLANE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "kvpool.pb.h"
#include "kvpool/options.h"
#include "kvpool/status.h"
#include "transport/shm_segment.h"
#include "transport/tcp_data_client.h"

namespace kvpool {

// A contiguous part of a value: `length` bytes at `value_offset` of the
// value, read into or written from `buf`.
struct ValuePiece {
  uint64_t value_offset = 0;
  uint8_t* buf = nullptr;
  uint64_t length = 0;
};

struct TransferItem {
  const rpc::MemoryLocation* loc = nullptr;
  uint8_t* buf = nullptr;  // destination of a read, source of a write
  uint64_t length = 0;     // must equal loc->length()
  ErrorCode result = ErrorCode::OK;
  // Non-empty: moves these pieces instead of the whole value at `buf` (a
  // scatter/gather with no staging copy: one memcpy per piece on shared
  // memory, one range per piece on TCP). Each must lie inside [0, length),
  // else INVALID_PARAMS; a write's pieces must cover the value exactly once
  // (the caller's duty).
  std::span<const ValuePiece> pieces;
};

class DataPlane {
 public:
  // `clock` (must outlive the data plane) times the mappings' idle expiry
  // and the sweep; tests pass a FakeClock.
  explicit DataPlane(TransportMode mode,
                     const TcpDataClientOptions& tcp_options = {},
                     const Clock* clock = SystemClock::Default());
  void Read(std::vector<TransferItem>& items);
  void Write(std::vector<TransferItem>& items);
  // SSD_READ of each op at the holder named by peers[i] = (endpoint, node
  // id); one round trip per holder.
  void ReadKeys(std::vector<KeyReadOp>& ops,
                const std::vector<std::pair<std::string, std::string>>& peers);
  // The address of a MEMORY replica's bytes in a shared-memory mapping of
  // this process, or nullptr when the replica must go over TCP (another
  // host, a forced TCP mode, a bad descriptor). The pointer is valid while
  // `*hold` (the mapping) is kept.
  const uint8_t* ResolveShm(const rpc::MemoryLocation& loc, uint64_t length,
                            std::shared_ptr<const ShmSegment>* hold);
  // Lets go of mappings no reply has named for `idle_ms`, and of those a
  // later mount of the same file replaced; each is unmapped once no copy in
  // progress and no cached lease holds it (so the pages of a departed
  // node's unlinked segment are freed). Runs by itself every few seconds.
  void DropIdleMappings(int64_t idle_ms) ABSL_LOCKS_EXCLUDED(shm_mu_);
  // Mappings this data plane keeps (not counting those only holders keep).
  size_t mapped_segments() const ABSL_LOCKS_EXCLUDED(shm_mu_);
  static constexpr int64_t kIdleUnmapMs = 120000;
  // Asks a holder to promote `keys` (the PREFETCH frame; a get's kick,
  // `for_next_get`, PREFETCH_FOR_NEXT_GET).
  Status Prefetch(const std::string& endpoint, const std::string& node_id,
                  const std::string& tenant,
                  const std::vector<std::string>& keys,
                  std::vector<ErrorCode>* results,
                  const std::vector<std::string>* tokens = nullptr,
                  bool for_next_get = false) {
    return tcp_.Prefetch(endpoint, node_id, tenant, keys, results, tokens,
                         for_next_get);
  }

  std::atomic<uint64_t> shm_bytes_read{0}, shm_bytes_written{0};
  std::atomic<uint64_t> tcp_bytes_read{0}, tcp_bytes_written{0};
  std::atomic<uint64_t> ssd_bytes_read{0};
  // Writes copied into a same-host segment whose node no longer owned it
  // after the copy (died, or stopped): not acknowledged by shared memory.
  std::atomic<uint64_t> shm_writes_owner_gone{0};
  std::atomic<uint64_t> local_ssd_bytes_read{
      0};  // of which from an in-process holder

 private:
  enum class Path { kShm, kTcp, kInvalid };
  Path Choose(TransferItem& item, uint8_t** shm_ptr,
              std::shared_ptr<const ShmSegment>* hold);
  std::shared_ptr<const ShmSegment> MapShm(const rpc::MemoryLocation& loc)
      ABSL_LOCKS_EXCLUDED(shm_mu_);
  void MaybeSweep();
  template <typename Op>
  void Transfer(std::vector<TransferItem>& items, bool write);

  const TransportMode mode_;
  const Clock* const clock_;
  mutable Mutex shm_mu_;
  struct Mapping {
    std::shared_ptr<const ShmSegment> seg;
    int64_t last_used_ms = 0;
  };
  // By (shm path, segment id).
  std::map<std::pair<std::string, uint64_t>, Mapping> shm_maps_
      ABSL_GUARDED_BY(shm_mu_);
  std::atomic<int64_t> next_sweep_ms_{0};
  TcpDataClient tcp_;
  std::once_flag shm_fallback_logged_;
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_DATA_PLANE_H_
