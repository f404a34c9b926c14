#include "bench/soak_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "benchutil/bench_util.h"
#include "common/size_parse.h"

namespace kvpool::soak {

namespace fs = std::filesystem;

SoakCluster::SoakCluster(ClusterOptions opts) : opts_(std::move(opts)) {}

SoakCluster::~SoakCluster() { Stop(); }

pid_t SoakCluster::Spawn(const std::vector<std::string>& args,
                         const std::string& log) {
  // Everything the child needs is prepared before fork: between fork and
  // exec a multi-threaded parent's child may only make async-signal-safe
  // calls.
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  sigset_t none;
  sigemptyset(&none);
  const pid_t pid = fork();
  if (pid != 0) return pid;  // the parent, or -1
  // Its own process group: a Ctrl-C in the terminal reaches the bench only,
  // which then stops the servers in order (the load first).
  setpgid(0, 0);
  // The bench blocks SIGINT/SIGTERM to take them synchronously; the mask
  // survives exec, so unblock them for the server.
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // If the bench dies without stopping us (SIGKILL, a crash), so do we.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(127);  // it died before prctl
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    close(null_fd);
  }
  execv(argv[0], argv.data());
  _exit(127);
}

template <typename Pred>
bool SoakCluster::WaitUntil(SignalWaiter& signals, double seconds,
                            Pred&& done) {
  const double deadline = bench::NowSec() + seconds;
  while (bench::NowSec() < deadline) {
    if (done()) return true;
    // A server that died during start-up will never get ready.
    if (!ReapExited().empty()) return false;
    if (!signals.Wait(0.02)) return false;
  }
  return done();
}

Status SoakCluster::Start(SignalWaiter& signals) {
  std::error_code ec;
  fs::create_directories(opts_.dir, ec);
  if (ec)
    return Status(ErrorCode::FILE_WRITE_FAIL, opts_.dir + ": " + ec.message());
  const std::string master_bin = opts_.bin_dir + "/kvpool-master";
  const std::string node_bin = opts_.bin_dir + "/kvpool-node";
  for (const auto& bin : {master_bin, node_bin}) {
    if (access(bin.c_str(), X_OK) != 0)
      return Status(ErrorCode::FILE_NOT_FOUND, bin + " (build it first)");
  }

  const std::string port_file = opts_.dir + "/master.port";
  fs::remove(port_file, ec);
  ServerProcess master;
  master.name = "master";
  master.log_path = opts_.dir + "/master.log";
  // Offload at eviction and promote-on-hit, so values travel DRAM -> SSD ->
  // DRAM all the time; the router trigger so BatchPrefetchToMemory is
  // served. Short leases: with the default 10 s every value read in the
  // last 10 s would be unevictable, and a small pool at saturation would
  // refuse most puts.
  master.pid = Spawn(
      {master_bin, "--rpc_address=127.0.0.1", "--rpc_port=0",
       "--metrics_port=-1", "--port_file=" + port_file, "--enable_offload",
       "--offload_on_evict", "--promotion_on_hit", "--enable_prefetch_trigger",
       "--default_kv_lease_ttl=" + std::to_string(opts_.lease_ttl_ms),
       "--prefetch_trigger_lease_ttl_ms=" +
           std::to_string(2 * opts_.lease_ttl_ms)},
      master.log_path);
  if (master.pid < 0)
    return Status(ErrorCode::INTERNAL_ERROR,
                  std::string("fork: ") + std::strerror(errno));
  servers_.push_back(master);
  if (!WaitUntil(signals, 30, [&] { return fs::exists(port_file); })) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  signals.interrupted() ? "interrupted"
                                        : "master wrote no port file:\n" +
                                              LogTail(servers_[0], 20));
  }
  int port = 0;
  std::ifstream(port_file) >> port;
  if (port <= 0)
    return Status(ErrorCode::INTERNAL_ERROR, "bad port file " + port_file);
  master_address_ = "127.0.0.1:" + std::to_string(port);

  for (int i = 0; i < opts_.nodes; ++i) {
    ServerProcess node;
    node.name = "node" + std::to_string(i);
    node.log_path = opts_.dir + "/" + node.name + ".log";
    node.ssd_dir = opts_.dir + "/" + node.name + "-ssd";
    fs::create_directories(node.ssd_dir, ec);
    // A short heartbeat: promotions ride it (one per heartbeat), and a
    // soak should move values between tiers often.
    node.pid = Spawn(
        {node_bin, "--master_server_address=" + master_address_,
         "--node_id=soak-" + node.name, "--local_hostname=127.0.0.1",
         "--data_bind_address=127.0.0.1", "--data_port=0", "--metrics_port=-1",
         "--global_segment_size=" + std::to_string(opts_.node_dram_bytes),
         "--heartbeat_interval_ms=200", "--enable_ssd_offload",
         "--ssd_offload_path=" + node.ssd_dir,
         "--ssd_capacity_bytes=" + std::to_string(opts_.node_ssd_bytes),
         "--ssd_segment_file_size=" +
             std::to_string(opts_.ssd_segment_file_bytes)},
        node.log_path);
    if (node.pid < 0)
      return Status(ErrorCode::INTERNAL_ERROR,
                    std::string("fork: ") + std::strerror(errno));
    servers_.push_back(node);
  }
  // Each node prints "kvpool-node ID data_endpoint=HOST:PORT ..." once it
  // is registered with the master and serving.
  for (size_t i = 1; i < servers_.size(); ++i) {
    const ServerProcess& node = servers_[i];
    auto ready = [&] {
      std::ifstream in(node.log_path);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("kvpool-node ", 0) == 0 &&
            line.find("data_endpoint=") != std::string::npos)
          return true;
      }
      return false;
    };
    if (!WaitUntil(signals, 30, ready)) {
      return Status(ErrorCode::INTERNAL_ERROR,
                    signals.interrupted()
                        ? "interrupted"
                        : node.name + " did not start:\n" + LogTail(node, 20));
    }
  }
  return Status::OK();
}

