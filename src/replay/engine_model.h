// The engine model's arithmetic: which hardware it stands for, and how the
// prefill and decode times of that hardware are carried over to this machine.
//
// Blocks in a replay are scaled down (1 MiB stands for the ~64 MiB of a real
// 512-token block of an 8B model), so the KV reads measured here are far
// faster than the real ones, while a prefill time taken from a GPU spec sheet
// would not shrink with them and would drown the difference between a DRAM
// and an SSD read. So the model keeps proportions instead of absolute times:
// all modelled times are multiplied by one factor `scale`, chosen from the
// SSD and DRAM read times measured on this machine at the start of the run,
// so that recompute : SSD read : DRAM read stay what they are on the
// modelled hardware (3 : 1 : 0.2 for the default).
#ifndef KVPOOL_REPLAY_ENGINE_MODEL_H_
#define KVPOOL_REPLAY_ENGINE_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "replay/trace.h"

namespace kvpool::replay {

// Times on the modelled hardware, per 512-token block unless stated.
struct HardwareModel {
  std::string name =
      "Llama-3-8B (bf16, GQA 8 KV heads) on one A100-80GB (PCIe Gen4 x16) "
      "with a local NVMe SSD";
  // KV of one block: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes
  // x 512 tokens.
  double block_mib = 64;
  double ssd_read_ms = 16.0;  // 64 MiB at ~4 GB/s (one NVMe drive)
  double dram_read_ms = 3.2;  // 64 MiB at ~20 GB/s (host to GPU, PCIe 4)
  // Prefill at ~10.7k tokens/s (~50% MFU of 312 TFLOPS at 16 GFLOP/token):
  // 48 ms per block = 3 x the SSD read, 15 x the DRAM read.
  double prefill_fixed_ms = 20.0;  // per forward pass (launch, sampling)
  double prefill_ms_per_token = 48.0 / 512;
  // Batch-1 decode: 16 GB of weights read from HBM at ~2 TB/s.
  double decode_ms_per_token = 8.0;
  // Continuous batching (--engine=batching): one forward step over T tokens
  // takes step_fixed_ms + step_ms_per_token x T. The fixed part is the read
  // of the weights that every pass makes (16 GB from HBM at ~2 TB/s); the
  // per-token part is the prefill compute rate above (~10.7k tokens/s), so a
  // lone decode step costs 8.1 ms and a 2048-token chunk 200 ms.
  double step_fixed_ms = 8.0;
  double step_ms_per_token = 48.0 / 512;

  double prefill_block_ms() const { return prefill_ms_per_token * 512; }
};

// Per-block read times measured on this machine (ms).
struct MeasuredReads {
  double ssd_ms = 0;
  double dram_ms = 0;
  int batch = 0;    // blocks per BatchGetInto of the measurement
  int samples = 0;  // batches timed per tier
};

// Explicit values (machine ms) replace the derived ones; < 0 = derive.
struct EngineModelOverrides {
  double prefill_fixed_ms = -1;
  double prefill_ms_per_token = -1;
  double decode_ms_per_token = -1;
  double step_fixed_ms = -1;
  double step_ms_per_token = -1;
};

struct EngineModel {
  HardwareModel hw;
  MeasuredReads measured;
  // Machine ms per modelled ms: the geometric mean of measured/modelled for
  // the SSD and the DRAM read, so neither proportion is favoured when this
  // machine's SSD:DRAM ratio differs from the modelled one.
  double scale = 1;
  double prefill_fixed_ms = 0;      // a (machine ms)
  double prefill_ms_per_token = 0;  // b (machine ms)
  double decode_ms_per_token = 0;
  double step_fixed_ms = 0;  // batching engine (machine ms)
  double step_ms_per_token = 0;
  std::string step_source = "derived";     // or "override"
  std::string prefill_source = "derived";  // or "override"
  std::string decode_source = "derived";   // "derived", "auto" or "override"
  // With a capped disk (CappedTiming): the per-block times the run has, the
  // SSD read at the cap and the host-to-GPU copy the loaders wait out; 0 =
  // not modelled (an uncapped run reads at whatever the disk gives).
  double ssd_ms_per_block = 0;
  double h2d_ms_per_block = 0;
  std::string scale_source = "measured reads";  // or "disk cap", "step floor"

