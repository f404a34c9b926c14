// The engine model at work: one simulated inference engine is a FIFO queue
// served by one thread, one request at a time, against a real kvpool Client.
// Per request: look the block keys up (BatchIsExist, with prefetch_to_memory
// when asked), read the longest stored prefix with BatchGetInto into a
// registered buffer (real reads: their time is the KV load time), wait the
// modelled prefill of the missing tokens, then store the new blocks with
// BatchPutFrom while the modelled decode occupies the engine.
// TTFT = queue wait + lookup + KV load + prefill.
#ifndef KVPOOL_REPLAY_ENGINE_H_
#define KVPOOL_REPLAY_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvpool/client.h"
#include "replay/engine_model.h"
#include "replay/trace.h"
#include "storage/aligned_buffer.h"

namespace kvpool::replay {

// What the router saw and did for a request (empty when not routed).
struct RouteInfo {
  bool routed = false;
  double routed_s = 0;  // when Route returned: the trigger time
  double route_ms = 0;  // time spent in Route
  bool affinity_hit = false;
  bool prefetch_disabled = false;
  // Per block of the prefix the router matched: 'M' memory, 'S' SSD only,
  // 'P' processing; the holder of the best replica; and the trigger status
  // (-1 = not triggered, else a PrefetchToMemoryStatus).
  std::vector<char> tiers;
  std::vector<std::string> holders;
  std::vector<int8_t> trigger_status;
};

struct EngineRequest {
  size_t index = 0;  // in the trace
  const TraceRequest* trace = nullptr;
  double arrival_s = 0;  // scheduled arrival (steady clock, s)
  RouteInfo route;
};

// One request as the engine served it. Times are steady-clock seconds;
// durations are ms.
struct RequestRecord {
  size_t index = 0;
  int engine = 0;
  double arrival_s = 0, start_s = 0, get_start_s = 0, first_token_s = 0,
         done_s = 0;
  double queue_ms = 0, lookup_ms = 0, load_ms = 0, prefill_ms = 0, ttft_ms = 0,
         put_ms = 0, decode_ms = 0, probe_ms = 0;
  uint32_t blocks = 0;
  uint32_t matched = 0;     // longest prefix the lookup found
  uint32_t read_ok = 0;     // ... of which read (a failed read ends it)
  uint32_t dram_reads = 0;  // read_ok = dram_reads + ssd_reads
  uint32_t ssd_reads = 0;   // from Client::counters().ssd_bytes_read
  uint32_t probe_ssd = 0;   // blocks the pre-read tier probe saw SSD-only
  uint32_t corrupt = 0;     // read, but not the bytes that were stored
  uint32_t put_blocks = 0;
  uint32_t put_failed = 0;
  uint64_t prefill_tokens = 0;
  // Blocks SSD-only when routed, by what their get did.
  uint32_t route_ssd_only = 0;
  uint32_t route_ssd_read_dram = 0;
  uint32_t route_ssd_read_ssd = 0;
  uint32_t route_ssd_not_read = 0;
  double window_ms = -1;  // routed -> BatchGetInto start; -1 if not routed
  RouteInfo route;
};

struct EngineConfig {
  int index = 0;
  std::string id;
  uint64_t block_bytes = 1 << 20;
  size_t max_blocks = 256;      // blocks of the longest prompt
  bool exist_prefetch = false;  // BatchIsExist(prefetch_to_memory = true)
};

class Engine {
 public:
  using DoneFn = std::function<void(RequestRecord)>;
  // `client` must outlive the engine. Registers its buffer; Start() fails
  // with the client's status if that fails.
  Engine(EngineConfig config, Client* client, const EngineModel* model,
         DoneFn done);
  ~Engine();
  Status Start();
  void Enqueue(EngineRequest r);
  // Requests queued or in service.
  size_t Load() const;
  // Serves what is queued, then stops the thread.
  void Drain();

 private:
  void Loop();
  RequestRecord Serve(const EngineRequest& r);

  EngineConfig config_;
  Client* client_;
  const EngineModel* model_;
  DoneFn done_;
  storage::AlignedBuffer buf_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineRequest> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_ENGINE_H_
