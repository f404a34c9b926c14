// The first engine model (--engine=serial), kept for comparison: one
// simulated engine is a FIFO queue served by one thread, one request at a
// time. Per request: look the blocks up and read the stored prefix (real
// store calls, kv_io.h), wait the modelled prefill of the missing tokens,
// then store the new blocks with BatchPutFrom while the modelled decode
// occupies the engine. TTFT = queue wait + lookup + KV load + prefill. Its
// decode blocks every other request, so TTFT is mostly queueing; the
// batching engine is the default for that reason.
#ifndef KVPOOL_REPLAY_SERIAL_ENGINE_H_
#define KVPOOL_REPLAY_SERIAL_ENGINE_H_

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "replay/engine.h"
#include "storage/aligned_buffer.h"

namespace kvpool::replay {

class SerialEngine : public Engine {
 public:
  SerialEngine(EngineConfig config, Client* client, const EngineModel* model,
               DoneFn done);
  ~SerialEngine() override;
  Status Start() override;
  void Enqueue(EngineRequest r) override;
  size_t Load() const override;
  size_t Waiting() const override;
  void Drain() override;
  const BusyLog& busy() const override { return busy_; }
  EngineStats stats() const override;

 private:
  void Loop();
  RequestRecord Serve(const EngineRequest& r);

  EngineConfig config_;
  Client* client_;
  const EngineModel* model_;
  DoneFn done_;
  storage::AlignedBuffer buf_;
  BusyLog busy_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineRequest> queue_;
  bool busy_now_ = false;
  bool stopping_ = false;
  uint64_t served_ = 0;
  std::thread thread_;
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_SERIAL_ENGINE_H_
