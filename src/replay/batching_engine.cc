#include "replay/batching_engine.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstring>

#include "replay/clock_util.h"

namespace kvpool::replay {

namespace {

// A step that starts later than this after the last one's planned end was
// delayed by the thread, not by the model.
constexpr double kLagToleranceSec = 1e-3;

void NameThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace

BatchingEngine::BatchingEngine(EngineConfig config, Client* client,
                               const EngineModel* model, DoneFn done,
                               LoadFn load)
    : config_(std::move(config)),
      client_(client),
      model_(model),
      done_(std::move(done)),
      load_(std::move(load)),
      sched_(config_.scheduler),
      put_buf_(std::max<size_t>(1, config_.max_blocks) * config_.block_bytes) {
  const size_t bytes =
      std::max<size_t>(1, config_.max_blocks) * config_.block_bytes;
  for (int i = 0; i < std::max(1, config_.loaders); ++i) {
    load_bufs_.emplace_back(bytes);
    // Touch every page now, so first-touch faults are not read as KV load.
    std::memset(load_bufs_.back().data(), 0x5a, bytes);
  }
  std::memset(put_buf_.data(), 0x5a, put_buf_.size());
  if (!load_) {
    load_ = [this](const EngineRequest& r, const std::vector<std::string>& keys,
                   uint8_t* buf) {
      return LoadPrefix(*client_, keys, *r.trace, buf, config_.block_bytes,
                        config_.exist_prefetch);
    };
  }
}

BatchingEngine::~BatchingEngine() {
  Drain();
  // Teardown: a buffer the client no longer knows is already unregistered.
  for (auto& b : load_bufs_) client_->UnregisterBuffer(b.data()).IgnoreError();
  client_->UnregisterBuffer(put_buf_.data()).IgnoreError();
}

Status BatchingEngine::Start() {
  for (auto& b : load_bufs_) {
    if (Status s = client_->RegisterBuffer(b.data(), b.size()); !s.ok()) {
      return s;
    }
  }
  if (Status s = client_->RegisterBuffer(put_buf_.data(), put_buf_.size());
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < load_bufs_.size(); ++i) {
    loaders_.emplace_back([this, i] { LoaderLoop(i); });
  }
  put_thread_ = std::thread([this] { PutLoop(); });
  step_thread_ = std::thread([this] { StepLoop(); });
  return Status::OK();
}

void BatchingEngine::Enqueue(EngineRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(r));
    ++outstanding_;
  }
  step_cv_.notify_one();
}

size_t BatchingEngine::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inbox_.size() + sched_waiting_.load();
}

size_t BatchingEngine::Load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_;
}

void BatchingEngine::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  step_cv_.notify_all();
  if (step_thread_.joinable()) step_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = true;
  }
  load_cv_.notify_all();
  put_cv_.notify_all();
  for (auto& t : loaders_) {
    if (t.joinable()) t.join();
  }
  loaders_.clear();
  if (put_thread_.joinable()) put_thread_.join();
}

EngineStats BatchingEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void BatchingEngine::SubmitLoad(uint64_t id, Inflight& f, double now) {
  f.rec.load_start_s = now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    load_queue_.push_back({id, &f.req, &f.keys});
  }
  load_cv_.notify_one();
}

void BatchingEngine::LoaderLoop(size_t slot) {
  NameThread("kvp-eng-load");
  while (true) {
    LoadJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      load_cv_.wait(lock,
                    [&] { return workers_stop_ || !load_queue_.empty(); });
      if (load_queue_.empty()) return;
      job = load_queue_.front();
      load_queue_.pop_front();
    }
    PrefixLoad l = load_(*job.req, *job.keys, load_bufs_[slot].data());
    ModelHostToGpuCopy(model_->h2d_ms_per_block, &l);
    {
      std::lock_guard<std::mutex> lock(mu_);
      load_replies_.push_back({job.id, std::move(l)});
    }
    step_cv_.notify_one();
  }
}

void BatchingEngine::PutLoop() {
  NameThread("kvp-eng-put");
  while (true) {
    PutJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      put_cv_.wait(lock, [&] { return workers_stop_ || !put_queue_.empty(); });
      if (put_queue_.empty()) return;
      job = put_queue_.front();
      put_queue_.pop_front();
    }
    BlockStore s = StoreBlocks(*client_, *job.keys, *job.trace, job.from,
                               put_buf_.data(), config_.block_bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      put_replies_.emplace_back(job.id, s);
    }
    step_cv_.notify_one();
  }
}

void BatchingEngine::OnFirstToken(uint64_t id, Inflight& f, double at) {
  RequestRecord& rec = f.rec;
  rec.first_token_s = at;
  rec.ttft_ms = (at - rec.arrival_s) * 1e3;
  // Waiting ends when the GPU could first take the request: at admission,
  // or earlier if only its (arrival-started) load held it back.
  const double ready = std::max(rec.admit_s, rec.load_done_s);
  const double fit =
      rec.fit_s > 0 ? std::min(rec.fit_s, rec.admit_s) : rec.admit_s;
  rec.part_wait_ms = (fit - rec.arrival_s) * 1e3;
  rec.part_load_ms = (ready - fit) * 1e3;
  rec.part_prefill_ms = (at - ready) * 1e3;
  rec.queue_ms = rec.part_wait_ms;
  rec.prefill_ms = rec.part_prefill_ms;
  if (rec.read_ok < f.keys.size()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      put_queue_.push_back({id, f.req.trace, &f.keys, rec.read_ok});
    }
    put_cv_.notify_one();
  } else {
    f.put_done = true;
  }
}

