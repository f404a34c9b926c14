// MooncakeStore (see compat_store.h): setup and close, the hosting of a
// node's DRAM (mount_segment and its family), queries and the health check.
// Calls on values are in compat_store_values.cc, the zero-copy ones in
// compat_store_zero_copy.cc.
#include "capi/compat_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "capi/compat_store_internal.h"
#include "node/node.h"
#include "rpc/master_client.h"

namespace kvpool::compat {

namespace {

constexpr int kNodeStartAttempts = 5;

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0;
}

// "host" -> port -1; "host:port" -> port; a malformed port -> false.
bool SplitHostPort(const std::string& s, std::string* host, int* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) {
    *host = s;
    *port = -1;
    return true;
  }
  *host = s.substr(0, colon);
  std::string p = s.substr(colon + 1);
  if (host->empty() || p.empty() || p.size() > 5) return false;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
  }
  *port = std::stoi(p);
  return *port <= 65535;
}

// Mooncake's range for ports it picks itself (its AutoPortBinder).
constexpr int kAutoPortMin = 12300;
constexpr int kAutoPortMax = 14300;
constexpr int kPortProbes = 64;

bool PortFree(const std::string& bind_address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, bind_address.c_str(), &addr.sin_addr);
  const bool ok =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A port of Mooncake's automatic range that is free now, from a random
// start so that stores set up at once rarely collide; 0 if none of the
// probes is free. The node id must name the data port before the data
// server binds it, so the port is chosen here; a lost race makes
// Node::Start fail and the caller retries with another.
int PickFreePort(const std::string& bind_address) {
  static std::atomic<uint64_t> seq{0};
  const uint64_t salt =
      static_cast<uint64_t>(getpid()) * 7919 + seq.fetch_add(1) * 104729 +
      static_cast<uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count());
  const int span = kAutoPortMax - kAutoPortMin + 1;
  for (int i = 0; i < kPortProbes; ++i) {
    const int port =
        kAutoPortMin + static_cast<int>((salt + uint64_t(i) * 127) % span);
    if (PortFree(bind_address, port)) return port;
  }
  return 0;
}

}  // namespace

using store_internal::Code;
using store_internal::kInvalid;

MooncakeStore::MooncakeStore() = default;

MooncakeStore::~MooncakeStore() { Close(); }

bool MooncakeStore::is_setup() const {
  ReaderLock lock(&mu_);
  return client_ != nullptr;
}

Client* MooncakeStore::client() {
  ReaderLock lock(&mu_);
  return client_.get();
}

int MooncakeStore::SetupFromDict(
    const std::map<std::string, std::string>& dict) {
  auto c = SetupConfigFromDict(dict);
  if (!c.ok()) {
    WriterLock lock(&mu_);
    if (setup_attempted_) return kInvalid;
    setup_attempted_ = true;  // a failed setup also needs a close()
    return static_cast<int>(c.code());
  }
  return Setup(c.value());
}

