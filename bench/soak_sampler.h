// What `kvpool bench soak` samples every few seconds: a process's resident
// memory, open file descriptors and threads from /proc, the bytes a
// directory tree occupies on disk, and per-interval call latencies.
#ifndef KVPOOL_BENCH_SOAK_SAMPLER_H_
#define KVPOOL_BENCH_SOAK_SAMPLER_H_

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kvpool::soak {

struct ProcSample {
  bool alive = false;  // /proc/PID/status could be read
  uint64_t rss_bytes = 0;
  int fds = 0;
  int threads = 0;
};

// Reads /proc/PID/status (VmRSS, Threads) and counts /proc/PID/fd.
ProcSample SampleProcess(pid_t pid);

// Bytes allocated on disk (st_blocks) by the regular files under `dir`:
// what the SSD tier really occupies, which the apparent size of
// preallocated or sparse log files would misstate.
uint64_t DiskBytes(const std::string& dir);

// Latencies of one kind of call, collected from many threads and taken out
// once per sampling interval.
class LatencyLog {
 public:
  void Add(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    lat_.push_back(seconds);
  }
  // The interval's latencies; the log starts the next interval empty.
  std::vector<double> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<double> out;
    out.swap(lat_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<double> lat_;
};

}  // namespace kvpool::soak

#endif  // KVPOOL_BENCH_SOAK_SAMPLER_H_
