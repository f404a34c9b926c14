#include "python/src/py_common.h"

#include <pybind11/stl.h>

#include <sstream>

namespace kvpool::py_bindings {

namespace {

// kvpool.StoreError; created once at import, lives as long as the process.
PyObject* g_store_error = nullptr;

void RegisterStoreError(py::module_& m) {
  g_store_error = PyErr_NewExceptionWithDoc(
      "kvpool.StoreError",
      "A kvpool call failed. `code` is the (negative) Mooncake ErrorCode, "
      "`name` its name.",
      PyExc_RuntimeError, nullptr);
  py::object cls = py::reinterpret_borrow<py::object>(g_store_error);
  py::object property = py::module_::import("builtins").attr("property");
  cls.attr("code") = property(py::cpp_function(
      [](py::object self) { return py::tuple(self.attr("args"))[0]; }));
  cls.attr("name") = property(py::cpp_function([](py::object self) {
    int code = py::tuple(self.attr("args"))[0].cast<int>();
    return std::string(ErrorCodeName(static_cast<ErrorCode>(code)));
  }));
  cls.attr("__str__") = py::cpp_function(
      [](py::object self) { return py::str(py::tuple(self.attr("args"))[1]); },
      py::is_method(cls));
  m.attr("StoreError") = cls;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StoreException& e) {
      py::tuple args =
          py::make_tuple(static_cast<int>(e.status().code()), e.what());
      PyErr_SetObject(g_store_error, args.ptr());
    }
  });
}

py::dict ErrorCodes() {
  py::dict d;
  for (int v = 0; v >= -1300; --v) {
    const char* name = ErrorCodeName(static_cast<ErrorCode>(v));
    if (std::string(name) != "UNKNOWN_ERROR") d[name] = v;
  }
  return d;
}

std::string Repr(const compat::MooncakeReplicateConfig& c) {
  std::ostringstream o;
  o << "ReplicateConfig(replica_num=" << c.replica_num
    << ", with_soft_pin=" << (c.with_soft_pin ? "True" : "False")
    << ", soft_pin_action=" << static_cast<int>(c.soft_pin_action)
    << ", soft_pin_ttl_ms="
    << (c.soft_pin_ttl_ms ? std::to_string(*c.soft_pin_ttl_ms) : "None")
    << ", with_hard_pin=" << (c.with_hard_pin ? "True" : "False")
    << ", preferred_segment='" << c.preferred_segment << "'"
    << ", preferred_segments=[";
  for (size_t i = 0; i < c.preferred_segments.size(); ++i) {
    o << (i ? ", '" : "'") << c.preferred_segments[i] << "'";
  }
  o << "])";
  return o.str();
}

}  // namespace

BufferView::BufferView(const py::handle& obj, bool writable) {
  int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
    throw py::error_already_set();
  }
}

BufferView::~BufferView() { PyBuffer_Release(&view_); }

ReplicateConfig ToNative(const compat::MooncakeReplicateConfig* rc) {
  if (rc == nullptr) return ReplicateConfig{};
  auto r = compat::ToReplicateConfig(*rc);
  ThrowIfError(r.status());
  return r.value();
}

