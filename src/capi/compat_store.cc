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

#include "node/node.h"
#include "rpc/master_client.h"

namespace kvpool::compat {

namespace {

constexpr int kInvalid = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kNodeStartAttempts = 5;

int Code(const Status& s) { return static_cast<int>(s.code()); }

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

// The items of a batch with a buffer and a non-negative size, with their
// positions; the others keep their INVALID_PARAMS answer.
template <typename Ptr>
struct ValidItems {
  ValidItems() = default;
  ValidItems(const std::vector<std::string>& all_keys,
             const std::vector<Ptr>& all_bufs,
             const std::vector<int64_t>& all_sizes) {
    for (size_t i = 0; i < all_keys.size(); ++i) {
      if (all_bufs[i] == nullptr || all_sizes[i] < 0) continue;
      keys.push_back(all_keys[i]);
      bufs.push_back(all_bufs[i]);
      sizes.push_back(static_cast<uint64_t>(all_sizes[i]));
      index.push_back(i);
    }
  }
  std::vector<std::string> keys;
  std::vector<Ptr> bufs;
  std::vector<uint64_t> sizes;
  std::vector<size_t> index;
};

// One key's buffers and sizes (and object offsets) in the client's form;
// false when the lists differ in length or hold a null buffer or a
// negative number.
template <typename P>
bool ToSlices(const std::vector<P>& bufs, const std::vector<int64_t>& sizes,
              std::vector<ConstSlice>* out, uint64_t* total) {
  if (bufs.size() != sizes.size()) return false;
  for (size_t j = 0; j < bufs.size(); ++j) {
    if (bufs[j] == nullptr || sizes[j] < 0) return false;
    out->push_back({bufs[j], static_cast<uint64_t>(sizes[j])});
    *total += static_cast<uint64_t>(sizes[j]);
  }
  return true;
}

template <typename P>
bool ToRanges(const std::vector<P>& bufs, const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& offsets,
              std::vector<ValueRange>* out) {
  if (bufs.size() != sizes.size() || offsets.size() != sizes.size())
    return false;
  for (size_t j = 0; j < bufs.size(); ++j) {
    if (bufs[j] == nullptr || sizes[j] < 0 || offsets[j] < 0) return false;
    out->push_back({static_cast<uint64_t>(offsets[j]),
                    const_cast<void*>(static_cast<const void*>(bufs[j])),
                    static_cast<uint64_t>(sizes[j])});
  }
  return true;
}

}  // namespace

MooncakeStore::MooncakeStore() = default;

MooncakeStore::~MooncakeStore() { Close(); }

bool MooncakeStore::is_setup() const {
  std::shared_lock lock(mu_);
  return client_ != nullptr;
}

Client* MooncakeStore::client() {
  std::shared_lock lock(mu_);
  return client_.get();
}

int MooncakeStore::SetupFromDict(
    const std::map<std::string, std::string>& dict) {
  auto c = SetupConfigFromDict(dict);
  if (!c.ok()) {
    std::unique_lock lock(mu_);
    if (setup_attempted_) return kInvalid;
    setup_attempted_ = true;  // a failed setup also needs a close()
    return static_cast<int>(c.code());
  }
  return Setup(c.value());
}

int MooncakeStore::Setup(const SetupConfig& config) {
  std::unique_lock lock(mu_);
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
  std::unique_lock lock(mu_);
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
    std::lock_guard<std::mutex> sl(session_mu_);
    get_sessions_.clear();
  }
  std::lock_guard<std::mutex> reg(reg_mu_);
  registered_.clear();
  return 0;
}

// ----------------------------------------------------------------- puts

int MooncakeStore::Put(std::string_view key, Bytes value,
                       const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {{value}}, rc, false);
}

int MooncakeStore::Upsert(std::string_view key, Bytes value,
                          const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {{value}}, rc, true);
}

int MooncakeStore::PutParts(std::string_view key,
                            const std::vector<Bytes>& parts,
                            const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {parts}, rc, false);
}

