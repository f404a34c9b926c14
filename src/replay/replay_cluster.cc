#include "replay/replay_cluster.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <httplib.h>
#include "master/master_server.h"
#include "node/node.h"
#include "replay/clock_util.h"

extern char** environ;

namespace kvpool::replay {

namespace {

namespace fs = std::filesystem;

class InProcessCluster : public ReplayCluster {
 public:
  explicit InProcessCluster(const LocalClusterOptions& o) : cluster_(o) {}
  Status Start() override { return cluster_.Start(); }
  void Stop() override { cluster_.Stop(); }
  std::string master_address() const override {
    return cluster_.master_address();
  }
  size_t num_nodes() const override { return cluster_.num_nodes(); }
  std::string node_id(size_t i) const override {
    return const_cast<LocalCluster&>(cluster_).node(i).node_id();
  }
  Result<std::unique_ptr<Client>> NewClient(ClientConfig c) const override {
    return cluster_.NewClient(c);
  }
  ClusterSnapshot Snapshot() override { return TakeSnapshot(cluster_); }
  MasterCounters Counters() override { return ReadCounters(cluster_); }
  uint64_t NodePromotions(size_t i, bool ok) override {
    return replay::NodePromotions(cluster_, i, ok);
  }
  std::string kv_events_endpoint() const override {
    auto* p = Publisher();
    return p ? p->endpoint() : "";
  }
  std::string kv_events_replay_endpoint() const override {
    auto* p = Publisher();
    return p ? p->replay_endpoint() : "";
  }
  uint64_t kv_events_batches() const override {
    auto* p = Publisher();
    return p ? p->batches_published() : 0;
  }

 private:
  events::KvEventPublisher* Publisher() const {
    return const_cast<LocalCluster&>(cluster_).master().events_publisher();
  }
  LocalCluster cluster_;
};

// A child process whose first stdout line carries its ports.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  std::string label;
};

Result<Child> Spawn(const std::string& label, const std::string& bin,
                    const std::vector<std::string>& args,
                    const std::string& log_path) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Status(ErrorCode::INTERNAL_ERROR, "pipe failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(bin.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child c;
  c.label = label;
  const int rc =
      posix_spawn(&c.pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return Status(ErrorCode::INTERNAL_ERROR,
                  fmt::format("cannot start {}: {}", bin, strerror(rc)));
  }
  c.out_fd = pipe_fds[0];
  return c;
}

// The child's first stdout line that starts with `prefix` (its logger may
// write to stdout too), within `timeout_sec`.
Result<std::string> LineStarting(const Child& c, const std::string& prefix,
                                 double timeout_sec,
                                 const std::string& log_path) {
  std::string line;
  const double deadline = NowSec() + timeout_sec;
  while (true) {
    const double left = deadline - NowSec();
    if (left <= 0) break;
    pollfd p{c.out_fd, POLLIN, 0};
    if (poll(&p, 1, int(left * 1000) + 1) <= 0) continue;
    char ch;
    const ssize_t n = read(c.out_fd, &ch, 1);
    if (n <= 0) break;  // exited
    if (ch != '\n') {
      line += ch;
      continue;
    }
    if (line.rfind(prefix, 0) == 0) return line;
    line.clear();
  }
  return Status(ErrorCode::INTERNAL_ERROR,
                fmt::format("{} did not start (see {})", c.label, log_path));
}

// "key=value" after `key=` in `line`, up to a space.
std::string Field(const std::string& line, const std::string& key) {
  const size_t p = line.find(key + "=");
  if (p == std::string::npos) return "";
  const size_t b = p + key.size() + 1;
  return line.substr(b, line.find(' ', b) - b);
}

void StopChild(Child& c) {
  if (c.pid <= 0) return;
  kill(c.pid, SIGTERM);
  int status = 0;
  const double deadline = NowSec() + 10;
  while (waitpid(c.pid, &status, WNOHANG) == 0) {
    if (NowSec() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (c.out_fd >= 0) close(c.out_fd);
  c.pid = -1;
  c.out_fd = -1;
}

// Prometheus text exposition: "name{labels} value" -> value.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    try {
      m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    } catch (...) {
    }
  }
  return m;
}

