#include "replay/serial_engine.h"

#include <algorithm>
#include <cstring>

#include "replay/clock_util.h"
#include "replay/kv_io.h"

namespace kvpool::replay {

SerialEngine::SerialEngine(EngineConfig config, Client* client,
                           const EngineModel* model, DoneFn done)
    : config_(std::move(config)),
      client_(client),
      model_(model),
      done_(std::move(done)),
      buf_(std::max<size_t>(1, config_.max_blocks) * config_.block_bytes) {
  // Touch every page now, so first-touch faults are not read as KV load.
  std::memset(buf_.data(), 0x5a, buf_.size());
}

SerialEngine::~SerialEngine() {
  Drain();
  client_->UnregisterBuffer(buf_.data()).IgnoreError();  // teardown
}

Status SerialEngine::Start() {
  if (Status s = client_->RegisterBuffer(buf_.data(), buf_.size()); !s.ok()) {
    return s;
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void SerialEngine::Enqueue(EngineRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(r));
  }
  cv_.notify_one();
}

size_t SerialEngine::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t SerialEngine::Load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (busy_now_ ? 1 : 0);
}

void SerialEngine::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SerialEngine::Loop() {
  while (true) {
    EngineRequest r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      r = std::move(queue_.front());
      queue_.pop_front();
      busy_now_ = true;
    }
    RequestRecord rec = Serve(r);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_now_ = false;
      ++served_;
    }
    busy_.Add(rec.start_s, rec.done_s);
    done_(std::move(rec));
  }
}

RequestRecord SerialEngine::Serve(const EngineRequest& r) {
  const TraceRequest& t = *r.trace;
  const uint64_t bb = config_.block_bytes;
  RequestRecord rec;
  rec.index = r.index;
  rec.engine = config_.index;
  rec.arrival_s = r.arrival_s;
  rec.route = r.route;
  const std::vector<std::string> keys = RequestKeys(t, config_.max_blocks);
  rec.blocks = uint32_t(keys.size());

  rec.start_s = NowSec();
  rec.queue_ms = (rec.start_s - r.arrival_s) * 1e3;
  PrefixLoad load =
      LoadPrefix(*client_, keys, t, buf_.data(), bb, config_.exist_prefetch);
  ModelHostToGpuCopy(model_->h2d_ms_per_block, &load);
  RecordLoad(load, r.route, &rec);
  const double loaded = load.done_s;
  const size_t read_ok = load.read_ok;

  const uint64_t cached = std::min<uint64_t>(t.input_length, read_ok * 512);
  rec.prefill_tokens = t.input_length - cached;
  rec.prefill_ms = model_->PrefillMs(rec.prefill_tokens);
  rec.first_token_s = loaded + rec.prefill_ms / 1e3;
  SleepUntilSec(rec.first_token_s);
  // The tier probe is instrumentation: its time is taken out of TTFT.
  rec.ttft_ms = (rec.first_token_s - r.arrival_s) * 1e3 - rec.probe_ms;
  rec.part_wait_ms = rec.queue_ms;
  rec.part_prefill_ms = rec.prefill_ms;
  rec.part_load_ms = rec.ttft_ms - rec.part_wait_ms - rec.part_prefill_ms;

  // Store the blocks the engine computed; this overlaps the decode, as a
  // real engine's KV store does.
  BlockStore put = StoreBlocks(*client_, keys, t, read_ok, buf_.data(), bb);
  rec.put_ms = put.ms;
  rec.put_blocks = put.blocks;
  rec.put_failed = put.failed;
  rec.decode_ms = model_->DecodeMs(t.output_length);
  rec.done_s = rec.first_token_s + std::max(rec.put_ms, rec.decode_ms) / 1e3;
  SleepUntilSec(rec.done_s);
  return rec;
}

EngineStats SerialEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s;
  s.steps = served_;
  return s;
}

}  // namespace kvpool::replay