int MooncakeStore::UpsertParts(std::string_view key,
                               const std::vector<Bytes>& parts,
                               const MooncakeReplicateConfig& rc) {
  return PutBytes({std::string(key)}, {parts}, rc, true);
}

int MooncakeStore::PutBatch(const std::vector<std::string>& keys,
                            const std::vector<Bytes>& values,
                            const MooncakeReplicateConfig& rc) {
  if (keys.size() != values.size()) return kInvalid;
  std::vector<std::vector<Bytes>> parts;
  parts.reserve(values.size());
  for (const auto& v : values) parts.push_back({v});
  return PutBytes(keys, parts, rc, false);
}

int MooncakeStore::UpsertBatch(const std::vector<std::string>& keys,
                               const std::vector<Bytes>& values,
                               const MooncakeReplicateConfig& rc) {
  if (keys.size() != values.size()) return kInvalid;
  std::vector<std::vector<Bytes>> parts;
  parts.reserve(values.size());
  for (const auto& v : values) parts.push_back({v});
  return PutBytes(keys, parts, rc, true);
}

int MooncakeStore::PutBytes(const std::vector<std::string>& keys,
                            const std::vector<std::vector<Bytes>>& values,
                            const MooncakeReplicateConfig& rc, bool upsert) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  // As Mooncake, an empty value is a successful put that stores nothing.
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> parts;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<ConstSlice> p;
    uint64_t total = 0;
    for (const auto& v : values[i]) {
      p.push_back({v.data(), v.size()});
      total += v.size();
    }
    if (total == 0) continue;
    k.push_back(keys[i]);
    parts.push_back(std::move(p));
  }
  if (k.empty()) return 0;
  // Mooncake stages bytes from Python in its local buffer: with none, such
  // puts fail (and store nothing). kvpool writes them directly, so a value
  // larger than the local buffer is still taken.
  if (!local_buffer_) return kInvalid;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) return Code(cfg.status());
  for (const Status& st :
       client_->BatchPutParts(k, parts, cfg.value(), upsert)) {
    if (!st.ok()) return Code(st);
  }
  return 0;
}

// ----------------------------------------------------------------- gets

Result<std::string> MooncakeStore::Get(std::string_view key) {
  std::shared_lock lock(mu_);
  if (!client_) return Status(ErrorCode::INVALID_PARAMS, "not set up");
  return client_->Get(key);
}

std::shared_ptr<BufferHandle> MooncakeStore::GetBuffer(std::string_view key) {
  return BatchGetBuffer({std::string(key)})[0];
}

std::vector<std::shared_ptr<BufferHandle>> MooncakeStore::BatchGetBuffer(
    const std::vector<std::string>& keys) {
  std::vector<std::shared_ptr<BufferHandle>> out(keys.size());
  std::shared_lock lock(mu_);
  if (!client_ || keys.empty()) return out;
  // Sizes first (read-only lookup) so each value gets a local-buffer range
  // of the right size; keys that do not fit are read onto the heap.
  auto tiers = client_->BatchGetReplicaDesc(keys);
  std::vector<std::string> local_keys, heap_keys;
  std::vector<void*> local_ptrs;
  std::vector<uint64_t> local_sizes;
  std::vector<size_t> local_idx, heap_idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!tiers[i].ok()) continue;
    std::shared_ptr<BufferHandle> h;
    if (local_buffer_) h = local_buffer_->Allocate(tiers[i]->size);
    if (h) {
      out[i] = h;
      local_keys.push_back(keys[i]);
      local_ptrs.push_back(h->data());
      local_sizes.push_back(h->size());
      local_idx.push_back(i);
    } else {
      heap_keys.push_back(keys[i]);
      heap_idx.push_back(i);
    }
  }
  if (!local_keys.empty()) {
    auto reads = client_->BatchGetInto(local_keys, local_ptrs, local_sizes);
    for (size_t j = 0; j < reads.size(); ++j) {
      size_t i = local_idx[j];
      if (reads[j].ok()) {
        out[i]->Truncate(reads[j].value());
      } else {
        out[i].reset();
        // Grown by an upsert since the lookup: read it whole instead.
        if (reads[j].code() == ErrorCode::BUFFER_OVERFLOW) {
          heap_keys.push_back(keys[i]);
          heap_idx.push_back(i);
        }
      }
    }
  }
  if (!heap_keys.empty()) {
    auto values = client_->BatchGet(heap_keys);
    for (size_t j = 0; j < values.size(); ++j) {
      if (!values[j].ok()) continue;
      auto owned = std::make_shared<std::string>(std::move(values[j].value()));
      out[heap_idx[j]] = std::make_shared<BufferHandle>(
          reinterpret_cast<uint8_t*>(owned->data()), owned->size(), [owned] {});
    }
  }
  return out;
}

