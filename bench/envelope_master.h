// The master that `kvpool bench master-envelope` grows: one MasterService,
// called in process, with many fake nodes (one MAIN segment each, virtual
// capacity: the master never touches the bytes) and a FakeClock, so that
// silence, expiry and leases move only when the benchmark says so and no
// background thread runs beside the measured calls.
//
// Not thread-safe beyond what MasterService is: Fill and the node calls are
// for one thread; lookups may come from many.
#ifndef KVPOOL_BENCH_ENVELOPE_MASTER_H_
#define KVPOOL_BENCH_ENVELOPE_MASTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "master/master_service.h"

namespace kvpool::bench {

// Key i of the benchmark: "key-" and ten digits, 14 bytes (within
// std::string's inline buffer, as short block hashes are).
std::string EnvelopeKey(uint64_t i);
inline constexpr uint64_t kEnvelopeValueBytes = 4096;

class EnvelopeMaster {
 public:
  // `nodes` fake nodes; node 0 is the "big" node that gets one key in
  // `big_share_every` (the node whose death the benchmark times). With
  // `remount`, the segments are mounted as a restarted master sees them:
  // closed, with directories to re-register (RegisterMemoryObjects).
  EnvelopeMaster(int nodes, int big_share_every, bool remount);
  ~EnvelopeMaster();

  MasterService& svc() { return *svc_; }
  FakeClock& clock() { return clock_; }
  int nodes() const { return static_cast<int>(node_ids_.size()); }
  const std::string& node_id(int i) const { return node_ids_[i]; }
  uint32_t segment_of(int i) const { return segments_[i]; }

  // Puts keys [from, to) (PutStart each, BatchPutEnd per `batch`), one key
  // in big_share_every on node 0. Appends each batch's latency (s) to
  // `batch_latency` if given. Progress on stderr every tenth.
  void Fill(uint64_t from, uint64_t to, int batch,
            std::vector<double>* batch_latency);
  // Every node except `skip` beats once (no tasks).
  void HeartbeatAll(int skip);

 private:
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
  std::vector<std::string> node_ids_;
  std::vector<uint32_t> segments_;
  const int big_share_every_;
};

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCH_ENVELOPE_MASTER_H_
