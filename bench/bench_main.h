// Entry points of `kvpool bench ...`. Each prints a table with the baseline
// measured in the same run, and optionally writes JSON.
#ifndef KVPOOL_BENCH_BENCH_MAIN_H_
#define KVPOOL_BENCH_BENCH_MAIN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvpool {

struct BenchOptions {
  std::string json_path;
  std::string svg_path;  // a chart of the same figures
  double seconds_per_case = 1.0;
  uint64_t objects = 1000000;
  // transfer: value sizes and batch sizes to run (all by default).
  std::vector<uint64_t> transfer_sizes = {64ull << 10, 1ull << 20, 4ull << 20};
  std::vector<int> transfer_batches = {1, 16};
  bool transfer_security = false;  // run RunSecurityCostBench instead
  // --security: rounds, each on freshly started clusters (what one cluster
  // instance happens to cost, it costs in one round only).
  int security_rounds = 10;
  // --security under callgrind: this many ops per (arm, case), each window
  // dumped on its own (scripts/callgrind_table.py); 0: time them instead.
  int security_instructions = 0;
  bool transfer_multi_buffer = false;  // run RunMultiBufferBench instead
  bool master_calls_only = false;  // master: only the per-call latency stage
  uint64_t pressure_dram_bytes = 256ull << 20;
  std::string dir;  // scratch directory for SSD files (default /tmp)

  // exist-prefetch and tier-latency: LocalClusters of 2 nodes with this
  // much DRAM each, small enough that filler makes the probed keys SSD-only.
  uint64_t node_dram_bytes = 32ull << 20;
  uint64_t value_bytes = 256ull << 10;  // exist-prefetch value size

  int exist_reps = 300;       // off/on(dedup) pairs, 128 keys each
  int exist_fresh_reps = 32;  // off/on(fresh) pairs, 128 new keys each
  int keys_per_cell = 16;     // fresh SSD-only keys per (gap, column)
  int tier_samples = 300;     // gets per tier-latency case
  int tier_keys = 32;         // SSD-only keys per value size

  // router-prefetch
  uint64_t router_block_bytes = 1ull << 20;
  int router_requests = 6;        // requests per (window, holder mode)
  int router_blocks = 4;          // SSD-only blocks per request
  int router_rate_keys = 256;     // blocks triggered at once for the rate
  bool router_rate_only = false;  // skip part (a)
  std::vector<std::string> router_rate_modes;  // empty: every mode
  int router_rate_rounds = 1;    // each round: every mode's cell, then its fio
  bool router_rate_puts = true;  // a client puts while promotions run
  std::string segment_dir = "/dev/shm";  // NodeConfig::segment_dir

  // restart
  std::vector<uint64_t> restart_objects = {10000, 100000, 1000000};
  uint64_t restart_value_bytes = 1024;
  int64_t restart_lease_ttl_ms = 1000;  // default_kv_lease_ttl
  // Master client_ttl (its default): a node re-registering its directory
  // sends no heartbeat meanwhile (~2.4 s for 500k objects here), so a 2 s
  // TTL declares it dead mid-way at 1M objects.
  int64_t restart_client_ttl_sec = 10;
  int restart_samples = 1000;                  // values read back byte-exact
  bool restart_baseline_largest_only = false;  // else the baseline for every N

  // failover (HA, kill -9 of the leader)
  std::vector<uint64_t> failover_objects = {100000, 1000000};
  uint64_t failover_value_bytes = 1024;
  int failover_runs = 1;                 // kills per N, each on a new cluster
  int failover_samples = 1000;           // values read back byte-exact
  int failover_ha_lease_ttl_sec = 1;     // masters' --ha_lease_ttl_sec
  int64_t failover_lease_ttl_ms = 1000;  // masters' --default_kv_lease_ttl
  // Masters' --client_ttl: a node re-registering its directory sends no
  // heartbeat meanwhile, so a short TTL declares it dead mid-way at large N.
  int64_t failover_client_ttl_sec = 10;
  double failover_timeout_sec = 300;  // per wait (put, directories, recovery)
  // Masters without --put_waits_for_holders (a put is then acknowledged
  // before its node's directory holds it).
  bool failover_no_put_waits = false;
  // No exist passes while the nodes re-register (a control).
  bool failover_no_recovery_sweep = false;

  // master-envelope
  std::vector<uint64_t> envelope_steps = {1000000, 10000000, 30000000};
  int envelope_nodes = 256;
  std::vector<int> envelope_threads = {1, 2, 4, 8};
  uint64_t envelope_put_window = 262144;  // timed puts at the end of a fill
};

int RunTransferBench(const BenchOptions& opts);
int RunMasterBench(const BenchOptions& opts);
int RunPressureBench(const BenchOptions& opts);
int RunExistPrefetchBench(const BenchOptions& opts);
int RunTierLatencyBench(const BenchOptions& opts);
int RunRouterPrefetchBench(const BenchOptions& opts);
int RunRestartBench(const BenchOptions& opts);
// failover: HA failover time (kill -9 of the leader) against N.
int RunFailoverBench(const BenchOptions& opts);
// transfer --security: the cost of authentication and capabilities.
int RunSecurityCostBench(const BenchOptions& opts);
int RunMultiBufferBench(const BenchOptions& opts);
// master-envelope: every master figure against the object count.
int RunMasterEnvelopeBench(const BenchOptions& opts);

}  // namespace kvpool

#endif  // KVPOOL_BENCH_BENCH_MAIN_H_