void BindCommon(py::module_& m) {
  RegisterStoreError(m);
  m.def("_error_codes", &ErrorCodes,
        "{name: value} of every ErrorCode (Mooncake's numbering).");

  py::enum_<compat::SoftPinAction>(
      m, "SoftPinAction",
      "What a put does to the object's soft pin (Mooncake's values). "
      "PRESERVE: as with_soft_pin says; ENABLE: pin; DISABLE: no pin.",
      py::arithmetic())
      .value("PRESERVE", compat::SoftPinAction::kPreserve)
      .value("ENABLE", compat::SoftPinAction::kEnable)
      .value("DISABLE", compat::SoftPinAction::kDisable);

  using RC = compat::MooncakeReplicateConfig;
  py::class_<RC>(m, "ReplicateConfig",
                 "Placement wishes of a put, honoured by the master.")
      .def(py::init<>())
      .def_readwrite("replica_num", &RC::replica_num,
                     "Copies in DRAM, on distinct nodes when possible (>= 1).")
      .def_readwrite("with_soft_pin", &RC::with_soft_pin,
                     "Evicted only after every unpinned object.")
      .def_readwrite("soft_pin_action", &RC::soft_pin_action)
      .def_property(
          "soft_pin_ttl_ms",
          [](const RC& c) -> py::object {
            if (!c.soft_pin_ttl_ms) return py::none();
            return py::int_(*c.soft_pin_ttl_ms);
          },
          [](RC& c, py::object v) {
            // Mooncake's field is an optional unsigned 64-bit integer: None,
            // or an int in [0, 2^64); anything else is a TypeError.
            if (v.is_none()) {
              c.soft_pin_ttl_ms.reset();
              return;
            }
            if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) {
              throw py::type_error("soft_pin_ttl_ms must be None or an int");
            }
            py::int_ i = v.cast<py::int_>();
            if (i < py::int_(0) || i > py::int_(~uint64_t{0})) {
              throw py::type_error(
                  "soft_pin_ttl_ms must fit in an unsigned 64-bit integer");
            }
            c.soft_pin_ttl_ms = i.cast<uint64_t>();
          },
          "None: the master's default_kv_soft_pin_ttl; 0: no soft pin; > 0: "
          "this TTL (renewed by each get). Only with a soft pin (ENABLE, or "
          "PRESERVE with with_soft_pin), else puts answer INVALID_PARAMS.")
      .def_readwrite("group_ids", &RC::group_ids,
                     "Mooncake's object groups: accepted and kept; kvpool "
                     "places and evicts each key on its own.")
      .def_readwrite("with_hard_pin", &RC::with_hard_pin, "Never evicted.")
      .def_readwrite("preferred_segment", &RC::preferred_segment,
                     "Node id to place the first copy on (a hosting "
                     "MooncakeDistributedStore's get_hostname()).")
      .def_readwrite("preferred_segments", &RC::preferred_segments)
      .def_readwrite("prefer_alloc_in_same_node",
                     &RC::prefer_alloc_in_same_node,
                     "Accepted for compatibility; unused.")
      .def("__repr__", &Repr)
      .def("__str__", &Repr);

  py::class_<ReplicaInfo>(m, "ReplicaInfo", "One replica of an object.")
      .def_property_readonly("kind",
                             [](const ReplicaInfo& r) {
                               return r.kind == ReplicaInfo::Kind::kMemory
                                          ? "memory"
                                          : "local_disk";
                             })
      .def_readonly("complete", &ReplicaInfo::complete)
      .def_readonly("node_id", &ReplicaInfo::node_id)
      .def_readonly("data_endpoint", &ReplicaInfo::data_endpoint)
      .def_readonly("segment_id", &ReplicaInfo::segment_id)
      .def_readonly("offset", &ReplicaInfo::offset)
      .def("__repr__", [](const ReplicaInfo& r) {
        return "ReplicaInfo(kind='" +
               std::string(r.kind == ReplicaInfo::Kind::kMemory
                               ? "memory"
                               : "local_disk") +
               "', complete=" + (r.complete ? "True" : "False") +
               ", node_id='" + r.node_id + "')";
      });

  py::class_<TierInfo>(m, "TierInfo",
                       "Result of the read-only tier lookup of one key.")
      .def_readonly("size", &TierInfo::size)
      .def_readonly("lease_remaining_ms", &TierInfo::lease_remaining_ms)
      .def_readonly("replicas", &TierInfo::replicas)
      .def_property_readonly(
          "best_tier", &TierInfo::BestTier,
          "'memory', 'local_disk' or 'processing': where a get reads from.")
      .def("__repr__", [](const TierInfo& t) {
        return "TierInfo(size=" + std::to_string(t.size) + ", best_tier='" +
               t.BestTier() +
               "', replicas=" + std::to_string(t.replicas.size()) + ")";
      });

  py::enum_<PrefetchToMemoryStatus>(m, "PrefetchToMemoryStatus",
                                    "Per-key answer of "
                                    "batch_prefetch_to_memory.")
      .value("IN_MEMORY", PrefetchToMemoryStatus::kInMemory)
      .value("QUEUED", PrefetchToMemoryStatus::kQueued)
      .value("THROTTLED_WATERMARK", PrefetchToMemoryStatus::kThrottledWatermark)
      .value("THROTTLED_CAP", PrefetchToMemoryStatus::kThrottledCap)
      .value("NO_LOCAL_DISK", PrefetchToMemoryStatus::kNoLocalDisk)
      .value("NOT_FOUND", PrefetchToMemoryStatus::kNotFound);

  py::class_<SegmentReport>(m, "SegmentReport")
      .def_readonly("segment_id", &SegmentReport::segment_id)
      .def_readonly("node_id", &SegmentReport::node_id)
      .def_readonly("kind", &SegmentReport::kind)
      .def_readonly("capacity", &SegmentReport::capacity)
      .def_readonly("used", &SegmentReport::used)
      .def_readonly("data_endpoint", &SegmentReport::data_endpoint);

  py::class_<ClusterReport>(m, "ClusterReport")
      .def_readonly("objects", &ClusterReport::objects)
      .def_readonly("memory_replicas", &ClusterReport::memory_replicas)
      .def_readonly("evictions", &ClusterReport::evictions)
      .def_readonly("segments", &ClusterReport::segments);
}

}  // namespace kvpool::py_bindings