// ------------------------------------------------------ exist, size, remove

int64_t MooncakeStore::GetSize(std::string_view key) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  auto r = client_->GetSize(key);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

int MooncakeStore::IsExist(std::string_view key) {
  return BatchIsExist({std::string(key)})[0];
}

std::vector<int> MooncakeStore::BatchIsExist(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), -1);
  std::shared_lock lock(mu_);
  if (!client_ || keys.empty()) return out;
  auto r = client_->BatchIsExist(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (r[i].ok()) out[i] = r[i].value() ? 1 : 0;
  }
  return out;
}

int MooncakeStore::Remove(std::string_view key, bool force) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  return Code(client_->Remove(key, force));
}

std::vector<int> MooncakeStore::BatchRemove(
    const std::vector<std::string>& keys, bool force) {
  std::vector<int> out(keys.size(), kInvalid);
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto r = client_->BatchRemove(keys, force);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

int64_t MooncakeStore::RemoveAll(bool force) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  auto r = client_->RemoveAll(force);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

int64_t MooncakeStore::RemoveByRegex(const std::string& regex, bool force) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  auto r = client_->RemoveByRegex(regex, force);
  return r.ok() ? static_cast<int64_t>(r.value()) : Code(r.status());
}

// ------------------------------------------------------------ zero copy

int MooncakeStore::RegisterBuffer(void* buf, int64_t size) {
  if (buf == nullptr || size <= 0) return kInvalid;
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  std::lock_guard<std::mutex> reg(reg_mu_);
  if (Status s = client_->RegisterBuffer(buf, static_cast<uint64_t>(size));
      !s.ok()) {
    return Code(s);
  }
  registered_[reinterpret_cast<uintptr_t>(buf)] = static_cast<uint64_t>(size);
  return 0;
}

int MooncakeStore::UnregisterBuffer(void* buf) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  std::lock_guard<std::mutex> reg(reg_mu_);
  if (Status s = client_->UnregisterBuffer(buf); !s.ok()) return Code(s);
  registered_.erase(reinterpret_cast<uintptr_t>(buf));
  return 0;
}

uint64_t MooncakeStore::RegisteredCapacity(const void* p) const {
  std::lock_guard<std::mutex> reg(reg_mu_);
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = registered_.upper_bound(a);
  if (it == registered_.begin()) return 0;
  --it;
  if (a - it->first >= it->second) return 0;
  return it->second - (a - it->first);
}

int MooncakeStore::PutFrom(std::string_view key, const void* buf, int64_t size,
                           const MooncakeReplicateConfig& rc) {
  return BatchPutFrom({std::string(key)}, {buf}, {size}, rc)[0];
}

