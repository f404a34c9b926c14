// The server processes of `kvpool bench soak`: one kvpool-master and N
// kvpool-node processes on 127.0.0.1, kernel-chosen ports, SSD tier and
// prefetch on. Each is started by fork+exec and stopped by its PID, also
// when the soak fails or is interrupted (the destructor), and dies with the
// bench if the bench itself dies (PR_SET_PDEATHSIG).
#ifndef KVPOOL_BENCH_SOAK_CLUSTER_H_
#define KVPOOL_BENCH_SOAK_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/soak_signals.h"
#include "kvpool/status.h"

namespace kvpool::soak {

struct ClusterOptions {
  std::string bin_dir;  // where kvpool-master and kvpool-node are
  std::string dir;      // scratch: logs, port file, one SSD dir per node
  int nodes = 2;
  uint64_t node_dram_bytes = 64ull << 20;
  uint64_t node_ssd_bytes = 1ull << 30;
  uint64_t ssd_segment_file_bytes = 64ull << 20;
  int64_t lease_ttl_ms = 1000;  // master default_kv_lease_ttl
};

struct ServerProcess {
  std::string name;  // "master", "node0", ...
  pid_t pid = -1;
  std::string log_path;  // its stdout and stderr
  std::string ssd_dir;   // nodes only
  bool exited = false;   // reaped
  int wait_status = 0;   // waitpid's status once exited
  // Exited on its own (crash, or an exit the bench did not ask for), as
  // opposed to after the bench's SIGTERM.
  bool unexpected_exit = false;
};

class SoakCluster {
 public:
  explicit SoakCluster(ClusterOptions opts);
  ~SoakCluster();  // Stop()
  SoakCluster(const SoakCluster&) = delete;
  SoakCluster& operator=(const SoakCluster&) = delete;

  // Starts the master, waits for its port file, then the nodes, waiting for
  // each one's start-up line on its stdout. Returns early (CANCELLED-like
  // INTERNAL_ERROR) if `signals` takes a signal meanwhile.
  Status Start(SignalWaiter& signals);
  const std::string& master_address() const { return master_address_; }
  const std::vector<ServerProcess>& servers() const { return servers_; }

  // Reaps servers that exited since the last call (a crash during the soak);
  // returns their names.
  std::vector<std::string> ReapExited();
  // SIGTERM to each running server, SIGKILL after 10 s; true if every server
  // was still running and exited with status 0 (a clean shutdown).
  bool Stop();
  // "exit 1", "killed by SIGSEGV", ...
  static std::string DescribeStatus(int wait_status);
  // The last `lines` lines of a server's log (for a crash report).
  static std::string LogTail(const ServerProcess& p, int lines);

 private:
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log);
  // Polls `done` every 20 ms for up to `seconds`, taking signals meanwhile.
  template <typename Pred>
  bool WaitUntil(SignalWaiter& signals, double seconds, Pred&& done);
  void RemoveShmOf(pid_t pid);

  ClusterOptions opts_;
  std::vector<ServerProcess> servers_;
  std::string master_address_;
  bool stopped_ = false;
};

}  // namespace kvpool::soak

#endif  // KVPOOL_BENCH_SOAK_CLUSTER_H_