std::vector<std::string> SoakCluster::ReapExited() {
  std::vector<std::string> out;
  for (auto& s : servers_) {
    if (s.exited || s.pid <= 0) continue;
    int status = 0;
    if (waitpid(s.pid, &status, WNOHANG) == s.pid) {
      s.exited = true;
      s.wait_status = status;
      s.unexpected_exit = !stopped_;
      RemoveShmOf(s.pid);
      out.push_back(s.name);
    }
  }
  return out;
}

bool SoakCluster::Stop() {
  if (stopped_) return true;
  ReapExited();  // whatever died before counts as a crash
  stopped_ = true;
  bool clean = true;
  // Nodes first, so that none of them spends its shutdown retrying a master
  // that is already gone.
  for (auto it = servers_.rbegin(); it != servers_.rend(); ++it) {
    ServerProcess& s = *it;
    if (s.pid <= 0) continue;
    if (s.exited) {
      clean = false;
      continue;
    }
    kill(s.pid, SIGTERM);
    int status = 0;
    const double deadline = bench::NowSec() + 10;
    pid_t got = 0;
    while ((got = waitpid(s.pid, &status, WNOHANG)) == 0 &&
           bench::NowSec() < deadline) {
      // No condition to wait on for a child's exit short of SIGCHLD
      // plumbing; a 10 ms poll bounds the shutdown of each server.
      usleep(10000);
    }
    if (got != s.pid) {
      kill(s.pid, SIGKILL);
      waitpid(s.pid, &status, 0);
      clean = false;
    }
    s.exited = true;
    s.wait_status = status;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) clean = false;
    RemoveShmOf(s.pid);
  }
  return clean;
}

void SoakCluster::RemoveShmOf(pid_t pid) {
  // A node that did not exit cleanly leaves its segment in /dev/shm
  // (kvpool-PID-...); a clean one has unlinked it already.
  std::error_code ec;
  const std::string prefix = "kvpool-" + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0)
      fs::remove(e.path(), ec);
  }
}

std::string SoakCluster::DescribeStatus(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exit " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const char* name = sigabbrev_np(WTERMSIG(wait_status));
    return std::string("killed by SIG") + (name ? name : "?");
  }
  return "status " + std::to_string(wait_status);
}

std::string SoakCluster::LogTail(const ServerProcess& p, int lines) {
  std::ifstream in(p.log_path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (int(tail.size()) > lines) tail.pop_front();
  }
  std::ostringstream out;
  for (const auto& l : tail) out << "  | " << l << "\n";
  return out.str();
}

}  // namespace kvpool::soak