int MooncakeStore::Setup(const SetupConfig& config) {
  WriterLock lock(&mu_);
  // As Mooncake: every setup, failed or not, must be followed by close()
  // before the next one, so a store is never replaced under its callers.
  if (setup_attempted_) return kInvalid;
  setup_attempted_ = true;
  if (!config.Validate().ok()) return kInvalid;
  std::string host;
  int port = -1;
  if (!SplitHostPort(config.local_hostname, &host, &port)) return kInvalid;

  ClientConfig cc;
  cc.master_server_address = config.master_server_addr;
  cc.tenant = config.tenant;
  cc.transport = config.transport;
  cc.rpc_timeout_ms = config.rpc_timeout_ms;
  cc.data_connect_timeout_ms = config.data_connect_timeout_ms;
  cc.data_io_timeout_ms = config.data_io_timeout_ms;
  cc.lease_cache = config.lease_cache;
  cc.enable_ssd_prefetch = config.enable_ssd_prefetch;
  cc.credential_file = config.credential_file.empty()
                           ? config.cluster_secret_file
                           : config.credential_file;
  cc.tls_ca_file = config.tls_ca_file;
  cc.tls_cert_file = config.tls_cert_file;
  cc.tls_key_file = config.tls_key_file;
  auto client = Client::Create(cc);
  if (!client.ok()) return Code(client.status());

  std::unique_ptr<Node> node;
  std::string hostname = host + ":" + std::to_string(port < 0 ? 0 : port);
  if (config.global_segment_size > 0) {
    const std::string bind = IsLoopback(host) ? "127.0.0.1" : "0.0.0.0";
    Status started;
    for (int attempt = 0; attempt < kNodeStartAttempts; ++attempt) {
      NodeConfig nc;
      nc.master_server_address = config.master_server_addr;
      nc.global_segment_size = config.global_segment_size;
      nc.local_hostname = host;
      nc.data_bind_address = bind;
      nc.data_port = port > 0 ? port : PickFreePort(bind);
      if (nc.data_port == 0) continue;
      nc.node_id = host + ":" + std::to_string(nc.data_port);
      nc.heartbeat_interval_ms = config.heartbeat_interval_ms;
      nc.rpc_timeout_ms = config.rpc_timeout_ms;
      nc.enable_ssd_offload = config.enable_ssd_offload;
      nc.ssd_offload_path = config.ssd_offload_path;
      nc.ssd_capacity_bytes = config.ssd_capacity_bytes;
      nc.cluster_secret_file = config.cluster_secret_file;
      nc.tls_ca_file = config.tls_ca_file;
      nc.tls_cert_file = config.tls_cert_file;
      nc.tls_key_file = config.tls_key_file;
      hostname = nc.node_id;
      node = std::make_unique<Node>(nc);
      started = node->Start();
      if (started.ok() || port > 0) break;
      node.reset();
    }
    if (!started.ok()) return Code(started);
    if (!node) return static_cast<int>(ErrorCode::INTERNAL_ERROR);  // no port
  } else if (auto stat = client.value()->Stat();
             !stat.ok() && !IsPermissionDenied(stat.status())) {
    // Mooncake's setup fails when the master is unreachable; a pure client
    // would otherwise only find out at its first call. A tenant credential
    // may not read the cluster's stats, but the refusal shows the master
    // is up and took the credential.
    return Code(stat.status());
  }

  std::shared_ptr<LocalBuffer> local;
  if (config.local_buffer_size > 0) {
    auto lb = LocalBuffer::Create(config.local_buffer_size);
    if (!lb.ok()) return Code(lb.status());
    local = std::move(lb.value());
    if (Status s = client.value()->RegisterBuffer(local->base(), local->size());
        !s.ok()) {
      return Code(s);
    }
  }
  client_ = std::move(client.value());
  node_ = std::move(node);
  local_buffer_ = std::move(local);
  hostname_ = hostname;
  return 0;
}

int MooncakeStore::Close() {
  WriterLock lock(&mu_);
  return CloseLocked();
}

int MooncakeStore::CloseLocked() {
  setup_attempted_ = false;
  // The client first: it may read the hosted segment through its own
  // mapping, never through the node, so the order only matters for clarity.
  client_.reset();
  if (node_) node_->Stop();
  node_.reset();
  // Live buffer handles keep the mapping alive until they go.
  local_buffer_.reset();
  hostname_.clear();
  {
    MutexLock sl(&session_mu_);
    get_sessions_.clear();
  }
  MutexLock reg(&reg_mu_);
  registered_.clear();
  return 0;
}

// ------------------------------------------------------------- queries

std::vector<Result<TierInfo>> MooncakeStore::BatchGetReplicaDesc(
    const std::vector<std::string>& keys) {
  ReaderLock lock(&mu_);
  if (!client_) {
    return std::vector<Result<TierInfo>>(
        keys.size(), Status(ErrorCode::INVALID_PARAMS, "not set up"));
  }
  return client_->BatchGetReplicaDesc(keys);
}

std::string MooncakeStore::GetHostname() const {
  ReaderLock lock(&mu_);
  return hostname_;
}

// ------------------------------------------------ mount_segment family

namespace {
// Mooncake's mount_segment reports every failure as -1.
constexpr int kMountFailed = static_cast<int>(ErrorCode::INTERNAL_ERROR);

// What Mooncake checks before it maps anything: the file opens read-write
// and `offset` is a page-aligned position inside it.
Status CheckFileAndOffset(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return Status(ErrorCode::FILE_NOT_FOUND,
                  "cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0;
  ::close(fd);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (!ok || page <= 0 || offset % static_cast<uint64_t>(page) != 0 ||
      offset > static_cast<uint64_t>(st.st_size)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "offset " + std::to_string(offset) + " into " + path);
  }
  return Status::OK();
}
}  // namespace

