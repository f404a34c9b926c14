// Entry point of `kvpool bench ssd`: O_DIRECT reads of large objects from
// the SSD tier (FileStorage) at several queue depths, beside fio's io_uring
// engine reading a file in the same directory in the same run.
#ifndef KVPOOL_BENCH_SSD_BENCH_H_
#define KVPOOL_BENCH_SSD_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/status.h"

namespace kvpool {

struct SsdBenchOptions {
  // On the device under test. One store per object size is made in a
  // subdirectory and removed afterwards; fio reads that store's files.
  std::string dir = "/tmp/kvpool-ssd-bench";
  std::string json_path;                // empty = no JSON
  double seconds_per_case = 2.0;        // per case, for FileStorage and for fio
  uint64_t dataset_bytes = 1ull << 30;  // stored per object size
  std::vector<uint64_t> object_sizes = {1ull << 20, 4ull << 20};
  std::vector<int> depths = {1, 8, 32};  // objects in flight per batch
  // Each case alternates FileStorage and fio this many times and reports
  // the median run of each: shared and virtual disks drift between runs.
  int rounds = 3;
  std::string io_backend = "auto";  // auto | io_uring | pread
  // Both sides read into memory advised MADV_HUGEPAGE: FileStorage's
  // destinations, and fio's buffers (glibc.malloc.hugetlb=1 in its
  // environment). False: both read into 4 KiB pages, whose physical
  // contiguity (and so the number of requests a virtio disk needs per value)
  // is luck. Either way the two sides read into the same kind of memory.
  bool huge_page_dest = true;
  std::string fio_path = "fio";
  bool keep_files = false;
};

// Prints a table (case, FileStorage MB/s, fio MB/s, ratio, p50/p99) and
// progress (each round's MB/s) on stderr; returns 0, or 1 if a read failed or
// returned wrong bytes, or fio could not be run.
int RunSsdBench(const SsdBenchOptions& opts);

// fio's io_uring random reads over `files` (read-only, O_DIRECT) at `block`
// bytes and `depth`, for `seconds`: the baseline of benches that read the
// same files another way in the same run.
struct FioRandRead {
  double mbps = 0;
  double mean_read_ms = 0;  // submission to completion (fio's lat_ns mean)
};
Result<FioRandRead> RunFioRandRead(const std::string& fio_path,
                                   const std::vector<std::string>& files,
                                   uint64_t block, int depth, double seconds,
                                   const std::string& scratch_dir);

}  // namespace kvpool

#endif  // KVPOOL_BENCH_SSD_BENCH_H_
