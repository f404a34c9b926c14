// The _kvpool extension module; the kvpool package re-exports it.
#include "python/src/py_common.h"

PYBIND11_MODULE(_kvpool, m) {
  m.doc() = "kvpool: a distributed tiered KV-cache store (native module).";
  kvpool::py_bindings::BindCommon(m);
  kvpool::py_bindings::BindStore(m);
  kvpool::py_bindings::BindLocalCluster(m);
  kvpool::py_bindings::BindMooncake(m);
}
