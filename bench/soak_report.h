// The report of `kvpool bench soak`: one sample per interval, the progress
// line, the final table, the growth verdict, JSON and the two SVG charts.
#ifndef KVPOOL_BENCH_SOAK_REPORT_H_
#define KVPOOL_BENCH_SOAK_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/soak_sampler.h"

namespace kvpool::soak {

struct Sample {
  double t_sec = 0;               // since the load started
  std::vector<ProcSample> procs;  // same order as Report::proc_names
  uint64_t ssd_bytes = 0;         // on disk under the scratch directory
  double ops_per_sec = 0;         // calls of every kind
  double put_per_sec = 0, get_per_sec = 0;
  double put_p50_ms = 0, put_p99_ms = 0;
  double get_p50_ms = 0, get_p99_ms = 0;
  double write_mb_per_sec = 0, read_mb_per_sec = 0;
  uint64_t wrong_reads = 0;  // so far
};

// Mean RSS of the middle and the last third of the samples, per process.
struct Growth {
  std::string name;
  double first_mib = 0, middle_mib = 0, last_mib = 0;
  double change = 0;    // last / middle - 1
  std::string verdict;  // "flat", "growing" or "shrinking"
  int fds_first = 0, fds_last = 0, threads_first = 0, threads_last = 0;
};

struct Report {
  std::vector<std::string> proc_names;  // master, node0, node1, bench
  size_t num_servers = 0;               // the first ones are the servers
  std::vector<Sample> samples;
  double growth_tolerance = 0.05;

  // Filled by the driver at the end.
  std::map<std::string, uint64_t> calls;   // per op
  std::map<std::string, uint64_t> errors;  // "op:CODE" -> count
  uint64_t hits = 0, misses = 0, wrong_reads = 0;
  uint64_t objects = 0, evictions = 0;  // master Stat() at the end
  std::vector<std::string> failures;    // crash, start, shutdown, ...
  double seconds = 0;
  int clients = 0;

  std::string ProgressLine(const Sample& s, double total_sec) const;
  void PrintTable() const;
  // Per process; empty with fewer than 3 samples.
  std::vector<Growth> ComputeGrowth() const;
  // Prints the VERDICT lines; returns the memory verdict ("flat",
  // "growing", "shrinking" or "too few samples").
  std::string PrintVerdict() const;
  bool WriteJson(const std::string& path) const;
  bool WriteSvgs(const std::string& prefix) const;
};

}  // namespace kvpool::soak

#endif  // KVPOOL_BENCH_SOAK_REPORT_H_
