// Entry points of `kvpool bench ...`. Each prints a table with the baseline
// measured in the same run, and optionally writes JSON.
#ifndef KVPOOL_BENCH_BENCH_MAIN_H_
#define KVPOOL_BENCH_BENCH_MAIN_H_

#include <cstdint>
#include <string>

namespace kvpool {

struct BenchOptions {
  std::string json_path;
  std::string svg_path;  // a chart of the same figures
  double seconds_per_case = 1.0;
  uint64_t objects = 1000000;
  uint64_t pressure_dram_bytes = 256ull << 20;
  std::string dir;  // scratch directory for SSD files (default /tmp)
};

int RunTransferBench(const BenchOptions& opts);
int RunMasterBench(const BenchOptions& opts);
int RunPressureBench(const BenchOptions& opts);

}  // namespace kvpool

#endif  // KVPOOL_BENCH_BENCH_MAIN_H_
