// kvpool.Store (the native API over kvpool::Client) and kvpool.LocalCluster.
// Errors raise kvpool.StoreError; a miss is None, not an error. Every call
// that waits on the network or copies bytes releases the GIL.
#include <pybind11/stl.h>

#include <memory>
#include <mutex>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "node/node.h"
#include "python/src/py_common.h"

namespace kvpool::py_bindings {

namespace {

using compat::MooncakeReplicateConfig;
using Release = py::call_guard<py::gil_scoped_release>;

// A Client that close() can drop while other threads are inside calls: each
// call holds its own reference until it returns.
class NativeStore {
 public:
  explicit NativeStore(const ClientConfig& config) {
    auto c = Client::Create(config);
    ThrowIfError(c.status());
    client_ = std::move(c.value());
  }
  std::shared_ptr<Client> client() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!client_) {
      throw StoreException(
          Status(ErrorCode::INVALID_PARAMS, "the store is closed"));
    }
    return client_;
  }
  void Close() {
    std::shared_ptr<Client> last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = std::move(client_);
    }
    // `last` (possibly the final reference) is destroyed here, unlocked.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Client> client_;
};

const char* TransportName(TransportMode t) {
  switch (t) {
    case TransportMode::kShm:
      return "shm";
    case TransportMode::kTcp:
      return "tcp";
    case TransportMode::kAuto:
      break;
  }
  return "auto";
}

TransportMode ParseTransport(const std::string& t) {
  if (t == "auto") return TransportMode::kAuto;
  if (t == "shm") return TransportMode::kShm;
  if (t == "tcp") return TransportMode::kTcp;
  throw StoreException(
      Status(ErrorCode::INVALID_PARAMS, "transport must be auto, shm or tcp"));
}

