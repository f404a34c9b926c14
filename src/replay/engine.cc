#include "replay/engine.h"

#include <algorithm>
#include <cstring>

#include "replay/clock_util.h"

namespace kvpool::replay {

Engine::Engine(EngineConfig config, Client* client, const EngineModel* model,
               DoneFn done)
    : config_(std::move(config)),
      client_(client),
      model_(model),
      done_(std::move(done)),
      buf_(std::max<size_t>(1, config_.max_blocks) * config_.block_bytes) {
  // Touch every page now, so first-touch faults are not read as KV load.
  std::memset(buf_.data(), 0x5a, buf_.size());
}

Engine::~Engine() {
  Drain();
  client_->UnregisterBuffer(buf_.data());
}

Status Engine::Start() {
  if (Status s = client_->RegisterBuffer(buf_.data(), buf_.size()); !s.ok()) {
    return s;
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void Engine::Enqueue(EngineRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(r));
  }
  cv_.notify_one();
}

size_t Engine::Load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (busy_ ? 1 : 0);
}

void Engine::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::Loop() {
  while (true) {
    EngineRequest r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      r = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    RequestRecord rec = Serve(r);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    done_(std::move(rec));
  }
}

RequestRecord Engine::Serve(const EngineRequest& r) {
  const TraceRequest& t = *r.trace;
  const uint64_t bb = config_.block_bytes;
  RequestRecord rec;
  rec.index = r.index;
  rec.engine = config_.index;
  rec.arrival_s = r.arrival_s;
  rec.route = r.route;
  const size_t n = std::min(t.hash_ids.size(), config_.max_blocks);
  rec.blocks = uint32_t(n);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back(BlockKey(t.hash_ids[i]));

  rec.start_s = NowSec();
  rec.queue_ms = (rec.start_s - r.arrival_s) * 1e3;
  // The engine's lookup does not lease (Mooncake issue 3599); the get does.
  ExistOptions eo;
  eo.grant_lease = false;
  eo.prefetch_to_memory = config_.exist_prefetch;
  auto exist = client_->BatchIsExist(keys, eo);
  size_t matched = 0;
  while (matched < n && exist[matched].ok() && exist[matched].value()) {
    ++matched;
  }
  rec.matched = uint32_t(matched);
  const double looked_up = NowSec();
  rec.lookup_ms = (looked_up - rec.start_s) * 1e3;

  // Instrumentation, not engine work: which tier each block's get should
  // hit (read-only, no lease). Its time is recorded and left out of TTFT.
  std::vector<char> probe(matched, '-');
  if (matched > 0) {
    std::vector<std::string> pk(keys.begin(), keys.begin() + long(matched));
    auto d = client_->BatchGetReplicaDesc(pk);
    for (size_t i = 0; i < matched; ++i) {
      if (!d[i].ok()) continue;
      std::string tier = d[i]->BestTier();
      probe[i] = tier == "memory" ? 'M' : tier == "local_disk" ? 'S' : 'P';
    }
  }
  rec.get_start_s = NowSec();
  rec.probe_ms = (rec.get_start_s - looked_up) * 1e3;

  size_t read_ok = 0;
  if (matched > 0) {
    std::vector<std::string> gk(keys.begin(), keys.begin() + long(matched));
    std::vector<void*> ptrs(matched);
    std::vector<uint64_t> sizes(matched, bb);
    for (size_t i = 0; i < matched; ++i) ptrs[i] = buf_.data() + i * bb;
    const uint64_t ssd0 = client_->counters().ssd_bytes_read;
    auto got = client_->BatchGetInto(gk, ptrs, sizes);
    const uint64_t ssd_bytes = client_->counters().ssd_bytes_read - ssd0;
    rec.load_ms = (NowSec() - rec.get_start_s) * 1e3;
    // A block that could not be read ends the usable prefix: the engine
    // recomputes from there.
    while (read_ok < matched && got[read_ok].ok() &&
           got[read_ok].value() == bb) {
      uint64_t id;
      std::memcpy(&id, ptrs[read_ok], sizeof(id));
      if (id != t.hash_ids[read_ok]) {
        ++rec.corrupt;
        break;
      }
      ++read_ok;
    }
    rec.ssd_reads = uint32_t(std::min<uint64_t>(read_ok, ssd_bytes / bb));
    rec.dram_reads = uint32_t(read_ok) - rec.ssd_reads;
    for (size_t i = 0; i < read_ok; ++i) rec.probe_ssd += probe[i] == 'S';
  }
  rec.read_ok = uint32_t(read_ok);
  const double loaded = NowSec();

  const uint64_t cached = std::min<uint64_t>(t.input_length, read_ok * 512);
  rec.prefill_tokens = t.input_length - cached;
  rec.prefill_ms = model_->PrefillMs(rec.prefill_tokens);
  rec.first_token_s = loaded + rec.prefill_ms / 1e3;
  SleepUntilSec(rec.first_token_s);
  rec.ttft_ms = (rec.first_token_s - r.arrival_s) * 1e3 - rec.probe_ms;

  if (r.route.routed) {
    rec.window_ms = (rec.get_start_s - r.route.routed_s) * 1e3;
    for (size_t j = 0; j < r.route.tiers.size(); ++j) {
      if (r.route.tiers[j] != 'S') continue;
      ++rec.route_ssd_only;
      if (j >= read_ok) {
        ++rec.route_ssd_not_read;
      } else if (probe[j] == 'S') {
        ++rec.route_ssd_read_ssd;
      } else {
        ++rec.route_ssd_read_dram;
      }
    }
  }

  // Store the blocks the engine computed; this overlaps the decode, as a
  // real engine's KV store does.
  if (read_ok < n) {
    std::vector<std::string> pk(keys.begin() + long(read_ok), keys.end());
    std::vector<const void*> ptrs;
    std::vector<uint64_t> sizes(pk.size(), bb);
    for (size_t i = read_ok; i < n; ++i) {
      uint8_t* p = buf_.data() + i * bb;
      std::memcpy(p, &t.hash_ids[i], sizeof(uint64_t));
      ptrs.push_back(p);
    }
    const double put_start = NowSec();
    auto st = client_->BatchPutFrom(pk, ptrs, sizes);
    rec.put_ms = (NowSec() - put_start) * 1e3;
    rec.put_blocks = uint32_t(pk.size());
    for (const auto& s : st) rec.put_failed += !s.ok();
  }
  rec.decode_ms = model_->DecodeMs(t.output_length);
  rec.done_s = rec.first_token_s + std::max(rec.put_ms, rec.decode_ms) / 1e3;
  SleepUntilSec(rec.done_s);
  return rec;
}

}  // namespace kvpool::replay