std::vector<int> MooncakeStore::BatchPutFrom(
    const std::vector<std::string>& keys, const std::vector<const void*>& bufs,
    const std::vector<int64_t>& sizes, const MooncakeReplicateConfig& rc) {
  std::vector<int> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  ValidItems<const void*> v(keys, bufs, sizes);
  // As Mooncake, an empty value is a successful put that stores nothing.
  ValidItems<const void*> nonempty;
  for (size_t j = 0; j < v.keys.size(); ++j) {
    if (v.sizes[j] == 0) {
      out[v.index[j]] = 0;
      continue;
    }
    nonempty.keys.push_back(v.keys[j]);
    nonempty.bufs.push_back(v.bufs[j]);
    nonempty.sizes.push_back(v.sizes[j]);
    nonempty.index.push_back(v.index[j]);
  }
  if (nonempty.keys.empty()) return out;
  auto r = client_->BatchPutFrom(nonempty.keys, nonempty.bufs, nonempty.sizes,
                                 cfg.value());
  const auto& idx = nonempty.index;
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int> MooncakeStore::BatchUpsertFrom(
    const std::vector<std::string>& keys, const std::vector<const void*>& bufs,
    const std::vector<int64_t>& sizes, const MooncakeReplicateConfig& rc) {
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) {
    return std::vector<int>(keys.size(), kInvalid);
  }
  std::vector<std::vector<const void*>> b(keys.size());
  std::vector<std::vector<int64_t>> n(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    b[i] = {bufs[i]};
    n[i] = {sizes[i]};
  }
  return BatchPutFromMultiBuffers(keys, b, n, rc, /*upsert=*/true);
}

int MooncakeStore::PutFromWithMetadata(std::string_view key, const void* buf,
                                       const void* metadata, int64_t size,
                                       int64_t metadata_size,
                                       const MooncakeReplicateConfig& rc) {
  return BatchPutFromMultiBuffers({std::string(key)}, {{metadata, buf}},
                                  {{metadata_size, size}}, rc)[0];
}

std::vector<int> MooncakeStore::BatchPutFromMultiBuffers(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<const void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const MooncakeReplicateConfig& rc, bool upsert) {
  std::vector<int> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (bufs[i].size() != sizes[i].size()) return out;  // all fail
  }
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> parts;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ConstSlice> p;
    uint64_t total = 0;
    if (!ToSlices(bufs[i], sizes[i], &p, &total)) continue;
    if (total == 0) {  // as Mooncake: nothing to store, and no error
      out[i] = 0;
      continue;
    }
    k.push_back(keys[i]);
    parts.push_back(std::move(p));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchPutFromParts(k, parts, cfg.value(), upsert);
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int64_t> MooncakeStore::BatchGetIntoMultiBuffers(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  std::shared_lock lock(mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ConstSlice>> dst;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ConstSlice> d;
    uint64_t total = 0;
    if (!ToSlices(bufs[i], sizes[i], &d, &total)) continue;
    k.push_back(keys[i]);
    dst.push_back(std::move(d));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchGetIntoParts(k, dst);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

std::vector<int64_t> MooncakeStore::BatchGetIntoMultiBufferRanges(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const std::vector<std::vector<int64_t>>& offsets) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size() ||
      offsets.size() != keys.size()) {
    return out;
  }
  std::shared_lock lock(mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ValueRange> r;
    if (!ToRanges(bufs[i], sizes[i], offsets[i], &r)) continue;
    k.push_back(keys[i]);
    ranges.push_back(std::move(r));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  // Keys with an open get session read under its lease; others look up now.
  std::vector<bool> in_session(k.size());
  {
    std::lock_guard<std::mutex> sl(session_mu_);
    for (size_t j = 0; j < k.size(); ++j)
      in_session[j] = get_sessions_.count(k[j]) > 0;
  }
  std::vector<std::string> ks[2];
  std::vector<std::vector<ValueRange>> rs[2];
  std::vector<size_t> at[2];
  for (size_t j = 0; j < k.size(); ++j) {
    const int g = in_session[j] ? 1 : 0;
    ks[g].push_back(k[j]);
    rs[g].push_back(std::move(ranges[j]));
    at[g].push_back(idx[j]);
  }
  for (int g = 0; g < 2; ++g) {
    if (ks[g].empty()) continue;
    auto r = g == 1 ? client_->BatchGetSessionRead(ks[g], rs[g])
                    : client_->BatchGetRanges(ks[g], rs[g]);
    for (size_t j = 0; j < at[g].size(); ++j) {
      out[at[g][j]] =
          r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
    }
  }
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionStart(
    const std::vector<std::string>& keys, const std::vector<int64_t>& sizes,
    const MooncakeReplicateConfig& rc) {
  std::vector<int> out(keys.size(), kInvalid);
  if (sizes.size() != keys.size()) return out;
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto cfg = ToReplicateConfig(rc);
  if (!cfg.ok()) {
    std::fill(out.begin(), out.end(), Code(cfg.status()));
    return out;
  }
  std::vector<std::string> k;
  std::vector<uint64_t> n;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (sizes[i] <= 0) continue;
    k.push_back(keys[i]);
    n.push_back(static_cast<uint64_t>(sizes[i]));
    idx.push_back(i);
  }
  auto r = client_->BatchPutSessionStart(k, n, cfg.value());
  for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = Code(r[j]);
  return out;
}

std::vector<int64_t> MooncakeStore::BatchPutFromMultiBufferRanges(
    const std::vector<std::string>& keys,
    const std::vector<std::vector<const void*>>& bufs,
    const std::vector<std::vector<int64_t>>& sizes,
    const std::vector<std::vector<int64_t>>& offsets) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size() ||
      offsets.size() != keys.size()) {
    return out;
  }
  std::shared_lock lock(mu_);
  if (!client_) return out;
  std::vector<std::string> k;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<size_t> idx;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ValueRange> r;
    if (!ToRanges(bufs[i], sizes[i], offsets[i], &r)) continue;
    k.push_back(keys[i]);
    ranges.push_back(std::move(r));
    idx.push_back(i);
  }
  if (k.empty()) return out;
  auto r = client_->BatchPutSessionWrite(k, ranges);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionEnd(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto r = client_->BatchPutSessionEnd(keys);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

std::vector<int> MooncakeStore::BatchPutSessionRevoke(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto r = client_->BatchPutSessionRevoke(keys);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Code(r[i]);
  return out;
}

std::vector<int> MooncakeStore::BatchGetSessionStart(
    const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), kInvalid);
  std::shared_lock lock(mu_);
  if (!client_) return out;
  auto r = client_->BatchGetSessionStart(keys);
  std::lock_guard<std::mutex> sl(session_mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = Code(r[i]);
    if (r[i].ok()) {
      get_sessions_.insert(keys[i]);
    } else {
      get_sessions_.erase(keys[i]);
    }
  }
  return out;
}

