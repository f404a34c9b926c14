// Pieces shared by the bindings of the _kvpool module: the StoreError
// exception, buffer access, and the bindings of the value types.
#ifndef KVPOOL_PYTHON_PY_COMMON_H_
#define KVPOOL_PYTHON_PY_COMMON_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "capi/compat_config.h"
#include "kvpool/options.h"
#include "kvpool/status.h"

namespace kvpool::py_bindings {

namespace py = pybind11;

// Thrown by binding code (with or without the GIL) and translated into
// kvpool.StoreError(code, message) by a registered translator.
class StoreException : public std::runtime_error {
 public:
  explicit StoreException(Status status)
      : std::runtime_error(status.ToString()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StoreException(s);
}

// A contiguous view of a bytes-like object, released with the object. Holds
// a reference, so the memory stays valid while the GIL is released.
class BufferView {
 public:
  // Throws TypeError (not bytes-like) or BufferError (not contiguous).
  BufferView(const py::handle& obj, bool writable);
  ~BufferView();
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  char* data() const { return static_cast<char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

// None -> the defaults; otherwise the given config. INVALID_PARAMS via
// StoreException when the config is invalid.
ReplicateConfig ToNative(const compat::MooncakeReplicateConfig* rc);

// StoreError, ErrorCode values, ReplicateConfig, SoftPinAction and the
// result types of the tier lookup and of Stat().
void BindCommon(py::module_& m);
void BindStore(py::module_& m);
void BindLocalCluster(py::module_& m);
void BindMooncake(py::module_& m);

}  // namespace kvpool::py_bindings

#endif  // KVPOOL_PYTHON_PY_COMMON_H_