void BatchingEngine::MaybeComplete(uint64_t id) {
  auto it = inflight_.find(id);
  if (it == inflight_.end()) return;
  Inflight& f = *it->second;
  if (!f.decode_done || !f.put_done) return;
  sched_.Release(id);
  RequestRecord rec = std::move(f.rec);
  inflight_.erase(it);
  done_(std::move(rec));
  {
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
  }
}

void BatchingEngine::StepLoop() {
  NameThread("kvp-eng-step");
  // The modelled steps are sub-millisecond here: the kernel's default 50 us
  // timer slack would be a large part of each.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const bool realtime = RunAsModelClock();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.realtime = realtime;
  }
  const bool at_arrival = config_.scheduler.load_start == LoadStart::kArrival;
  double gpu_free_at = 0;  // planned end of the last step
  bool chained = false;    // the last iteration ran a step
  while (true) {
    std::deque<EngineRequest> arrivals;
    std::vector<LoadReply> loads;
    std::vector<std::pair<uint64_t, BlockStore>> puts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      arrivals.swap(inbox_);
      loads.swap(load_replies_);
      puts.swap(put_replies_);
    }
    const double now = NowSec();
    for (EngineRequest& r : arrivals) {
      const uint64_t id = r.index;
      auto f = std::make_unique<Inflight>();
      f->keys = RequestKeys(*r.trace, config_.max_blocks);
      f->rec.index = r.index;
      f->rec.engine = config_.index;
      f->rec.arrival_s = r.arrival_s;
      f->rec.start_s = now;
      f->rec.route = r.route;
      f->rec.blocks = uint32_t(f->keys.size());
      f->req = std::move(r);
      Inflight& ref = *f;
      inflight_[id] = std::move(f);
      sched_.Arrive(id, ref.req.trace->input_length,
                    ref.req.trace->output_length);
      if (at_arrival) SubmitLoad(id, ref, now);
    }
    for (LoadReply& l : loads) {
      Inflight& f = *inflight_.at(l.id);
      RecordLoad(l.load, f.rec.route, &f.rec);
      f.rec.load_done_s = l.load.done_s;
      f.rec.load_total_ms = (l.load.done_s - f.rec.load_start_s) * 1e3;
      const uint64_t cached = std::min<uint64_t>(
          f.req.trace->input_length, uint64_t(l.load.read_ok) * 512);
      f.rec.prefill_tokens =
          std::max<uint64_t>(1, f.req.trace->input_length - cached);
      sched_.LoadDone(l.id, cached);
    }
    for (auto& [id, s] : puts) {
      Inflight& f = *inflight_.at(id);
      f.rec.put_ms = s.ms;
      f.rec.put_blocks = s.blocks;
      f.rec.put_failed = s.failed;
      f.put_done = true;
      MaybeComplete(id);
    }
    std::vector<uint64_t> load_blocked;
    for (uint64_t id : sched_.Admit(&load_blocked)) {
      Inflight& f = *inflight_.at(id);
      f.rec.admit_s = now;
      if (!at_arrival) SubmitLoad(id, f, now);
    }
    sched_loading_ = sched_.loading();
    sched_waiting_ = sched_.waiting() + sched_.loading();
    for (uint64_t id : load_blocked) {
      Inflight& f = *inflight_.at(id);
      if (f.rec.fit_s == 0) f.rec.fit_s = now;
    }

    StepPlan plan = sched_.PlanStep();
    if (plan.empty()) {
      chained = false;
      std::unique_lock<std::mutex> lock(mu_);
      step_cv_.wait(lock, [&] {
        return !inbox_.empty() || !load_replies_.empty() ||
               !put_replies_.empty() || (stopping_ && outstanding_ == 0);
      });
      if (stopping_ && outstanding_ == 0 && inbox_.empty()) return;
      continue;
    }
    double start = now;
    if (chained) {
      const double late = now - gpu_free_at;
      if (late <= kLagToleranceSec) {
        start = gpu_free_at;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.lagged_steps;
        stats_.lag_ms += late * 1e3;
        stats_.max_lag_ms = std::max(stats_.max_lag_ms, late * 1e3);
      }
    }
    const double end = start + model_->StepMs(plan.tokens) / 1e3;
    SleepUntilSec(end);
    busy_.Add(start, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.steps;
      stats_.step_tokens += plan.tokens;
    }
    gpu_free_at = end;
    chained = true;
    StepOutcome out = sched_.FinishStep(plan);
    for (uint64_t id : out.first_token) {
      OnFirstToken(id, *inflight_.at(id), end);
    }
    for (uint64_t id : out.finished) {
      Inflight& f = *inflight_.at(id);
      f.decode_done = true;
      f.rec.done_s = end;
      f.rec.decode_ms = (end - f.rec.first_token_s) * 1e3;
      MaybeComplete(id);
    }
  }
}

}  // namespace kvpool::replay
