// Entry point of `kvpool bench soak`: a master and two nodes as processes
// (SSD tier and prefetch on), a mixed load at saturation from K clients
// that checks every value read against what was written, and a sampler of
// RSS, fds, threads, SSD bytes and latency every few seconds (docs/soak.md).
#ifndef KVPOOL_BENCH_SOAK_BENCH_H_
#define KVPOOL_BENCH_SOAK_BENCH_H_

#include <cstdint>
#include <string>

namespace kvpool {

struct SoakOptions {
  double minutes = 10;
  int clients = 3;
  double sample_seconds = 5;
  // Scratch directory: the run makes kvpool-soak-PID inside it (SSD files,
  // logs) and removes that at the end. Empty: the system temp directory.
  std::string dir;
  std::string json_path;   // empty = no JSON
  std::string svg_prefix;  // PREFIX_rss.svg and PREFIX_p99.svg
  int keys_per_client = 160;
  uint64_t node_dram_bytes = 64ull << 20;
  uint64_t node_ssd_bytes = 1ull << 30;
  bool keep_dir = false;  // leave the scratch directory (logs) behind
};

// Returns 0, or 1 on a wrong read, a server that failed to start, crashed
// or did not shut down cleanly, a load that made no progress, or an
// interrupt. Memory growth is reported, not failed.
int RunSoakBench(const SoakOptions& opts);

}  // namespace kvpool

#endif  // KVPOOL_BENCH_SOAK_BENCH_H_