int MooncakeStore::BatchGetSessionEnd(const std::vector<std::string>& keys) {
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  {
    std::lock_guard<std::mutex> sl(session_mu_);
    for (const auto& k : keys) get_sessions_.erase(k);
  }
  return Code(client_->BatchGetSessionEnd(keys));
}

int64_t MooncakeStore::GetInto(std::string_view key, void* buf, int64_t size) {
  return BatchGetInto({std::string(key)}, {buf}, {size})[0];
}

std::vector<int64_t> MooncakeStore::BatchGetInto(
    const std::vector<std::string>& keys, const std::vector<void*>& bufs,
    const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out(keys.size(), kInvalid);
  if (bufs.size() != keys.size() || sizes.size() != keys.size()) return out;
  std::shared_lock lock(mu_);
  if (!client_) return out;
  ValidItems<void*> v(keys, bufs, sizes);
  if (v.keys.empty()) return out;
  const auto& idx = v.index;
  // BatchGetInto rejects buffers outside registered ones (INVALID_PARAMS).
  auto r = client_->BatchGetInto(v.keys, v.bufs, v.sizes);
  for (size_t j = 0; j < idx.size(); ++j) {
    out[idx[j]] =
        r[j].ok() ? static_cast<int64_t>(r[j].value()) : Code(r[j].status());
  }
  return out;
}