Status MooncakeStore::NotHosting() const {
  return Status(ErrorCode::INVALID_PARAMS,
                client_ ? "a pure client (global_segment_size 0) hosts no "
                          "segment to mount memory into"
                        : "not set up");
}

MooncakeStore::MountResult MooncakeStore::MountSegment(const std::string& path,
                                                       int64_t size,
                                                       int64_t offset) {
  MountResult out;
  ReaderLock lock(&mu_);
  Status s;
  if (!node_) {
    s = NotHosting();
  } else if (size < 0 || offset < 0) {
    s = Status(ErrorCode::INVALID_PARAMS, "negative size or offset");
  } else if (size == 0) {
    s = CheckFileAndOffset(path, static_cast<uint64_t>(offset));
    if (s.ok()) return out;  // nothing to mount (Mooncake: 0, no ids)
  } else {
    auto name = node_->MountFileSegment(path, static_cast<uint64_t>(offset),
                                        static_cast<uint64_t>(size));
    if (name.ok()) {
      out.segment_ids.push_back(std::move(name.value()));
      return out;
    }
    s = name.status();
  }
  spdlog::warn("mount_segment({}, size {}, offset {}) failed: {}", path, size,
               offset, s.ToString());
  out.ret = kMountFailed;
  return out;
}

MooncakeStore::MountResult MooncakeStore::AllocateAndMountSegment(
    int64_t size) {
  MountResult out;
  ReaderLock lock(&mu_);
  Status s;
  if (!node_) {
    s = NotHosting();
  } else if (size <= 0) {
    s = Status(ErrorCode::INVALID_PARAMS, "size must be > 0");
  } else {
    auto name = node_->AllocateExtraSegment(static_cast<uint64_t>(size));
    if (name.ok()) {
      for (const auto& e : node_->extra_segments()) {
        if (e.name == name.value()) out.allocated_size = e.size;
      }
      out.segment_ids.push_back(std::move(name.value()));
      return out;
    }
    s = name.status();
  }
  spdlog::warn("allocate_and_mount_segment({}) failed: {}", size, s.ToString());
  out.ret = kMountFailed;
  return out;
}

int MooncakeStore::UnmountSegment(const std::vector<std::string>& segment_ids,
                                  int64_t grace_period_seconds) {
  return UnmountExtras(segment_ids, grace_period_seconds, false);
}

int MooncakeStore::UnmountAndFreeSegment(
    const std::vector<std::string>& segment_ids, int64_t grace_period_seconds) {
  return UnmountExtras(segment_ids, grace_period_seconds, true);
}

int MooncakeStore::UnmountExtras(const std::vector<std::string>& segment_ids,
                                 int64_t grace_period_seconds, bool allocated) {
  ReaderLock lock(&mu_);
  if (!node_ || grace_period_seconds < 0) return kMountFailed;
  // Which of ours each id is, to refuse one of the other call's kind (as
  // Mooncake, which keeps the two apart).
  std::map<std::string, bool> ours;
  for (const auto& e : node_->extra_segments()) ours[e.name] = e.allocated;
  int first_error = 0;
  for (const auto& id : segment_ids) {
    auto it = ours.find(id);
    Status s;
    if (it == ours.end() || it->second != allocated) {
      s = Status(
          ErrorCode::SEGMENT_NOT_FOUND,
          "no segment " + id + " of this store's " +
              (allocated ? "allocate_and_mount_segment" : "mount_segment"));
    } else {
      s = node_->UnmountExtraSegment(id);
      ours.erase(it);  // the same id twice: the second is unknown
    }
    if (s.ok()) continue;
    spdlog::warn("{}({}) failed: {}",
                 allocated ? "unmount_and_free_segment" : "unmount_segment", id,
                 s.ToString());
    // Mooncake: -1 for an id it does not know, the master's code when the
    // master refused.
    if (first_error == 0) {
      first_error = s.code() == ErrorCode::SEGMENT_NOT_FOUND
                        ? kMountFailed
                        : static_cast<int>(s.code());
    }
  }
  return first_error;
}

int MooncakeStore::HealthCheck() {
  ReaderLock lock(&mu_);
  if (!client_) return kInvalid;
  if (auto s = client_->Stat(); !s.ok() && !IsPermissionDenied(s.status()))
    return Code(s.status());
  if (node_ && node_->segment_id() == 0) {
    return static_cast<int>(ErrorCode::SEGMENT_NOT_FOUND);
  }
  return 0;
}

}  // namespace kvpool::compat