void* ToPtr(int64_t p) {
  if (p <= 0) {
    throw StoreException(Status(ErrorCode::INVALID_PARAMS, "null pointer"));
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

uint64_t ToSize(int64_t n) {
  if (n < 0) {
    throw StoreException(Status(ErrorCode::INVALID_PARAMS, "negative size"));
  }
  return static_cast<uint64_t>(n);
}

std::vector<int> Codes(const std::vector<Status>& v) {
  std::vector<int> out;
  out.reserve(v.size());
  for (const auto& s : v) out.push_back(static_cast<int>(s.code()));
  return out;
}

py::dict CountersDict(const ClientCounters& c) {
  py::dict d;
  d["shm_bytes_read"] = c.shm_bytes_read;
  d["shm_bytes_written"] = c.shm_bytes_written;
  d["tcp_bytes_read"] = c.tcp_bytes_read;
  d["tcp_bytes_written"] = c.tcp_bytes_written;
  d["ssd_bytes_read"] = c.ssd_bytes_read;
  d["local_ssd_bytes_read"] = c.local_ssd_bytes_read;
  d["lease_cache_hits"] = c.lease_cache_hits;
  return d;
}

py::dict PrefetchDict(const PrefetchStats& s) {
  py::dict d;
  d["triggers"] = s.triggers;
  d["keys_triggered"] = s.keys_triggered;
  d["dedup_hits"] = s.dedup_hits;
  d["cooldown_entries"] = s.cooldown_entries;
  d["cooldown_skips"] = s.cooldown_skips;
  d["delegations"] = s.delegations;
  d["completed"] = s.completed;
  d["failed"] = s.failed;
  d["already_resident"] = s.already_resident;
  d["not_ssd_only"] = s.not_ssd_only;
  d["dropped"] = s.dropped;
  return d;
}

}  // namespace

void BindStore(py::module_& m) {
  // Keyword defaults are ClientConfig's (one declaration per knob;
  // scripts/check_knobs.py checks the names, the copies and _kvpool.pyi).
  const ClientConfig cdefaults;
  py::class_<NativeStore>(
      m, "Store",
      "A client of a kvpool cluster (kvpool::Client). Thread-safe; every "
      "blocking call releases the GIL. Errors raise StoreError.")
      .def(py::init([](const std::string& master, const std::string& tenant,
                       const std::string& transport, int rpc_timeout_ms,
                       bool lease_cache, bool enable_ssd_prefetch,
                       int data_connect_timeout_ms, int data_io_timeout_ms,
                       const std::string& credential_file,
                       const std::string& tls_ca_file,
                       const std::string& tls_cert_file,
                       const std::string& tls_key_file) {
             ClientConfig c;
             c.master_server_address = master;
             c.tenant = tenant;
             c.transport = ParseTransport(transport);
             c.rpc_timeout_ms = rpc_timeout_ms;
             c.data_connect_timeout_ms = data_connect_timeout_ms;
             c.data_io_timeout_ms = data_io_timeout_ms;
             c.lease_cache = lease_cache;
             c.enable_ssd_prefetch = enable_ssd_prefetch;
             c.credential_file = credential_file;
             c.tls_ca_file = tls_ca_file;
             c.tls_cert_file = tls_cert_file;
             c.tls_key_file = tls_key_file;
             return std::make_unique<NativeStore>(c);
           }),
           py::arg("master_server_address") = cdefaults.master_server_address,
           py::kw_only(), py::arg("tenant") = cdefaults.tenant,
           py::arg("transport") = TransportName(cdefaults.transport),
           py::arg("rpc_timeout_ms") = cdefaults.rpc_timeout_ms,
           py::arg("lease_cache") = cdefaults.lease_cache,
           py::arg("enable_ssd_prefetch") = cdefaults.enable_ssd_prefetch,
           py::arg("data_connect_timeout_ms") =
               cdefaults.data_connect_timeout_ms,
           py::arg("data_io_timeout_ms") = cdefaults.data_io_timeout_ms,
           py::arg("credential_file") = cdefaults.credential_file,
           py::arg("tls_ca_file") = cdefaults.tls_ca_file,
           py::arg("tls_cert_file") = cdefaults.tls_cert_file,
           py::arg("tls_key_file") = cdefaults.tls_key_file,
           "Connects lazily: only an invalid configuration (or an unreadable "
           "credential or TLS file) fails here.")
      .def("close", &NativeStore::Close, Release(),
           "Drops the connection; later calls raise StoreError.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](NativeStore& s, py::args) {
             py::gil_scoped_release g;
             s.Close();
           })
      // ---------------------------------------------------------- puts
      .def(
          "put",
          [](NativeStore& s, const std::string& key, py::object value,
             const MooncakeReplicateConfig* rc) {
            ReplicateConfig cfg = ToNative(rc);
            BufferView v(value, false);
            auto c = s.client();
            py::gil_scoped_release g;
            ThrowIfError(c->Put(key, {v.data(), v.size()}, cfg));
          },
          py::arg("key"), py::arg("value"), py::arg("config") = py::none(),
          "Stores a bytes-like value. An existing key is left as it is.")
      .def(
          "upsert",
          [](NativeStore& s, const std::string& key, py::object value,
             const MooncakeReplicateConfig* rc) {
            ReplicateConfig cfg = ToNative(rc);
            BufferView v(value, false);
            auto c = s.client();
            py::gil_scoped_release g;
            ThrowIfError(c->Upsert(key, {v.data(), v.size()}, cfg));
          },
          py::arg("key"), py::arg("value"), py::arg("config") = py::none(),
          "Stores a value, replacing an existing one.")
      .def(
          "batch_put",
          [](NativeStore& s, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const MooncakeReplicateConfig* rc) {
            ReplicateConfig cfg = ToNative(rc);
            std::vector<std::unique_ptr<BufferView>> views;
            std::vector<std::string_view> sv;
            for (const auto& v : values) {
              views.push_back(std::make_unique<BufferView>(v, false));
              sv.emplace_back(views.back()->data(), views.back()->size());
            }
            auto c = s.client();
            py::gil_scoped_release g;
            if (keys.size() != sv.size()) {
              return std::vector<int>(
                  keys.size(), static_cast<int>(ErrorCode::INVALID_PARAMS));
            }
            return Codes(c->BatchPut(keys, sv, cfg));
          },
          py::arg("keys"), py::arg("values"), py::arg("config") = py::none(),
          "One master round trip per phase for all keys; a list of codes "
          "(0 = stored).")
      // ---------------------------------------------------------- gets
      .def(
          "get",
          [](NativeStore& s, const std::string& key) -> py::object {
            auto c = s.client();
            Result<std::string> r = [&] {
              py::gil_scoped_release g;
              return c->Get(key);
            }();
            if (r.code() == ErrorCode::OBJECT_NOT_FOUND) return py::none();
            ThrowIfError(r.status());
            return py::bytes(r.value());
          },
          py::arg("key"), "The value, or None if the key does not exist.")
      .def(
          "batch_get",
          [](NativeStore& s, const std::vector<std::string>& keys) {
            auto c = s.client();
            auto r = [&] {
              py::gil_scoped_release g;
              return c->BatchGet(keys);
            }();
            py::list out;
            for (auto& v : r) {
              if (v.ok()) {
                out.append(py::bytes(v.value()));
              } else if (v.code() == ErrorCode::OBJECT_NOT_FOUND) {
                out.append(py::none());
              } else {
                throw StoreException(v.status());
              }
            }
            return out;
          },
          py::arg("keys"), "Values (None for missing keys), one master RPC.")
      .def(
          "get_into",
          [](NativeStore& s, const std::string& key, py::object buffer) {
            BufferView v(buffer, true);
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->GetInto(key, v.data(), v.size());
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("key"), py::arg("buffer"),
          "Reads the value into a writable bytes-like object (bytearray, "
          "numpy array, ...); returns its size. No registration needed.")
      .def(
          "get_into",
          [](NativeStore& s, const std::string& key, int64_t ptr,
             int64_t size) {
            void* p = ToPtr(ptr);
            uint64_t n = ToSize(size);
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->BatchGetInto({key}, {p}, {n})[0];
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("size"),
          "Zero-copy read into a registered buffer; returns the value's size.")
      // ---------------------------------------------------------- zero copy
      .def(
          "register_buffer",
          [](NativeStore& s, int64_t ptr, int64_t size) {
            void* p = ToPtr(ptr);
            uint64_t n = ToSize(size);
            auto c = s.client();
            py::gil_scoped_release g;
            ThrowIfError(c->RegisterBuffer(p, n));
          },
          py::arg("buffer_ptr"), py::arg("size"),
          "Registers memory for the zero-copy calls (put_from, get_into with "
          "a pointer, batch_put_from, batch_get_into).")
      .def(
          "unregister_buffer",
          [](NativeStore& s, int64_t ptr) {
            auto c = s.client();
            py::gil_scoped_release g;
            ThrowIfError(c->UnregisterBuffer(
                reinterpret_cast<void*>(static_cast<uintptr_t>(ptr))));
          },
          py::arg("buffer_ptr"))
      .def(
          "put_from",
          [](NativeStore& s, const std::string& key, int64_t ptr, int64_t size,
             const MooncakeReplicateConfig* rc) {
            ReplicateConfig cfg = ToNative(rc);
            void* p = ToPtr(ptr);
            uint64_t n = ToSize(size);
            auto c = s.client();
            py::gil_scoped_release g;
            ThrowIfError(c->PutFrom(key, p, n, cfg));
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("size"),
          py::arg("config") = py::none(),
          "Zero-copy put from a registered buffer.")
      .def(
          "batch_put_from",
          [](NativeStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& ptrs,
             const std::vector<int64_t>& sizes,
             const MooncakeReplicateConfig* rc) {
            ReplicateConfig cfg = ToNative(rc);
            auto c = s.client();
            py::gil_scoped_release g;
            std::vector<int> out(keys.size(),
                                 static_cast<int>(ErrorCode::INVALID_PARAMS));
            if (ptrs.size() != keys.size() || sizes.size() != keys.size())
              return out;
            std::vector<std::string> k;
            std::vector<const void*> b;
            std::vector<uint64_t> n;
            std::vector<size_t> idx;
            for (size_t i = 0; i < keys.size(); ++i) {
              if (ptrs[i] <= 0 || sizes[i] < 0) continue;
              k.push_back(keys[i]);
              b.push_back(reinterpret_cast<const void*>(ptrs[i]));
              n.push_back(static_cast<uint64_t>(sizes[i]));
              idx.push_back(i);
            }
            auto r = c->BatchPutFrom(k, b, n, cfg);
            for (size_t j = 0; j < idx.size(); ++j)
              out[idx[j]] = static_cast<int>(r[j].code());
            return out;
          },
          py::arg("keys"), py::arg("buffer_ptrs"), py::arg("sizes"),
          py::arg("config") = py::none(),
          "Zero-copy batch put; a list of codes (0 = stored).")
      .def(
          "batch_get_into",
          [](NativeStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& ptrs,
             const std::vector<int64_t>& sizes) {
            auto c = s.client();
            py::gil_scoped_release g;
            std::vector<int64_t> out(
                keys.size(), static_cast<int>(ErrorCode::INVALID_PARAMS));
            if (ptrs.size() != keys.size() || sizes.size() != keys.size())
              return out;
            std::vector<std::string> k;
            std::vector<void*> b;
            std::vector<uint64_t> n;
            std::vector<size_t> idx;
            for (size_t i = 0; i < keys.size(); ++i) {
              if (ptrs[i] <= 0 || sizes[i] < 0) continue;
              k.push_back(keys[i]);
              b.push_back(reinterpret_cast<void*>(ptrs[i]));
              n.push_back(static_cast<uint64_t>(sizes[i]));
              idx.push_back(i);
            }
            auto r = c->BatchGetInto(k, b, n);
            for (size_t j = 0; j < idx.size(); ++j) {
              out[idx[j]] = r[j].ok() ? static_cast<int64_t>(r[j].value())
                                      : static_cast<int64_t>(r[j].code());
            }
            return out;
          },
          py::arg("keys"), py::arg("buffer_ptrs"), py::arg("sizes"),
          "Zero-copy batch read into registered buffers: bytes read per key, "
          "or a negative code.")
      // ---------------------------------------------------------- exist
      .def(
          "is_exist",
          [](NativeStore& s, const std::string& key, bool prefetch,
             bool grant_lease) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->IsExist(key, {.grant_lease = grant_lease,
                                      .prefetch_to_memory = prefetch});
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("key"), py::kw_only(), py::arg("prefetch_to_memory") = false,
          py::arg("grant_lease") = true,
          "Whether the key exists. prefetch_to_memory starts a best-effort "
          "SSD->DRAM promotion of an SSD-only key (needs "
          "enable_ssd_prefetch); grant_lease=False probes without a lease.")
      .def(
          "batch_is_exist",
          [](NativeStore& s, const std::vector<std::string>& keys,
             bool prefetch, bool grant_lease) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->BatchIsExist(keys, {.grant_lease = grant_lease,
                                            .prefetch_to_memory = prefetch});
            std::vector<bool> out;
            for (const auto& e : r) {
              ThrowIfError(e.status());
              out.push_back(e.value());
            }
            return out;
          },
          py::arg("keys"), py::kw_only(), py::arg("prefetch_to_memory") = false,
          py::arg("grant_lease") = true, "is_exist for many keys, one RPC.")
      .def(
          "get_size",
          [](NativeStore& s,
             const std::string& key) -> std::optional<uint64_t> {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->GetSize(key);
            if (r.code() == ErrorCode::OBJECT_NOT_FOUND) return std::nullopt;
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("key"), "Size in bytes, or None if the key does not exist.")
      // ---------------------------------------------------------- remove
      .def(
          "remove",
          [](NativeStore& s, const std::string& key, bool force) {
            auto c = s.client();
            py::gil_scoped_release g;
            Status st = c->Remove(key, force);
            if (st.code() == ErrorCode::OBJECT_NOT_FOUND) return false;
            ThrowIfError(st);
            return true;
          },
          py::arg("key"), py::arg("force") = false,
          "True if removed, False if it did not exist. A key a reader holds "
          "a lease on raises OBJECT_HAS_LEASE unless force.")
      .def(
          "remove_all",
          [](NativeStore& s, bool force) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->RemoveAll(force);
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("force") = false, "Removes every key; returns the count.")
      .def(
          "remove_by_regex",
          [](NativeStore& s, const std::string& regex, bool force) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->RemoveByRegex(regex, force);
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("regex"), py::arg("force") = false,
          "Removes the keys the ECMAScript regex matches as a whole.")
      // ---------------------------------------------------------- tiers
      .def(
          "get_tier_info",
          [](NativeStore& s,
             const std::string& key) -> std::optional<TierInfo> {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->BatchGetReplicaDesc({key})[0];
            if (r.code() == ErrorCode::OBJECT_NOT_FOUND) return std::nullopt;
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("key"),
          "Read-only tier lookup (no lease, no side effects); None if "
          "missing.")
      .def(
          "batch_get_tier_info",
          [](NativeStore& s, const std::vector<std::string>& keys) {
            auto c = s.client();
            py::gil_scoped_release g;
            std::vector<std::optional<TierInfo>> out;
            for (auto& r : c->BatchGetReplicaDesc(keys)) {
              if (r.code() == ErrorCode::OBJECT_NOT_FOUND) {
                out.emplace_back();
                continue;
              }
              ThrowIfError(r.status());
              out.emplace_back(std::move(r.value()));
            }
            return out;
          },
          py::arg("keys"), "get_tier_info for many keys, one RPC.")
      .def(
          "batch_prefetch_to_memory",
          [](NativeStore& s, const std::vector<std::string>& keys) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->BatchPrefetchToMemory(keys);
            ThrowIfError(r.status());
            return r.value();
          },
          py::arg("keys"),
          "Asks the master to move SSD-only keys to DRAM before their get "
          "(the router trigger). Raises UNAVAILABLE_IN_CURRENT_STATUS when "
          "the master has enable_prefetch_trigger off.")
      .def(
          "stat",
          [](NativeStore& s) {
            auto c = s.client();
            py::gil_scoped_release g;
            auto r = c->Stat();
            ThrowIfError(r.status());
            return r.value();
          },
          "Objects, evictions and segments of the cluster.")
      .def(
          "counters",
          [](NativeStore& s) { return CountersDict(s.client()->counters()); },
          "Bytes moved by this client, by path.")
      .def(
          "metrics_text",
          [](NativeStore& s) { return s.client()->MetricsText(); },
          "This client's metrics in Prometheus text format: latency of "
          "puts, gets and exists by data path (docs/metrics.md).")
      .def(
          "prefetch_stats",
          [](NativeStore& s) {
            return PrefetchDict(s.client()->prefetch_stats());
          },
          "Prefetch-on-exist counters of this client.")
      .def(
          "wait_prefetch_idle",
          [](NativeStore& s, int64_t timeout_ms) {
            auto c = s.client();
            py::gil_scoped_release g;
            return c->WaitPrefetchIdle(timeout_ms);
          },
          py::arg("timeout_ms"),
          "Waits until queued prefetch work has been handed over.");
}

void BindLocalCluster(py::module_& m) {
  const LocalClusterOptions defaults;
  py::class_<LocalCluster>(
      m, "LocalCluster",
      "A master and N nodes inside this process on loopback ports chosen by "
      "the kernel: the same code as kvpool-master and kvpool-node.")
      .def(
          py::init([](int num_nodes, uint64_t segment_size,
                      int64_t default_kv_lease_ttl,
                      double eviction_high_watermark_ratio,
                      double eviction_ratio, bool enable_ssd,
                      const std::string& ssd_root, uint64_t ssd_capacity_bytes,
                      bool offload_on_evict, bool promotion_on_hit,
                      bool enable_prefetch_trigger,
                      int64_t heartbeat_interval_ms) {
            LocalClusterOptions o;
            o.num_nodes = num_nodes;
            o.segment_size = segment_size;
            o.default_kv_lease_ttl = default_kv_lease_ttl;
            o.eviction_high_watermark_ratio = eviction_high_watermark_ratio;
            o.eviction_ratio = eviction_ratio;
            o.enable_ssd = enable_ssd;
            o.ssd_root = ssd_root;
            o.ssd_capacity_bytes = ssd_capacity_bytes;
            o.offload_on_evict = offload_on_evict;
            o.promotion_on_hit = promotion_on_hit;
            o.enable_prefetch_trigger = enable_prefetch_trigger;
            o.heartbeat_interval_ms = heartbeat_interval_ms;
            return std::make_unique<LocalCluster>(o);
          }),
          // Defaults are LocalClusterOptions' (one declaration per knob;
          // scripts/check_knobs.py checks these names and _kvpool.pyi).
          py::arg("num_nodes") = defaults.num_nodes,
          py::arg("segment_size") = defaults.segment_size, py::kw_only(),
          py::arg("default_kv_lease_ttl") = defaults.default_kv_lease_ttl,
          py::arg("eviction_high_watermark_ratio") =
              defaults.eviction_high_watermark_ratio,
          py::arg("eviction_ratio") = defaults.eviction_ratio,
          py::arg("enable_ssd") = defaults.enable_ssd,
          py::arg("ssd_root") = defaults.ssd_root,
          py::arg("ssd_capacity_bytes") = defaults.ssd_capacity_bytes,
          py::arg("offload_on_evict") = defaults.offload_on_evict,
          py::arg("promotion_on_hit") = defaults.promotion_on_hit,
          py::arg("enable_prefetch_trigger") = defaults.enable_prefetch_trigger,
          py::arg("heartbeat_interval_ms") = defaults.heartbeat_interval_ms)
      .def(
          "start",
          [](LocalCluster& c) {
            Status s;
            {
              py::gil_scoped_release g;
              s = c.Start();
            }
            ThrowIfError(s);
          },
          "Starts the master and the nodes; raises StoreError on failure.")
      .def("stop", &LocalCluster::Stop, Release())
      .def("__enter__",
           [](py::object self) {
             self.attr("start")();
             return self;
           })
      .def("__exit__",
           [](LocalCluster& c, py::args) {
             py::gil_scoped_release g;
             c.Stop();
           })
      .def_property_readonly("master_address", &LocalCluster::master_address)
      .def_property_readonly("node_ids",
                             [](LocalCluster& c) {
                               std::vector<std::string> ids;
                               for (size_t i = 0; i < c.num_nodes(); ++i)
                                 ids.push_back(c.node(i).node_id());
                               return ids;
                             })
      .def(
          "new_store",
          [](py::object self, py::kwargs kwargs) {
            return py::module_::import("kvpool").attr("Store")(
                self.attr("master_address"), **kwargs);
          },
          "A Store connected to this cluster (keyword arguments as Store).");
}

}  // namespace kvpool::py_bindings