MooncakeStore::Ranges MooncakeStore::GetIntoRanges(
    const std::vector<void*>& bufs,
    const std::vector<std::vector<std::string>>& keys,
    const Ranges& dst_offsets, const Ranges& src_offsets, const Ranges& sizes) {
  // results[i][j] has one entry per fragment where the request is well
  // formed, so a bad entry fails alone (Mooncake reports per-entry errors
  // the same way); a key whose lists differ in length gets one error.
  Ranges out(keys.size());
  const size_t nb = keys.size();
  const bool shaped = bufs.size() == nb && dst_offsets.size() == nb &&
                      src_offsets.size() == nb && sizes.size() == nb;
  for (size_t i = 0; i < nb; ++i) {
    out[i].resize(keys[i].size());
    for (size_t j = 0; j < keys[i].size(); ++j) {
      const bool ok = shaped && dst_offsets[i].size() == keys[i].size() &&
                      src_offsets[i].size() == keys[i].size() &&
                      sizes[i].size() == keys[i].size() &&
                      dst_offsets[i][j].size() == sizes[i][j].size() &&
                      src_offsets[i][j].size() == sizes[i][j].size();
      out[i][j].assign(ok ? sizes[i][j].size() : 1, kInvalid);
    }
  }
  if (!shaped) return out;
  std::shared_lock lock(mu_);
  if (!client_) return out;
  // Every fragment that fits its buffer, grouped by key so that each key is
  // looked up once and only the fragments are read.
  struct Where {
    size_t i, j, k;
  };
  std::vector<std::string> unique;
  std::unordered_map<std::string, size_t> pos;
  std::vector<std::vector<ValueRange>> ranges;
  std::vector<std::vector<Where>> where;
  for (size_t i = 0; i < nb; ++i) {
    const uint64_t cap = bufs[i] ? RegisteredCapacity(bufs[i]) : 0;
    for (size_t j = 0; j < keys[i].size(); ++j) {
      if (out[i][j].size() != sizes[i][j].size()) continue;  // malformed
      const auto& d = dst_offsets[i][j];
      const auto& src = src_offsets[i][j];
      const auto& n = sizes[i][j];
      for (size_t k = 0; k < n.size(); ++k) {
        if (cap == 0 || d[k] < 0 || src[k] < 0 || n[k] < 0 ||
            static_cast<uint64_t>(d[k]) > cap ||
            static_cast<uint64_t>(n[k]) > cap - d[k]) {
          continue;  // stays INVALID_PARAMS: outside the buffer
        }
        auto [it, fresh] = pos.emplace(keys[i][j], unique.size());
        if (fresh) {
          unique.push_back(keys[i][j]);
          ranges.emplace_back();
          where.emplace_back();
        }
        ranges[it->second].push_back(ValueRange{
            static_cast<uint64_t>(src[k]), static_cast<char*>(bufs[i]) + d[k],
            static_cast<uint64_t>(n[k])});
        where[it->second].push_back(Where{i, j, k});
      }
    }
  }
  if (unique.empty()) return out;
  std::vector<std::vector<bool>> outside;
  auto r = client_->BatchGetRanges(unique, ranges, &outside);
  for (size_t u = 0; u < unique.size(); ++u) {
    for (size_t f = 0; f < where[u].size(); ++f) {
      const Where& w = where[u][f];
      int64_t& slot = out[w.i][w.j][w.k];
      if (!r[u].ok()) {
        slot = Code(r[u].status());
      } else if (!outside[u][f]) {
        slot = static_cast<int64_t>(ranges[u][f].length);
      }  // else: past the end of the value, stays INVALID_PARAMS
    }
  }
  return out;
}

// ------------------------------------------------------------- queries

std::vector<Result<TierInfo>> MooncakeStore::BatchGetReplicaDesc(
    const std::vector<std::string>& keys) {
  std::shared_lock lock(mu_);
  if (!client_) {
    return std::vector<Result<TierInfo>>(
        keys.size(), Status(ErrorCode::INVALID_PARAMS, "not set up"));
  }
  return client_->BatchGetReplicaDesc(keys);
}

std::string MooncakeStore::GetHostname() const {
  std::shared_lock lock(mu_);
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
  std::shared_lock lock(mu_);
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
  std::shared_lock lock(mu_);
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
  std::shared_lock lock(mu_);
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
  std::shared_lock lock(mu_);
  if (!client_) return kInvalid;
  if (auto s = client_->Stat(); !s.ok() && !IsPermissionDenied(s.status()))
    return Code(s.status());
  if (node_ && node_->segment_id() == 0) {
    return static_cast<int>(ErrorCode::SEGMENT_NOT_FOUND);
  }
  return 0;
}

}  // namespace kvpool::compat