uint64_t Metric(const std::map<std::string, double>& m, const std::string& name,
                const std::string& labels) {
  auto it = m.find(labels.empty() ? name : name + "{" + labels + "}");
  return it == m.end() ? 0 : uint64_t(it->second);
}

double MetricDouble(const std::map<std::string, double>& m,
                    const std::string& name, const std::string& labels) {
  auto it = m.find(labels.empty() ? name : name + "{" + labels + "}");
  return it == m.end() ? 0 : it->second;
}

// "host:port" -> (host, port); port -1 if malformed.
std::pair<std::string, int> HostPort(const std::string& s) {
  const size_t c = s.rfind(':');
  if (c == std::string::npos || c == 0) return {s, -1};
  try {
    return {s.substr(0, c), std::stoi(s.substr(c + 1))};
  } catch (...) {
    return {s, -1};
  }
}

// The store as processes: started here (kProcesses) or already running
// (kExternal); read over HTTP either way.
class ProcessCluster : public ReplayCluster {
 public:
  ProcessCluster(const LocalClusterOptions& o, std::string bin_dir)
      : o_(o), bin_dir_(std::move(bin_dir)) {}
  explicit ProcessCluster(ExternalCluster e)
      : external_(true), ext_(std::move(e)) {}
  ~ProcessCluster() override { Stop(); }

