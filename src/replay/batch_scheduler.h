// The continuous-batching scheduler of one simulated engine, as arithmetic
// only: no clock, no threads, no store. The real-time engine
// (batching_engine.h) and the virtual-time simulation (batch_sim.h) drive the
// same object, so what the tests check of one holds for the other.
//
// The rules follow vLLM's V1 scheduler (and SGLang's, which agrees on them):
//  - Every step carries one decode token of each running request that has
//    produced its first token, then prefill chunks of admitted requests whose
//    KV load is done, in admission order, up to `max_num_batched_tokens`.
//    Decodes come first, so a decode is never starved by a long prefill.
//  - Admission from the waiting queue is FCFS and bounded by the modelled GPU
//    KV memory: a request is admitted only when its prompt and output tokens
//    fit in what the admitted requests leave of `gpu_kv_tokens` (the whole
//    need is reserved at admission, so there is no preemption), and only while
//    fewer than `max_num_seqs` requests hold GPU KV memory.
//  - Asynchronous KV load: with `kAdmission` (vLLM's KV connector) the load
//    starts when the request is admitted; with `kArrival` (SGLang HiCache's L3
//    prefetch) it starts when the request enters the waiting queue, and a
//    request whose load is still running is skipped by admission, as SGLang
//    skips a request whose prefetch is in progress (those behind it may go
//    first). Either way the request joins prefill only when its load is done,
//    and the other requests keep stepping meanwhile.
//  - Prefill covers the tokens the load did not bring, at least one: the last
//    prompt token is always computed, since it yields the first output token.
//  - The step that finishes a prefill produces the first of the request's
//    `output_tokens`; each later step produces one more. A finished request
//    keeps its GPU KV memory until Release() (the engine releases it when its
//    stores of computed blocks are done, as vLLM's connector holds blocks until
//    they are saved).
#ifndef KVPOOL_REPLAY_BATCH_SCHEDULER_H_
#define KVPOOL_REPLAY_BATCH_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvpool::replay {

enum class LoadStart { kAdmission, kArrival };
// "admission" / "arrival"; false if `s` is neither.
bool ParseLoadStart(const std::string& s, LoadStart* out);
const char* LoadStartName(LoadStart l);

struct SchedulerConfig {
  // vLLM's defaults for its OpenAI server on an A100 (EngineArgs batch
  // defaults: 2048 tokens, 256 sequences).
  uint64_t max_num_batched_tokens = 2048;
  uint64_t max_num_seqs = 256;
  // Tokens of KV the modelled GPU holds: 80 GiB x 0.9 (vLLM's
  // gpu_memory_utilization) - 15 GiB of Llama-3-8B bf16 weights, at 128 KiB
  // of KV per token (32 layers x 8 KV heads x 128 dims x K,V x 2 bytes).
  uint64_t gpu_kv_tokens = 466944;
  LoadStart load_start = LoadStart::kAdmission;
};

// One forward step: what it computes.
struct StepPlan {
  std::vector<uint64_t> decode;                        // ids, one token each
  std::vector<std::pair<uint64_t, uint64_t>> prefill;  // (id, tokens)
  uint64_t tokens = 0;
  bool empty() const { return tokens == 0; }
};

// What a finished step produced.
struct StepOutcome {
  std::vector<uint64_t> first_token;  // prefill completed in this step
  std::vector<uint64_t> finished;     // produced their last output token
};

class BatchScheduler {
 public:
  explicit BatchScheduler(SchedulerConfig config);

  // A request enters the waiting queue. Its id must be new. With kArrival
  // the caller starts its load now and reports it with LoadDone().
  void Arrive(uint64_t id, uint64_t prompt_tokens, uint64_t output_tokens);
  // The request's KV load finished; `cached_tokens` need no prefill. With
  // kAdmission this must follow Admit() of the request.
  void LoadDone(uint64_t id, uint64_t cached_tokens);
  // Admits what the rules allow now, in order; with kAdmission the caller
  // starts the loads of the returned ids. `load_blocked` (optional) gets the
  // kArrival requests that were skipped only because their load was still
  // running: the GPU had room for them (what the TTFT breakdown charges to
  // the KV load rather than to waiting).
  std::vector<uint64_t> Admit(std::vector<uint64_t>* load_blocked = nullptr);
  // The next step (empty when nothing can run). Does not change the state.
  StepPlan PlanStep() const;
  // Applies `plan` (the last PlanStep(), unchanged since) at its end.
  StepOutcome FinishStep(const StepPlan& plan);
  // Frees a finished request's GPU KV memory and forgets it.
  void Release(uint64_t id);

  // True if a request of these tokens could never be admitted (it alone
  // exceeds the GPU's KV memory): callers refuse such requests up front.
  bool TooLarge(uint64_t prompt_tokens, uint64_t output_tokens) const {
    return prompt_tokens + output_tokens > config_.gpu_kv_tokens;
  }

  size_t waiting() const { return waiting_.size(); }
  // Admitted (holding GPU KV memory) with their KV load still running: what
  // vLLM keeps in its waiting queue as WAITING_FOR_REMOTE_KVS. Always 0 with
  // kArrival, whose loads end before admission.
  size_t loading() const { return loading_; }
  size_t admitted() const { return admitted_.size(); }  // holding GPU KV
  size_t known() const { return reqs_.size(); }         // not yet released
  uint64_t kv_tokens_used() const { return kv_used_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  enum class Phase { kWaiting, kLoading, kPrefill, kDecode, kFinished };
  struct Req {
    uint64_t prompt = 0, output = 0;
    bool load_done = false;
    uint64_t prefill_left = 0;
    uint64_t decode_left = 0;  // output tokens still to produce after first
    Phase phase = Phase::kWaiting;
  };

  SchedulerConfig config_;
  std::unordered_map<uint64_t, Req> reqs_;
  std::deque<uint64_t> waiting_;    // arrival order
  std::vector<uint64_t> admitted_;  // admission order, until released
  uint64_t kv_used_ = 0;
  size_t loading_ = 0;  // admitted requests in kLoading
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_BATCH_SCHEDULER_H_