  // prefill_ms = a + b x tokens: the forward pass that yields the first token
  // runs even when every block was found, so a is paid at 0 tokens too.
  double PrefillMs(uint64_t tokens) const {
    return prefill_fixed_ms + prefill_ms_per_token * double(tokens);
  }
  double DecodeMs(uint64_t output_tokens) const {
    return decode_ms_per_token * double(output_tokens);
  }
  double PrefillBlockMs() const { return prefill_ms_per_token * 512; }
  // One forward step of the batching engine over `tokens` tokens.
  double StepMs(uint64_t tokens) const {
    return step_fixed_ms + step_ms_per_token * double(tokens);
  }
  // The proportions the run actually has (modelled: 3 and 15).
  double SsdMs() const {
    return ssd_ms_per_block > 0 ? ssd_ms_per_block : measured.ssd_ms;
  }
  double DramMs() const { return std::max(measured.dram_ms, h2d_ms_per_block); }
  double RecomputeOverSsd() const {
    return SsdMs() > 0 ? PrefillBlockMs() / SsdMs() : 0;
  }
  double RecomputeOverDram() const {
    return DramMs() > 0 ? PrefillBlockMs() / DramMs() : 0;
  }
};

// Derives the machine-time model. Measured times must be > 0.
EngineModel DeriveEngineModel(const HardwareModel& hw,
                              const MeasuredReads& measured,
                              const EngineModelOverrides& overrides = {});

// Timing a 2-core machine can keep. Derived from measured reads, the scale
// is ~0.03 here: a modelled 8 ms step lasts 0.25 ms, which a thread sharing
// two cores with the whole store cannot start on time, and the SSD read it
// is scaled by drifts with the shared disk. Instead the disk is capped
// (disk_cap.h) and the scale follows from the cap: an SSD read of a block
// takes what the cap gives it, block / rate, and that stands for the
// modelled hw.ssd_read_ms. The scale is raised further until the shortest
// step (hw.step_fixed_ms x scale) lasts `min_step_ms`, and the cap lowered
// to match, so the modelled proportions hold at any block size. This
// machine's memory copies far faster than the modelled PCIe link, so the
// host-to-GPU copy of every loaded block is modelled (hw.dram_read_ms x
// scale) rather than left at a memcpy.
struct CappedTiming {
  double scale = 0;
  uint64_t disk_bytes_per_s = 0;  // the cap to apply (<= the one allowed)
  double ssd_ms_per_block = 0;    // machine ms, at that cap
  double h2d_ms_per_block = 0;    // machine ms
  bool step_floor_binds = false;  // min_step_ms, not the cap, set the scale
};
// `max_bytes_per_s` is the highest cap allowed (below the disk's slowest);
// block_bytes > 0, min_step_ms >= 0.
CappedTiming ChooseCappedTiming(const HardwareModel& hw, uint64_t block_bytes,
                                uint64_t max_bytes_per_s, double min_step_ms);
// The model of a capped run: every modelled time x timing.scale.
EngineModel DeriveCappedEngineModel(const HardwareModel& hw,
                                    const MeasuredReads& measured,
                                    const CappedTiming& timing,
                                    const EngineModelOverrides& overrides = {});

// What the engines are asked to do over a slice of the trace, in machine
// time, for choosing a decode time at which queues form.
struct LoadEstimate {
  double arrival_rate_per_s = 0;  // after time scaling
  double mean_service_ms = 0;     // lookup-free load + prefill, no decode
  double mean_output_tokens = 0;
};

// Prefix hits are taken from the trace itself (an unbounded cache: every
// block seen before, from the start of the trace) and read at the mean of
// the SSD and DRAM read times: a rough figure, used only to pick a default.
LoadEstimate EstimateLoad(const std::vector<TraceRequest>& trace, size_t begin,
                          size_t end, double time_scale,
                          const EngineModel& model);

// The decode time per token at which `engines` FIFO engines run at
// `utilisation` (0..1) under `load`: rho = rate x (service + out x d) / N.
// 0 when the load alone already exceeds it (the replay is then overloaded).
double DecodeMsPerTokenFor(double utilisation, int engines,
                           const LoadEstimate& load);

// A duration of the modelled world in machine ms: `modelled_ms` x `scale`,
// at least 1. For the knobs that stand for the modelled engine's timing,
// such as the router's deadline floor (how soon an engine with nothing
// waiting reads): the replay's engine runs `scale` times faster than the
// hardware it models, and so must what the router believes of it.
int64_t ScaledMs(int64_t modelled_ms, double scale);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_ENGINE_MODEL_H_