  Status Start() override {
    if (external_) return Attach();
    if (bin_dir_.empty()) {
      std::error_code ec;
      bin_dir_ = fs::read_symlink("/proc/self/exe", ec).parent_path().string();
    }
    log_dir_ = o_.enable_ssd ? o_.ssd_root : fs::temp_directory_path().string();
    const std::string mlog = log_dir_ + "/master.log";
    std::vector<std::string> ma = {
        "--rpc_address=127.0.0.1",
        "--rpc_port=0",
        "--metrics_port=0",
        fmt::format("--default_kv_lease_ttl={}", o_.default_kv_lease_ttl),
        fmt::format("--client_ttl={}", o_.client_ttl),
        fmt::format("--eviction_high_watermark_ratio={}",
                    o_.eviction_high_watermark_ratio),
        fmt::format("--eviction_ratio={}", o_.eviction_ratio),
        fmt::format("--promotion_queue_limit={}", o_.promotion_queue_limit),
        fmt::format("--prefetch_trigger_lease_ttl_ms={}",
                    o_.prefetch_trigger_lease_ttl_ms),
        fmt::format("--prefetch_consumed_lease_ms={}",
                    o_.prefetch_consumed_lease_ms),
        fmt::format("--prefetch_strict_buffer={}",
                    o_.prefetch_strict_buffer ? "true" : "false"),
        fmt::format("--promotion_task_ttl_sec={}", o_.promotion_task_ttl_sec)};
    if (o_.enable_ssd) ma.push_back("--enable_offload");
    if (o_.offload_on_evict) ma.push_back("--offload_on_evict");
    if (o_.offload_force_evict) ma.push_back("--offload_force_evict");
    if (o_.promotion_on_hit) ma.push_back("--promotion_on_hit");
    if (o_.enable_prefetch_trigger) ma.push_back("--enable_prefetch_trigger");
    auto m = Spawn("kvpool-master", bin_dir_ + "/kvpool-master", ma, mlog);
    if (!m.ok()) return m.status();
    master_ = m.value();
    auto line = LineStarting(master_, "kvpool-master listening", 30, mlog);
    if (!line.ok()) return line.status();
    // "kvpool-master listening on HOST:PORT metrics_port=N"
    std::istringstream ls(line.value());
    std::string w1, w2, w3;
    ls >> w1 >> w2 >> w3 >> master_address_;
    master_http_ = {"127.0.0.1",
                    std::stoi(Field(line.value(), "metrics_port"))};
    for (int i = 0; i < o_.num_nodes; ++i) {
      const std::string id = fmt::format("node{}", i);
      const std::string nlog = fmt::format("{}/{}.log", log_dir_, id);
      std::vector<std::string> na = {
          "--master_server_address=" + master_address_,
          fmt::format("--global_segment_size={}", o_.segment_size),
          "--node_id=" + id,
          "--data_port=0",
          "--metrics_port=0",
          fmt::format("--heartbeat_interval_ms={}", o_.heartbeat_interval_ms)};
      if (o_.enable_ssd) {
        const std::string path = o_.ssd_root + "/" + id;
        fs::create_directories(path);
        na.push_back("--enable_ssd_offload");
        na.push_back("--ssd_offload_path=" + path);
        na.push_back(
            fmt::format("--ssd_capacity_bytes={}", o_.ssd_capacity_bytes));
        na.push_back(fmt::format("--ssd_segment_file_size={}",
                                 o_.ssd_segment_file_size));
        na.push_back("--ssd_io_backend=" + o_.ssd_io_backend);
        na.push_back(fmt::format("--prefetch_buffer_segment={}",
                                 o_.prefetch_buffer_size));
        na.push_back(fmt::format("--promotion_pull={}",
                                 o_.promotion_pull ? "true" : "false"));
        na.push_back(fmt::format("--promotion_pull_interval_ms={}",
                                 o_.promotion_pull_interval_ms));
        na.push_back(fmt::format("--promotion_max_per_pull={}",
                                 o_.promotion_max_per_pull));
        na.push_back(
            fmt::format("--promotion_read_batch={}", o_.promotion_read_batch));
        na.push_back(fmt::format("--promotion_inflight_bytes={}",
                                 o_.promotion_inflight_bytes));
        na.push_back(
            fmt::format("--promotion_workers={}", o_.promotion_workers));
        na.push_back(fmt::format("--promotion_drop_unreachable={}",
                                 o_.promotion_drop_unreachable));
        na.push_back(
            fmt::format("--ssd_read_share_bytes={}", o_.ssd_read_share_bytes));
        na.push_back(fmt::format("--promotion_yield_to_gets_ms={}",
                                 o_.promotion_yield_to_gets_ms));
        na.push_back(fmt::format("--promotion_skip_after_get_ms={}",
                                 o_.promotion_skip_after_get_ms));
        na.push_back("--prefetch_profile=" + o_.prefetch_profile);
      }
      auto n = Spawn(id, bin_dir_ + "/kvpool-node", na, nlog);
      if (!n.ok()) return n.status();
      nodes_.push_back(n.value());
      auto nl = LineStarting(nodes_.back(), "kvpool-node ", 60, nlog);
      if (!nl.ok()) return nl.status();
      node_ids_.push_back(id);
      node_http_.push_back(
          {"127.0.0.1", std::stoi(Field(nl.value(), "metrics_port"))});
    }
    // Ready when the master has every node's main segment mounted.
    const double deadline = NowSec() + 30;
    while (NowSec() < deadline) {
      auto j = Status_();
      size_t mains = 0;
      if (j.contains("segments")) {
        for (const auto& s : j["segments"]) mains += s["kind"] == "main";
      }
      if (mains >= size_t(o_.num_nodes)) return Status::OK();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status(ErrorCode::INTERNAL_ERROR,
                  "the nodes did not mount their segments within 30 s");
  }

  void Stop() override {
    if (external_) return;  // not ours
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) StopChild(*it);
    nodes_.clear();
    StopChild(master_);
  }

  std::string master_address() const override { return master_address_; }
  size_t num_nodes() const override { return node_ids_.size(); }
  std::string node_id(size_t i) const override { return node_ids_.at(i); }
  Result<std::unique_ptr<Client>> NewClient(ClientConfig c) const override {
    c.master_server_address = master_address_;
    return Client::Create(c);
  }

