#include "replay/batch_scheduler.h"

#include <algorithm>
#include <cassert>

namespace kvpool::replay {

bool ParseLoadStart(const std::string& s, LoadStart* out) {
  if (s == "admission") {
    *out = LoadStart::kAdmission;
  } else if (s == "arrival") {
    *out = LoadStart::kArrival;
  } else {
    return false;
  }
  return true;
}

const char* LoadStartName(LoadStart l) {
  return l == LoadStart::kArrival ? "arrival" : "admission";
}

BatchScheduler::BatchScheduler(SchedulerConfig config) : config_(config) {}

void BatchScheduler::Arrive(uint64_t id, uint64_t prompt_tokens,
                            uint64_t output_tokens) {
  Req r;
  r.prompt = prompt_tokens;
  r.output = std::max<uint64_t>(1, output_tokens);
  reqs_[id] = r;
  waiting_.push_back(id);
}

void BatchScheduler::LoadDone(uint64_t id, uint64_t cached_tokens) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Req& r = it->second;
  r.load_done = true;
  const uint64_t cached = std::min(cached_tokens, r.prompt);
  r.prefill_left = std::max<uint64_t>(1, r.prompt - cached);
  if (r.phase == Phase::kLoading) {
    r.phase = Phase::kPrefill;
    --loading_;
  }
}

std::vector<uint64_t> BatchScheduler::Admit(
    std::vector<uint64_t>* load_blocked) {
  std::vector<uint64_t> out;
  // GPU memory as if every skipped request ahead had been admitted: whether
  // a skipped request was held back by its load alone.
  uint64_t would_use = kv_used_;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (admitted_.size() >= config_.max_num_seqs) break;
    Req& r = reqs_[*it];
    const uint64_t need = r.prompt + r.output;
    if (config_.load_start == LoadStart::kArrival && !r.load_done) {
      if (would_use + need <= config_.gpu_kv_tokens) {
        would_use += need;
        if (load_blocked) load_blocked->push_back(*it);
      }
      ++it;  // prefetch in progress: skipped, the next may go
      continue;
    }
    if (kv_used_ + need > config_.gpu_kv_tokens) break;  // FCFS: no jumping
    would_use += need;
    kv_used_ += need;
    r.phase = r.load_done ? Phase::kPrefill : Phase::kLoading;
    if (!r.load_done) ++loading_;
    admitted_.push_back(*it);
    out.push_back(*it);
    it = waiting_.erase(it);
  }
  return out;
}

StepPlan BatchScheduler::PlanStep() const {
  StepPlan p;
  uint64_t budget = config_.max_num_batched_tokens;
  for (uint64_t id : admitted_) {
    if (budget == 0) break;
    if (reqs_.at(id).phase == Phase::kDecode) {
      p.decode.push_back(id);
      --budget;
    }
  }
  for (uint64_t id : admitted_) {
    if (budget == 0) break;
    const Req& r = reqs_.at(id);
    if (r.phase != Phase::kPrefill) continue;
    const uint64_t n = std::min(budget, r.prefill_left);
    p.prefill.emplace_back(id, n);
    budget -= n;
  }
  p.tokens = config_.max_num_batched_tokens - budget;
  return p;
}

StepOutcome BatchScheduler::FinishStep(const StepPlan& plan) {
  StepOutcome o;
  for (uint64_t id : plan.decode) {
    Req& r = reqs_.at(id);
    assert(r.phase == Phase::kDecode && r.decode_left > 0);
    if (--r.decode_left == 0) {
      r.phase = Phase::kFinished;
      o.finished.push_back(id);
    }
  }
  for (const auto& [id, n] : plan.prefill) {
    Req& r = reqs_.at(id);
    assert(r.phase == Phase::kPrefill && r.prefill_left >= n);
    r.prefill_left -= n;
    if (r.prefill_left > 0) continue;
    o.first_token.push_back(id);
    r.decode_left = r.output - 1;
    if (r.decode_left == 0) {
      r.phase = Phase::kFinished;
      o.finished.push_back(id);
    } else {
      r.phase = Phase::kDecode;
    }
  }
  return o;
}

void BatchScheduler::Release(uint64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  auto a = std::find(admitted_.begin(), admitted_.end(), id);
  if (a != admitted_.end()) {
    admitted_.erase(a);
    kv_used_ -= it->second.prompt + it->second.output;
    if (it->second.phase == Phase::kLoading) --loading_;
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), id);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  reqs_.erase(it);
}

}  // namespace kvpool::replay
