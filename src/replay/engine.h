// A simulated inference engine: what it is given (a routed request), what it
// reports (one record per request) and the interface both engine models
// implement: `serial` (serial_engine.h, one request at a time, the first
// model) and `batching` (batching_engine.h, continuous batching with
// asynchronous KV loads, the default).
#ifndef KVPOOL_REPLAY_ENGINE_H_
#define KVPOOL_REPLAY_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kvpool/client.h"
#include "replay/batch_scheduler.h"
#include "replay/engine_model.h"
#include "replay/trace.h"

namespace kvpool::replay {

// What the router saw and did for a request (empty when not routed).
struct RouteInfo {
  bool routed = false;
  double routed_s = 0;  // when Route returned: the trigger time
  double route_ms = 0;  // time spent in Route
  bool affinity_hit = false;
  bool prefetch_disabled = false;
  int64_t deadline_ms = 0;  // the triggers' deadline from the route (0 none)
  // The chosen engine's Waiting() reported just before the route, and of it
  // the requests already admitted whose KV load was running (Loading()).
  int64_t waiting_at_route = -1;  // -1: not reported
  int64_t loading_at_route = -1;
  // Per block of the prefix the router matched: 'M' memory, 'S' SSD only,
  // 'P' processing; the holder of the best replica; and the trigger status
  // (-1 = not triggered, else a PrefetchToMemoryStatus).
  std::vector<char> tiers;
  std::vector<std::string> holders;
  std::vector<int8_t> trigger_status;
  // Of `holders`, the blocks on the chosen engine's own node: what the
  // dispatch kept local.
  int own_host_blocks = 0;
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
  // TTFT in three parts that add up to it: waiting (arrival -> admission,
  // or the serial engine's queue), KV load (lookup, probe and read, the part
  // not overlapped with waiting) and prefill (the serial engine's modelled
  // prefill; the batching engine's time from admission-and-loaded to the end
  // of the step that produced the first token).
  double part_wait_ms = 0, part_load_ms = 0, part_prefill_ms = 0;
  // Batching engine: when the request was admitted, when its load was
  // asked for and when it finished (steady s; 0 = not applicable), and the
  // load's whole time including the wait for a free loader.
  double admit_s = 0, load_start_s = 0, load_done_s = 0, load_total_ms = 0;
  // Arrival-started loads: the first moment the GPU had room for the
  // request while its load was still running (0 = never).
  double fit_s = 0;
  uint32_t blocks = 0;
  uint32_t matched = 0;     // longest prefix the lookup found
  uint32_t read_ok = 0;     // ... of which read (a failed read ends it)
  uint32_t dram_reads = 0;  // read_ok = dram_reads + ssd_reads
  uint32_t ssd_reads = 0;   // from Client::counters().ssd_bytes_read
  uint32_t probe_ssd = 0;   // blocks the pre-read tier probe saw SSD-only
  uint32_t corrupt = 0;     // read, but not the bytes that were stored
  std::string read_stop;    // PrefixLoad::stop_cause
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
  // Batching engine only.
  SchedulerConfig scheduler;
  int loaders = 2;  // KV loads in flight at once (each has its own buffer)
};

// When an engine's GPU (or the serial engine's thread) was busy.
class BusyLog {
 public:
  void Add(double start_s, double end_s) {
    std::lock_guard<std::mutex> lock(mu_);
    spans_.emplace_back(start_s, end_s);
  }
  // Busy seconds within [w0, w1].
  double BusySec(double w0, double w1) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<double, double>> spans_;
};

struct EngineStats {
  uint64_t steps = 0;         // forward steps (serial: requests served)
  uint64_t step_tokens = 0;   // tokens over all steps
  uint64_t lagged_steps = 0;  // steps that started late (thread fell behind)
  double lag_ms = 0;          // their lateness, summed
  double max_lag_ms = 0;
  // The step thread ran at real-time priority (clock_util.h's
  // RunAsModelClock); false where the process may not (no CAP_SYS_NICE).
  bool realtime = false;
};

class Engine {
 public:
  using DoneFn = std::function<void(RequestRecord)>;
  virtual ~Engine() = default;
  // Registers the engine's buffers with its client; fails with the
  // client's status if that fails.
  virtual Status Start() = 0;
  virtual void Enqueue(EngineRequest r) = 0;
  // Requests queued or in service.
  virtual size_t Load() const = 0;
  // Requests not yet computing, as the engine would report them to a router
  // (vLLM's num_requests_waiting): those waiting for admission, and those
  // admitted whose KV load is still running (vLLM's v1 scheduler keeps them
  // in its waiting queue as WAITING_FOR_REMOTE_KVS).
  virtual size_t Waiting() const = 0;
  // Of Waiting(), the requests already admitted whose KV load is running
  // (they need no admission before a request routed now is admitted).
  virtual size_t Loading() const { return 0; }
  // Serves what is queued, then stops the engine's threads.
  virtual void Drain() = 0;
  virtual const BusyLog& busy() const = 0;
  virtual EngineStats stats() const = 0;
};

enum class EngineKind { kBatching, kSerial };
bool ParseEngineKind(const std::string& s, EngineKind* out);
const char* EngineKindName(EngineKind k);

// `client` and `model` must outlive the engine.
std::unique_ptr<Engine> MakeEngine(EngineKind kind, EngineConfig config,
                                   Client* client, const EngineModel* model,
                                   Engine::DoneFn done);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_ENGINE_H_