  ClusterSnapshot Snapshot() override {
    ClusterSnapshot s;
    s.t = NowSec();
    ReadStatusJson(Status_(), &s);
    for (size_t i = 0; i < node_ids_.size(); ++i) {
      s.node_promotions_ok.push_back(NodePromotions(i, true));
      if (i < node_http_.size() && node_http_[i].second >= 0) {
        const auto m = ParseMetrics(Get(node_http_[i], "/metrics"));
        s.node_disk_reads.push_back(
            Metric(m, "kvpool_node_ssd_values_read", ""));
        s.node_shared_reads.push_back(
            Metric(m, "kvpool_node_promotion_shared_reads_total", ""));
        s.node_joined_reads.push_back(
            Metric(m, "kvpool_node_ssd_read_join_events", "event=\"joined\""));
        s.node_promotion_joins.push_back(Metric(
            m, "kvpool_node_promotion_read_join_events", "event=\"joined\""));
        s.node_yields.push_back(Metric(
            m, "kvpool_node_promotion_gets_first_events", "event=\"yielded\""));
        s.node_yields_timed_out.push_back(
            Metric(m, "kvpool_node_promotion_gets_first_events",
                   "event=\"timed_out\""));
        s.node_yield_wait_us.push_back(uint64_t(
            MetricDouble(m, "kvpool_node_promotion_gets_first_wait_seconds",
                         "") *
            1e6));
        s.node_io_reads.push_back(Metric(m, "kvpool_node_ssd_disk_reads", ""));
        s.node_io_read_us.push_back(uint64_t(
            MetricDouble(m, "kvpool_node_ssd_disk_read_seconds", "") * 1e6));
        for (const char* phase : kPromotionPhases) {
          s.node_phase_us[phase].push_back(
              Metric(m, "kvpool_node_promotion_phase_microseconds_total",
                     fmt::format("phase=\"{}\"", phase)));
        }
      }
    }
    return s;
  }

  MasterCounters Counters() override {
    const auto m = ParseMetrics(Get(master_http_, "/metrics"));
    MasterCounters c;
    for (const char* st : {"IN_MEMORY", "QUEUED", "THROTTLED_WATERMARK",
                           "THROTTLED_CAP", "NO_LOCAL_DISK", "NOT_FOUND"}) {
      c.trigger_status[st] = Metric(m, "kvpool_master_prefetch_trigger_total",
                                    fmt::format("status=\"{}\"", st));
    }
    for (const auto& f : FateLabels()) {
      c.fate[f] = Metric(m, "kvpool_master_prefetch_fate_total",
                         fmt::format("fate=\"{}\"", f));
    }
    for (const char* w : {"master", "master_after_get", "holder"}) {
      c.deadline_expired[w] =
          Metric(m, "kvpool_master_promotion_deadline_expired_total",
                 fmt::format("where=\"{}\"", w));
    }
    c.buffer_recycled =
        Metric(m, "kvpool_master_prefetch_buffer_recycled_total", "");
    c.buffer_full = Metric(m, "kvpool_master_prefetch_buffer_full_total", "");
    for (const char* part : {"used", "reserved"}) {
      c.buffer_full_bytes[part] =
          Metric(m, "kvpool_master_prefetch_buffer_full_bytes_total",
                 fmt::format("part=\"{}\"", part));
    }
    for (const char* r : {"frequency", "watermark", "dedup", "cap"}) {
      c.promotion_rejected[r] =
          Metric(m, "kvpool_master_promotion_rejected_total",
                 fmt::format("reason=\"{}\"", r));
    }
    for (const char* src : {"on_hit", "exist", "router"}) {
      for (const char* res : {"landed", "failed"}) {
        c.outcome[fmt::format("{}/{}", src, res)] =
            Metric(m, "kvpool_master_promotion_outcome_total",
                   fmt::format("source=\"{}\",result=\"{}\"", src, res));
      }
    }
    for (size_t i = 0; i < node_ids_.size(); ++i) {
      c.node_promotions_ok.push_back(NodePromotions(i, true));
      c.node_promotions_failed.push_back(NodePromotions(i, false));
    }
    return c;
  }

  uint64_t NodePromotions(size_t i, bool ok) override {
    // A node whose metrics endpoint was not given reads 0.
    if (i >= node_http_.size() || node_http_[i].second < 0) return 0;
    const auto m = ParseMetrics(Get(node_http_[i], "/metrics"));
    return Metric(m, "kvpool_node_promotion_total",
                  ok ? "result=\"ok\"" : "result=\"failed\"");
  }

