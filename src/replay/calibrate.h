// Measures, on this machine and before any arm runs, what the engine model
// and the report are scaled by: the per-block read time of a batched get
// from DRAM and from SSD, and the promotion rate of one holder's single
// worker (the RFC's "single-worker ceiling").
#ifndef KVPOOL_REPLAY_CALIBRATE_H_
#define KVPOOL_REPLAY_CALIBRATE_H_

#include <cstdint>
#include <string>

#include "kvpool/local_cluster.h"
#include "replay/engine_model.h"
#include "replay/progress.h"
#include "replay/replay_cluster.h"

namespace kvpool::replay {

struct Calibration {
  MeasuredReads reads;
  double dram_batch_p50_ms = 0, ssd_batch_p50_ms = 0;
  // Blocks promoted per second by one holder, all triggered at once.
  double promotion_ceiling_per_s = 0;
  int ceiling_keys = 0;
  double ceiling_sec = 0;
  // Reads of the blocks once promoted: per block (median batch / batch),
  // batches that were all DRAM, and the bytes by path.
  double promoted_dram_ms = 0;
  int promoted_batches = 0;
  uint64_t promoted_shm_bytes = 0, promoted_tcp_bytes = 0;
  double sec = 0;  // how long calibrating took
};

struct CalibrationOptions {
  uint64_t block_bytes = 1 << 20;
  int batch = 16;    // blocks per timed BatchGetInto
  int samples = 40;  // timed batches per tier
  int ceiling_keys = 128;
};

// Runs on a fresh LocalCluster made from `cluster_options` (the arms'
// cluster) with the prefetch trigger on. Fails if no SSD-only block could be
// made or read.
Result<Calibration> Calibrate(LocalClusterOptions cluster_options,
                              const CalibrationOptions& options,
                              Progress* progress,
                              ClusterKind kind = ClusterKind::kInProcess,
                              const std::string& bin_dir = "",
                              const ExternalCluster& external = {});

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CALIBRATE_H_
