// A throwaway one-member etcd for tests: its own data directory and free
// loopback ports, fast timings (50 ms heartbeats, 500 ms elections, so
// leases of 1 s are granted as asked), stopped by PID by its owner.
#ifndef KVPOOL_HA_ETCD_TEST_PROCESS_H_
#define KVPOOL_HA_ETCD_TEST_PROCESS_H_

#include <filesystem>
#include <string>

#include "ha/etcd_client.h"
#include "tests/process_util.h"

namespace kvpool::testing {

class EtcdProcess {
 public:
  // Starts etcd under `dir` and waits until it answers; endpoint() empty
  // if it did not within 20 s (or /usr/bin/etcd is missing).
  explicit EtcdProcess(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    const int client = FreeLoopbackPort();
    const int peer = FreeLoopbackPort();
    const std::string c = "http://127.0.0.1:" + std::to_string(client);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer);
    pid_ = Spawn({"/usr/bin/etcd",
                  "--name",
                  "t",
                  "--data-dir",
                  (dir / "data").string(),
                  "--listen-client-urls",
                  c,
                  "--advertise-client-urls",
                  c,
                  "--listen-peer-urls",
                  p,
                  "--initial-advertise-peer-urls",
                  p,
                  "--initial-cluster",
                  "t=" + p,
                  "--heartbeat-interval",
                  "50",
                  "--election-timeout",
                  "500",
                  "--log-level",
                  "warn"},
                 (dir / "etcd.log").string());
    const std::string ep = "127.0.0.1:" + std::to_string(client);
    ha::EtcdClient probe({ep}, 500);
    if (WaitUntil([&] { return probe.Get("/probe").ok(); },
                  std::chrono::seconds(20))) {
      endpoint_ = ep;
    }
  }
  ~EtcdProcess() { StopProcess(pid_); }
  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
};

}  // namespace kvpool::testing

#endif  // KVPOOL_HA_ETCD_TEST_PROCESS_H_