  std::string master_http() const override {
    return fmt::format("{}:{}", master_http_.first, master_http_.second);
  }
  std::vector<std::string> node_http() const override {
    std::vector<std::string> v;
    for (size_t i = 0; i < node_ids_.size() && i < node_http_.size(); ++i) {
      v.push_back(fmt::format("{}={}:{}", node_ids_[i], node_http_[i].first,
                              node_http_[i].second));
    }
    return v;
  }

  std::vector<std::pair<std::string, int>> processes() const override {
    std::vector<std::pair<std::string, int>> p;
    if (master_.pid > 0) p.emplace_back("store process: master", master_.pid);
    for (const auto& n : nodes_) {
      if (n.pid > 0) p.emplace_back("store processes: nodes", n.pid);
    }
    return p;
  }

 private:
  using Endpoint = std::pair<std::string, int>;
  // An already running cluster: its master must answer, and every node
  // with a main segment is one of ours, in segment order.
  Status Attach() {
    master_address_ = ext_.master_address;
    master_http_ = HostPort(ext_.master_http);
    if (master_address_.empty() || master_http_.second < 0) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "an external cluster needs --master HOST:PORT and "
                    "--master_http HOST:PORT (its --metrics_port)");
    }
    nlohmann::json j = Status_();
    if (!j.contains("segments")) {
      return Status(
          ErrorCode::RPC_FAIL,
          "no /status from the master's HTTP endpoint " + ext_.master_http);
    }
    std::map<std::string, Endpoint> given;
    for (const auto& n : ext_.node_http) {
      const size_t eq = n.find('=');
      if (eq == std::string::npos) {
        return Status(ErrorCode::INVALID_PARAMS,
                      "--node_http takes NODE_ID=HOST:PORT, got " + n);
      }
      given[n.substr(0, eq)] = HostPort(n.substr(eq + 1));
    }
    for (const auto& seg : j["segments"]) {
      if (seg.value("kind", "") != "main") continue;
      const std::string id = seg.value("node", "");
      node_ids_.push_back(id);
      auto it = given.find(id);
      node_http_.push_back(it == given.end() ? Endpoint{"", -1} : it->second);
    }
    if (node_ids_.empty()) {
      return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                    "the external cluster has no mounted node");
    }
    return Status::OK();
  }

  static std::string Get(const Endpoint& e, const char* path) {
    httplib::Client cli(e.first, e.second);
    cli.set_connection_timeout(2);
    cli.set_read_timeout(5);
    auto r = cli.Get(path);
    return r && r->status == 200 ? r->body : std::string();
  }
  nlohmann::json Status_() {
    auto j =
        nlohmann::json::parse(Get(master_http_, "/status"), nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  LocalClusterOptions o_;
  std::string bin_dir_, log_dir_;
  Child master_;
  std::vector<Child> nodes_;
  bool external_ = false;
  ExternalCluster ext_;
  std::string master_address_;
  Endpoint master_http_{"127.0.0.1", -1};
  std::vector<std::string> node_ids_;
  std::vector<Endpoint> node_http_;
};

}  // namespace

bool ParseClusterKind(const std::string& s, ClusterKind* out) {
  if (s == "in-process") {
    *out = ClusterKind::kInProcess;
  } else if (s == "processes") {
    *out = ClusterKind::kProcesses;
  } else if (s == "external") {
    *out = ClusterKind::kExternal;
  } else {
    return false;
  }
  return true;
}

const char* ClusterKindName(ClusterKind k) {
  return k == ClusterKind::kProcesses  ? "processes"
         : k == ClusterKind::kExternal ? "external"
                                       : "in-process";
}

std::unique_ptr<ReplayCluster> MakeReplayCluster(
    ClusterKind kind, const LocalClusterOptions& o, const std::string& bin_dir,
    const ExternalCluster& external) {
  if (kind == ClusterKind::kExternal) {
    return std::make_unique<ProcessCluster>(external);
  }
  if (kind == ClusterKind::kProcesses) {
    return std::make_unique<ProcessCluster>(o, bin_dir);
  }
  return std::make_unique<InProcessCluster>(o);
}

}  // namespace kvpool::replay
