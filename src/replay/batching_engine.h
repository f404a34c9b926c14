// The default engine model (--engine=batching): one simulated engine that
// schedules like vLLM's V1 scheduler and SGLang, in real time, against a
// real kvpool Client.
//
// - A step thread runs BatchScheduler (batch_scheduler.h): each forward step
//   carries the running decodes and prefill chunks up to the token budget and
//   lasts StepMs(tokens) of the engine model; steps follow one another on a
//   planned timeline (a step starts where the last one ended, not where the
//   thread woke), so sleep overshoot does not accumulate. A step that starts
//   more than 1 ms late is counted as lagged (EngineStats).
// - Loader threads (`EngineConfig::loaders`) do each request's KV load:
//   BatchIsExist and BatchGetInto of the stored prefix into a buffer of their
//   own (kv_io.h), while the step thread keeps stepping the other requests.
//   The load starts at admission or at arrival (SchedulerConfig::load_start).
// - A put thread stores the blocks a request computed (BatchPutFrom), after
//   the step that finished its prefill, off the critical path. A request's
//   GPU KV memory is released when its decode has ended and its store is done.
#ifndef KVPOOL_REPLAY_BATCHING_ENGINE_H_
#define KVPOOL_REPLAY_BATCHING_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "replay/engine.h"
#include "replay/kv_io.h"
#include "storage/aligned_buffer.h"

namespace kvpool::replay {

class BatchingEngine : public Engine {
 public:
  // How a loader loads a request's prefix into `buf`; the default is
  // LoadPrefix on the engine's client. Tests replace it.
  using LoadFn = std::function<PrefixLoad(const EngineRequest&,
                                          const std::vector<std::string>& keys,
                                          uint8_t* buf)>;

  BatchingEngine(EngineConfig config, Client* client, const EngineModel* model,
                 DoneFn done, LoadFn load = nullptr);
  ~BatchingEngine() override;
  Status Start() override;
  void Enqueue(EngineRequest r) override;
  size_t Load() const override;
  size_t Waiting() const override;
  size_t Loading() const override { return sched_loading_.load(); }
  void Drain() override;
  const BusyLog& busy() const override { return busy_; }
  EngineStats stats() const override;

 private:
  struct Inflight {
    EngineRequest req;
    RequestRecord rec;
    std::vector<std::string> keys;
    bool decode_done = false;
    bool put_done = false;
  };
  struct LoadJob {
    uint64_t id;
    const EngineRequest* req;
    const std::vector<std::string>* keys;
  };
  struct LoadReply {
    uint64_t id;
    PrefixLoad load;
  };
  struct PutJob {
    uint64_t id;
    const TraceRequest* trace;
    const std::vector<std::string>* keys;
    size_t from;
  };

  void StepLoop();
  void LoaderLoop(size_t slot);
  void PutLoop();
  void SubmitLoad(uint64_t id, Inflight& f, double now);
  void OnFirstToken(uint64_t id, Inflight& f, double at);
  void MaybeComplete(uint64_t id);

  EngineConfig config_;
  Client* client_;
  const EngineModel* model_;
  DoneFn done_;
  LoadFn load_;
  BatchScheduler sched_;  // step thread only
  // sched_'s waiting queue and its admitted requests still loading, after
  // the step thread's last admission round.
  std::atomic<size_t> sched_waiting_{0};
  std::atomic<size_t> sched_loading_{0};  // of it, admitted and loading
  // Step thread only: requests by id (their trace index).
  std::unordered_map<uint64_t, std::unique_ptr<Inflight>> inflight_;

  std::vector<storage::AlignedBuffer> load_bufs_;
  storage::AlignedBuffer put_buf_;
  BusyLog busy_;

  mutable std::mutex mu_;
  std::condition_variable step_cv_, load_cv_, put_cv_;
  std::deque<EngineRequest> inbox_;
  std::deque<LoadJob> load_queue_;
  std::vector<LoadReply> load_replies_;
  std::deque<PutJob> put_queue_;
  std::vector<std::pair<uint64_t, BlockStore>> put_replies_;
  size_t outstanding_ = 0;  // enqueued, not yet completed
  bool stopping_ = false;
  bool workers_stop_ = false;
  EngineStats stats_;

  std::thread step_thread_, put_thread_;
  std::vector<std::thread> loaders_;
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_BATCHING_ENGINE_H_
