// The _kvpool extension module; the kvpool package re-exports it.
#include "common/absl_runtime.h"
#include "python/src/py_common.h"

PYBIND11_MODULE(_kvpool, m) {
  m.doc() = "kvpool: a distributed tiered KV-cache store (native module).";
  kvpool::ConfigureAbslRuntime();
  kvpool::py_bindings::BindCommon(m);
  kvpool::py_bindings::BindStore(m);
  kvpool::py_bindings::BindLocalCluster(m);
  kvpool::py_bindings::BindMooncake(m);
}
