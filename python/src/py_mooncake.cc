// kvpool.mooncake.MooncakeDistributedStore: Mooncake Store's Python class
// (same method names, argument order, defaults and return conventions) over
// compat::MooncakeStore. Nothing here raises for a failed store operation:
// results are ints (0 / positive, or a negative Mooncake ErrorCode), b"" or
// None, as Mooncake returns them. Every blocking call releases the GIL.
#include <pybind11/stl.h>

#include <map>
#include <memory>

#include "capi/compat_store.h"
#include "python/src/py_common.h"

namespace kvpool::py_bindings {

namespace {

using compat::BufferHandle;
using compat::MooncakeReplicateConfig;
using compat::MooncakeStore;
using Release = py::call_guard<py::gil_scoped_release>;

constexpr int kInvalid = static_cast<int>(ErrorCode::INVALID_PARAMS);

// Mooncake's ReplicaStatus; kvpool reports COMPLETE or PROCESSING.
enum class ReplicaStatus {
  kUndefined = 0,
  kInitialized = 1,
  kProcessing = 2,
  kComplete = 3,
  kRemoved = 4,
  kFailed = 5,
};

struct BufferDescriptor {
  uint64_t size = 0;
  uint64_t buffer_address = 0;  // offset of the value in its segment
  std::string protocol = "tcp";
  std::string transport_endpoint;  // the holder's data endpoint
};

struct MemoryDescriptor {
  BufferDescriptor buffer_descriptor;
};

struct DiskDescriptor {
  std::string file_path;  // "kvpool-ssd://<node id>": one log, no file each
  uint64_t object_size = 0;
};

struct ReplicaDescriptor {
  ReplicaStatus status = ReplicaStatus::kUndefined;
  bool memory = true;
  std::string node_id;
  MemoryDescriptor mem;
  DiskDescriptor disk;
};

std::vector<ReplicaDescriptor> Describe(const TierInfo& t) {
  std::vector<ReplicaDescriptor> out;
  for (const auto& r : t.replicas) {
    ReplicaDescriptor d;
    d.status =
        r.complete ? ReplicaStatus::kComplete : ReplicaStatus::kProcessing;
    d.memory = r.kind == ReplicaInfo::Kind::kMemory;
    d.node_id = r.node_id;
    if (d.memory) {
      d.mem.buffer_descriptor = {t.size, r.offset, "tcp", r.data_endpoint};
    } else {
      d.disk = {"kvpool-ssd://" + r.node_id, t.size};
    }
    out.push_back(std::move(d));
  }
  return out;
}

// Pointers arrive as Python ints; a negative one is invalid, not a crash.
void* Ptr(int64_t p) {
  return p <= 0 ? nullptr : reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

const MooncakeReplicateConfig& Or(const MooncakeReplicateConfig* rc) {
  static const MooncakeReplicateConfig kDefault;
  return rc ? *rc : kDefault;
}

// The config of a call that takes *parts: pybind11 drops the None default
// of a pointer argument after py::args, so it arrives as an object.
MooncakeReplicateConfig ConfigArg(const py::object& o) {
  if (o.is_none()) return MooncakeReplicateConfig{};
  return o.cast<MooncakeReplicateConfig>();
}

// Read-only views of Python bytes-like objects (held while the spans are
// used) and their spans, for the puts of several values or parts.
class Parts {
 public:
  template <typename Seq>
  explicit Parts(const Seq& objects) {
    for (const auto& o : objects) {
      views_.push_back(std::make_unique<BufferView>(o, false));
      spans_.emplace_back(views_.back()->data(), views_.back()->size());
    }
  }
  const std::vector<MooncakeStore::Bytes>& spans() const { return spans_; }

 private:
  std::vector<std::unique_ptr<BufferView>> views_;
  std::vector<MooncakeStore::Bytes> spans_;
};

// Holds the store so that BufferHandles and calls in flight outlive close().
struct PyStore {
  std::shared_ptr<MooncakeStore> impl = std::make_shared<MooncakeStore>();
};

int SetupPositional(PyStore& s, const std::string& local_hostname,
                    const std::string& metadata_server,
                    uint64_t global_segment_size, uint64_t local_buffer_size,
                    const std::string& protocol,
                    const std::string& rdma_devices,
                    const std::string& master_server_addr,
                    bool enable_ssd_offload,
                    const std::string& ssd_offload_path,
                    const std::string& tenant_id) {
  compat::SetupConfig c;
  c.enable_ssd_offload = enable_ssd_offload;
  c.ssd_offload_path = ssd_offload_path;
  c.tenant = tenant_id;
  c.local_hostname = local_hostname;
  c.metadata_server = metadata_server;
  c.global_segment_size = global_segment_size;
  c.local_buffer_size = local_buffer_size;
  c.protocol = protocol;
  c.rdma_devices = rdma_devices;
  c.master_server_addr = master_server_addr;
  return s.impl->Setup(c);
}

py::object HandleOrNone(std::shared_ptr<BufferHandle> h) {
  if (!h) return py::none();
  return py::cast(std::move(h));
}

}  // namespace

void BindMooncake(py::module_& m) {
  py::enum_<ReplicaStatus>(m, "ReplicaStatus")
      .value("UNDEFINED", ReplicaStatus::kUndefined)
      .value("INITIALIZED", ReplicaStatus::kInitialized)
      .value("PROCESSING", ReplicaStatus::kProcessing)
      .value("COMPLETE", ReplicaStatus::kComplete)
      .value("REMOVED", ReplicaStatus::kRemoved)
      .value("FAILED", ReplicaStatus::kFailed);

  py::class_<BufferDescriptor>(m, "BufferDescriptor")
      .def_readonly("size", &BufferDescriptor::size)
      .def_readonly("buffer_address", &BufferDescriptor::buffer_address)
      .def_readonly("protocol", &BufferDescriptor::protocol)
      .def_readonly("transport_endpoint", &BufferDescriptor::transport_endpoint)
      .def("__repr__", [](const BufferDescriptor& d) {
        return "<BufferDescriptor size=" + std::to_string(d.size) +
               " buffer_address=" + std::to_string(d.buffer_address) +
               " transport_endpoint=" + d.transport_endpoint + ">";
      });
  py::class_<MemoryDescriptor>(m, "MemoryDescriptor")
      .def_readonly("buffer_descriptor", &MemoryDescriptor::buffer_descriptor);
  py::class_<DiskDescriptor>(m, "DiskDescriptor")
      .def_readonly("file_path", &DiskDescriptor::file_path)
      .def_readonly("object_size", &DiskDescriptor::object_size);
  py::class_<ReplicaDescriptor>(m, "ReplicaDescriptor")
      .def_readonly("status", &ReplicaDescriptor::status)
      .def_readonly("node_id", &ReplicaDescriptor::node_id)
      .def("is_memory_replica",
           [](const ReplicaDescriptor& d) { return d.memory; })
      .def("is_disk_replica",
           [](const ReplicaDescriptor& d) { return !d.memory; })
      .def(
          "get_memory_descriptor",
          [](const ReplicaDescriptor& d) -> const MemoryDescriptor& {
            if (!d.memory) throw py::value_error("not a memory replica");
            return d.mem;
          },
          py::return_value_policy::reference_internal)
      .def(
          "get_disk_descriptor",
          [](const ReplicaDescriptor& d) -> const DiskDescriptor& {
            if (d.memory) throw py::value_error("not a disk replica");
            return d.disk;
          },
          py::return_value_policy::reference_internal);

  py::class_<BufferHandle, std::shared_ptr<BufferHandle>>(
      m, "BufferHandle", py::buffer_protocol(),
      "The bytes of one value (get_buffer), readable through the buffer "
      "protocol without a copy; freed when the last reference goes.")
      .def("ptr",
           [](const BufferHandle& h) {
             return reinterpret_cast<uintptr_t>(h.data());
           })
      .def("size", &BufferHandle::size)
      .def("__len__", &BufferHandle::size)
      .def_buffer([](BufferHandle& h) {
        return py::buffer_info(h.data(), 1, "B", 1,
                               {static_cast<py::ssize_t>(h.size())}, {1});
      });

  py::class_<PyStore>(m, "MooncakeDistributedStore",
                      "Mooncake Store's MooncakeDistributedStore on kvpool.")
      .def(py::init<>())
      .def(
          "setup",
          [](PyStore& s, const std::string& local_hostname,
             const std::string& metadata_server, uint64_t global_segment_size,
             uint64_t local_buffer_size, const std::string& protocol,
             const std::string& rdma_devices,
             const std::string& master_server_addr, py::object /*engine*/,
             bool enable_ssd_offload, const std::string& ssd_offload_path,
             const std::string& tenant_id) {
            py::gil_scoped_release g;
            return SetupPositional(
                s, local_hostname, metadata_server, global_segment_size,
                local_buffer_size, protocol, rdma_devices, master_server_addr,
                enable_ssd_offload, ssd_offload_path, tenant_id);
          },
          py::arg("local_hostname"), py::arg("metadata_server"),
          py::arg("global_segment_size") = 16ull << 20,
          py::arg("local_buffer_size") = 16ull << 20,
          py::arg("protocol") = "tcp", py::arg("rdma_devices") = "",
          py::arg("master_server_addr") = "127.0.0.1:50051",
          py::arg("engine") = py::none(), py::kw_only(),
          py::arg("enable_ssd_offload") = false,
          py::arg("ssd_offload_path") = "", py::arg("tenant_id") = "default",
          "Connects to the master and, when global_segment_size > 0, hosts a "
          "segment of that size in this process (spilling to SSD under "
          "ssd_offload_path when enable_ssd_offload). metadata_server, "
          "protocol, rdma_devices and engine are accepted and unused. 0 or a "
          "negative code.")
      .def(
          "setup",
          [](PyStore& s, const py::dict& config) {
            std::map<std::string, std::string> d;
            for (auto item : config) {
              d[py::str(item.first)] = py::str(item.second);
            }
            py::gil_scoped_release g;
            return s.impl->SetupFromDict(d);
          },
          py::arg("config"),
          "setup from a dict (Mooncake's keys, plus kvpool's: tenant, "
          "transport, rpc_timeout_ms, data_connect_timeout_ms, "
          "data_io_timeout_ms, lease_cache, enable_ssd_prefetch, "
          "heartbeat_interval_ms, enable_ssd_offload, ssd_offload_path, "
          "ssd_capacity_bytes, credential_file, cluster_secret_file, "
          "tls_ca_file, tls_cert_file, tls_key_file).")
      .def(
          "close", [](PyStore& s) { return s.impl->Close(); }, Release())
      .def(
          "get_hostname", [](PyStore& s) { return s.impl->GetHostname(); },
          "'host:port' of the hosted segment (its node id); 'host:0' for a "
          "pure client.")
      .def(
          "health_check", [](PyStore& s) { return s.impl->HealthCheck(); },
          Release(), "0 when the master answers and the segment is mounted.")
      // ------------------------------------------------- mount_segment
      .def(
          "mount_segment",
          [](PyStore& s, const std::string& path, int64_t size, int64_t offset,
             const std::string& /*protocol*/, const std::string& /*location*/) {
            MooncakeStore::MountResult r;
            {
              py::gil_scoped_release g;
              r = s.impl->MountSegment(path, size, offset);
            }
            py::dict d;
            d["ret"] = r.ret;
            d["segment_ids"] = py::cast(r.segment_ids);
            return d;
          },
          py::arg("path"), py::arg("size"), py::arg("offset") = 0,
          py::arg("protocol") = "tcp", py::arg("location") = "",
          "Adds [offset, offset + size) of the file at path (offset a "
          "multiple of the page size) to the pool as a further segment of "
          "this hosting store, served over TCP only. {'ret': 0 or -1, "
          "'segment_ids': [id]}; protocol and location are accepted and "
          "unused.")
      .def(
          "unmount_segment",
          [](PyStore& s, const std::vector<std::string>& ids,
             int64_t grace_period_seconds) {
            return s.impl->UnmountSegment(ids, grace_period_seconds);
          },
          py::arg("segment_ids"), py::arg("grace_period_seconds") = 0,
          Release(),
          "Takes mount_segment's segments out of the pool (their values "
          "become misses) and stops using the file. 0, or the first error "
          "(-1 for an unknown id). Unmounts at once whatever the grace "
          "period.")
      .def(
          "allocate_and_mount_segment",
          [](PyStore& s, int64_t size, const std::string& /*protocol*/,
             const std::string& /*location*/) {
            MooncakeStore::MountResult r;
            {
              py::gil_scoped_release g;
              r = s.impl->AllocateAndMountSegment(size);
            }
            py::dict d;
            d["ret"] = r.ret;
            d["segment_ids"] = py::cast(r.segment_ids);
            d["allocated_size"] = r.allocated_size;
            return d;
          },
          py::arg("size"), py::arg("protocol") = "tcp",
          py::arg("location") = "",
          "Adds size bytes (rounded up to the page size) of new memory to "
          "the pool as a further segment of this hosting store. {'ret', "
          "'segment_ids', 'allocated_size'}.")
      .def(
          "unmount_and_free_segment",
          [](PyStore& s, const std::vector<std::string>& ids,
             int64_t grace_period_seconds) {
            return s.impl->UnmountAndFreeSegment(ids, grace_period_seconds);
          },
          py::arg("segment_ids"), py::arg("grace_period_seconds") = 0,
          Release(),
          "Takes allocate_and_mount_segment's segments out of the pool and "
          "frees their memory. 0, or the first error.")
      // ---------------------------------------------------------- puts
      .def(
          "put",
          [](PyStore& s, const std::string& key, py::object value,
             const MooncakeReplicateConfig* rc) {
            BufferView v(value, false);
            MooncakeReplicateConfig cfg = Or(rc);
            py::gil_scoped_release g;
            return s.impl->Put(key, {v.data(), v.size()}, cfg);
          },
          py::arg("key"), py::arg("value"), py::arg("config") = py::none())
      .def(
          "upsert",
          [](PyStore& s, const std::string& key, py::object value,
             const MooncakeReplicateConfig* rc) {
            BufferView v(value, false);
            MooncakeReplicateConfig cfg = Or(rc);
            py::gil_scoped_release g;
            return s.impl->Upsert(key, {v.data(), v.size()}, cfg);
          },
          py::arg("key"), py::arg("value"), py::arg("config") = py::none())
      .def(
          "put_parts",
          [](PyStore& s, const std::string& key, py::args parts,
             py::object config) {
            Parts views(parts);
            MooncakeReplicateConfig cfg = ConfigArg(config);
            py::gil_scoped_release g;
            return s.impl->PutParts(key, views.spans(), cfg);
          },
          py::arg("key"), py::arg("config") = py::none(),
          "put_parts(key, *parts, config=None): one object from the parts.")
      .def(
          "upsert_parts",
          [](PyStore& s, const std::string& key, py::args parts,
             py::object config) {
            Parts views(parts);
            MooncakeReplicateConfig cfg = ConfigArg(config);
            py::gil_scoped_release g;
            return s.impl->UpsertParts(key, views.spans(), cfg);
          },
          py::arg("key"), py::arg("config") = py::none(),
          "upsert_parts(key, *parts, config=None): replaces the object with "
          "the parts.")
      .def(
          "upsert_batch",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const MooncakeReplicateConfig* rc) {
            Parts views(values);
            MooncakeReplicateConfig cfg = Or(rc);
            py::gil_scoped_release g;
            return s.impl->UpsertBatch(keys, views.spans(), cfg);
          },
          py::arg("keys"), py::arg("values"), py::arg("config") = py::none(),
          "0 when every key was stored, else the first error.")
      .def(
          "put_batch",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const MooncakeReplicateConfig* rc) {
            Parts views(values);
            MooncakeReplicateConfig cfg = Or(rc);
            py::gil_scoped_release g;
            return s.impl->PutBatch(keys, views.spans(), cfg);
          },
          py::arg("keys"), py::arg("values"), py::arg("config") = py::none(),
          "0 when every key was stored, else the first error.")
      // ---------------------------------------------------------- gets
      .def(
          "get",
          [](PyStore& s, const std::string& key) {
            auto r = [&] {
              py::gil_scoped_release g;
              return s.impl->Get(key);
            }();
            return r.ok() ? py::bytes(r.value()) : py::bytes();
          },
          py::arg("key"), "The value; b'' on a miss or an error.")
      .def(
          "get_batch",
          [](PyStore& s, const std::vector<std::string>& keys) {
            std::vector<std::shared_ptr<BufferHandle>> hs;
            {
              py::gil_scoped_release g;
              hs = s.impl->BatchGetBuffer(keys);
            }
            py::list out;
            for (const auto& h : hs) {
              out.append(h ? py::bytes(reinterpret_cast<const char*>(h->data()),
                                       h->size())
                           : py::bytes());
            }
            return out;
          },
          py::arg("keys"), "Values; b'' for a miss.")
      .def(
          "get_buffer",
          [](PyStore& s, const std::string& key) {
            std::shared_ptr<BufferHandle> h;
            {
              py::gil_scoped_release g;
              h = s.impl->GetBuffer(key);
            }
            return HandleOrNone(std::move(h));
          },
          py::arg("key"), "A BufferHandle, or None on a miss.")
      .def(
          "batch_get_buffer",
          [](PyStore& s, const std::vector<std::string>& keys) {
            std::vector<std::shared_ptr<BufferHandle>> hs;
            {
              py::gil_scoped_release g;
              hs = s.impl->BatchGetBuffer(keys);
            }
            py::list out;
            for (auto& h : hs) out.append(HandleOrNone(std::move(h)));
            return out;
          },
          py::arg("keys"), "BufferHandles, None for a miss.")
      .def(
          "get_size",
          [](PyStore& s, const std::string& key) {
            return s.impl->GetSize(key);
          },
          py::arg("key"), Release(), "Bytes, or a negative code.")
      .def(
          "is_exist",
          [](PyStore& s, const std::string& key) {
            return s.impl->IsExist(key);
          },
          py::arg("key"), Release(), "1 exists, 0 does not, -1 error.")
      .def(
          "batch_is_exist",
          [](PyStore& s, const std::vector<std::string>& keys) {
            return s.impl->BatchIsExist(keys);
          },
          py::arg("keys"), Release(), "1 / 0 / -1 per key.")
      // ---------------------------------------------------------- remove
      .def(
          "remove",
          [](PyStore& s, const std::string& key, bool force) {
            return s.impl->Remove(key, force);
          },
          py::arg("key"), py::arg("force") = false, Release())
      .def(
          "batch_remove",
          [](PyStore& s, const std::vector<std::string>& keys, bool force) {
            return s.impl->BatchRemove(keys, force);
          },
          py::arg("keys"), py::arg("force") = false, Release())
      .def(
          "remove_all",
          [](PyStore& s, bool force) { return s.impl->RemoveAll(force); },
          py::arg("force") = false, Release(),
          "Objects removed, or a negative code.")
      .def(
          "remove_by_regex",
          [](PyStore& s, const std::string& regex, bool force) {
            return s.impl->RemoveByRegex(regex, force);
          },
          py::arg("regex_pattern"), py::arg("force") = false, Release(),
          "Objects removed, or a negative code.")
      // ---------------------------------------------------------- zero copy
      .def(
          "register_buffer",
          [](PyStore& s, int64_t ptr, int64_t size) {
            return s.impl->RegisterBuffer(Ptr(ptr), size);
          },
          py::arg("buffer_ptr"), py::arg("size"), Release())
      .def(
          "unregister_buffer",
          [](PyStore& s, int64_t ptr) {
            return s.impl->UnregisterBuffer(Ptr(ptr));
          },
          py::arg("buffer_ptr"), Release())
      .def(
          "put_from",
          [](PyStore& s, const std::string& key, int64_t ptr, int64_t size,
             const MooncakeReplicateConfig* rc) {
            return s.impl->PutFrom(key, Ptr(ptr), size, Or(rc));
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("size"),
          py::arg("config") = py::none(), Release())
      .def(
          "get_into",
          [](PyStore& s, const std::string& key, int64_t ptr, int64_t size) {
            return s.impl->GetInto(key, Ptr(ptr), size);
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("size"), Release(),
          "Bytes read, or a negative code.")
      .def(
          "batch_put_from",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& ptrs,
             const std::vector<int64_t>& sizes,
             const MooncakeReplicateConfig* rc) {
            std::vector<const void*> b;
            for (int64_t p : ptrs) b.push_back(Ptr(p));
            return s.impl->BatchPutFrom(keys, b, sizes, Or(rc));
          },
          py::arg("keys"), py::arg("buffer_ptrs"), py::arg("sizes"),
          py::arg("config") = py::none(), Release())
      .def(
          "batch_get_into",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& ptrs,
             const std::vector<int64_t>& sizes) {
            std::vector<void*> b;
            for (int64_t p : ptrs) b.push_back(Ptr(p));
            return s.impl->BatchGetInto(keys, b, sizes);
          },
          py::arg("keys"), py::arg("buffer_ptrs"), py::arg("sizes"), Release(),
          "Bytes read per key, or a negative code.")
      .def(
          "upsert_from",
          [](PyStore& s, const std::string& key, int64_t ptr, int64_t size,
             const MooncakeReplicateConfig* rc) {
            return s.impl->BatchUpsertFrom({key}, {Ptr(ptr)}, {size},
                                           Or(rc))[0];
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("size"),
          py::arg("config") = py::none(), Release())
      .def(
          "batch_upsert_from",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& ptrs,
             const std::vector<int64_t>& sizes,
             const MooncakeReplicateConfig* rc) {
            std::vector<const void*> b;
            for (int64_t p : ptrs) b.push_back(Ptr(p));
            return s.impl->BatchUpsertFrom(keys, b, sizes, Or(rc));
          },
          py::arg("keys"), py::arg("buffer_ptrs"), py::arg("sizes"),
          py::arg("config") = py::none(), Release())
      .def(
          "put_from_with_metadata",
          [](PyStore& s, const std::string& key, int64_t ptr, int64_t meta_ptr,
             int64_t size, int64_t meta_size,
             const MooncakeReplicateConfig* rc) {
            return s.impl->PutFromWithMetadata(key, Ptr(ptr), Ptr(meta_ptr),
                                               size, meta_size, Or(rc));
          },
          py::arg("key"), py::arg("buffer_ptr"), py::arg("metadata_buffer_ptr"),
          py::arg("size"), py::arg("metadata_size"),
          py::arg("config") = py::none(), Release(),
          "The object is the metadata followed by the data.")
      .def(
          "batch_put_from_multi_buffers",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<std::vector<int64_t>>& ptrs,
             const std::vector<std::vector<int64_t>>& sizes,
             const MooncakeReplicateConfig* rc) {
            std::vector<std::vector<const void*>> b(ptrs.size());
            for (size_t i = 0; i < ptrs.size(); ++i) {
              for (int64_t p : ptrs[i]) b[i].push_back(Ptr(p));
            }
            return s.impl->BatchPutFromMultiBuffers(keys, b, sizes, Or(rc));
          },
          py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
          py::arg("config") = py::none(), Release(),
          "Key i's object is the concatenation of all_buffer_ptrs[i] (sizes "
          "all_sizes[i]), written with no staging copy. 0 or a negative code "
          "per key.")
      .def(
          "batch_get_into_multi_buffers",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<std::vector<int64_t>>& ptrs,
             const std::vector<std::vector<int64_t>>& sizes,
             bool /*prefer_alloc_in_same_node*/) {
            std::vector<std::vector<void*>> b(ptrs.size());
            for (size_t i = 0; i < ptrs.size(); ++i) {
              for (int64_t p : ptrs[i]) b[i].push_back(Ptr(p));
            }
            return s.impl->BatchGetIntoMultiBuffers(keys, b, sizes);
          },
          py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
          py::arg("prefer_alloc_in_same_node") = false, Release(),
          "Key i's object scattered over its buffers in order: its size, or "
          "a negative code (INVALID_PARAMS when the buffers are too small).")
      .def(
          "batch_get_into_multi_buffer_ranges",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<std::vector<int64_t>>& ptrs,
             const std::vector<std::vector<int64_t>>& sizes,
             const std::vector<std::vector<int64_t>>& offsets) {
            std::vector<std::vector<void*>> b(ptrs.size());
            for (size_t i = 0; i < ptrs.size(); ++i) {
              for (int64_t p : ptrs[i]) b[i].push_back(Ptr(p));
            }
            return s.impl->BatchGetIntoMultiBufferRanges(keys, b, sizes,
                                                         offsets);
          },
          py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
          py::arg("all_object_offsets"), Release(),
          "Reads only all_sizes[i][j] bytes at all_object_offsets[i][j] of "
          "key i into all_buffer_ptrs[i][j]: bytes read per key, or a "
          "negative code.")
      .def(
          "batch_put_session_start",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<int64_t>& sizes,
             const MooncakeReplicateConfig* rc) {
            return s.impl->BatchPutSessionStart(keys, sizes, Or(rc));
          },
          py::arg("keys"), py::arg("sizes"), py::arg("config") = py::none(),
          Release(),
          "Reserves sizes[i] bytes for key i (not readable until "
          "batch_put_session_end). 0 or a negative code per key.")
      .def(
          "batch_put_from_multi_buffer_ranges",
          [](PyStore& s, const std::vector<std::string>& keys,
             const std::vector<std::vector<int64_t>>& ptrs,
             const std::vector<std::vector<int64_t>>& sizes,
             const std::vector<std::vector<int64_t>>& offsets) {
            std::vector<std::vector<const void*>> b(ptrs.size());
            for (size_t i = 0; i < ptrs.size(); ++i) {
              for (int64_t p : ptrs[i]) b[i].push_back(Ptr(p));
            }
            return s.impl->BatchPutFromMultiBufferRanges(keys, b, sizes,
                                                         offsets);
          },
          py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
          py::arg("all_dst_offsets"), Release(),
          "Writes all_sizes[i][j] bytes from all_buffer_ptrs[i][j] at "
          "all_dst_offsets[i][j] of key i's open put session: bytes written "
          "per key, or a negative code.")
      .def(
          "batch_put_session_end",
          [](PyStore& s, const std::vector<std::string>& keys) {
            return s.impl->BatchPutSessionEnd(keys);
          },
          py::arg("keys"), Release())
      .def(
          "batch_put_session_revoke",
          [](PyStore& s, const std::vector<std::string>& keys) {
            return s.impl->BatchPutSessionRevoke(keys);
          },
          py::arg("keys"), Release())
      .def(
          "batch_get_session_start",
          [](PyStore& s, const std::vector<std::string>& keys) {
            return s.impl->BatchGetSessionStart(keys);
          },
          py::arg("keys"), Release(),
          "One lookup and lease for the ranges reads of these keys until "
          "batch_get_session_end (LEASE_EXPIRED once the lease ends).")
      .def(
          "batch_get_session_end",
          [](PyStore& s, const std::vector<std::string>& keys) {
            return s.impl->BatchGetSessionEnd(keys);
          },
          py::arg("keys"), Release())
      .def(
          "get_into_ranges",
          [](PyStore& s, const std::vector<int64_t>& ptrs,
             const std::vector<std::vector<std::string>>& keys,
             const MooncakeStore::Ranges& dst, const MooncakeStore::Ranges& src,
             const MooncakeStore::Ranges& sizes) {
            std::vector<void*> b;
            for (int64_t p : ptrs) b.push_back(Ptr(p));
            return s.impl->GetIntoRanges(b, keys, dst, src, sizes);
          },
          py::arg("buffer_ptrs"), py::arg("all_keys"),
          py::arg("all_dst_offsets"), py::arg("all_src_offsets"),
          py::arg("all_sizes"), Release(),
          "results[i][j][k]: bytes of fragment k of key j copied into buffer "
          "i, or a negative code.")
      // ---------------------------------------------------------- tiers
      .def(
          "get_replica_desc",
          [](PyStore& s, const std::string& key) {
            auto r = s.impl->BatchGetReplicaDesc({key})[0];
            return r.ok() ? Describe(r.value())
                          : std::vector<ReplicaDescriptor>{};
          },
          py::arg("key"), Release(),
          "Replica descriptors (empty when the key is missing).")
      .def(
          "batch_get_replica_desc",
          [](PyStore& s, const std::vector<std::string>& keys) {
            auto r = s.impl->BatchGetReplicaDesc(keys);
            std::map<std::string, std::vector<ReplicaDescriptor>> out;
            for (size_t i = 0; i < keys.size(); ++i) {
              if (r[i].ok()) out[keys[i]] = Describe(r[i].value());
            }
            return out;
          },
          py::arg("keys"), Release(),
          "{key: [ReplicaDescriptor]} for the keys that exist.");
}

}  // namespace kvpool::py_bindings
