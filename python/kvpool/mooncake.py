"""Mooncake Store's Python API on kvpool.

A drop-in for ``mooncake.store``: the same class and method names, argument
order, defaults and return conventions (0 or a positive value on success,
a negative Mooncake ErrorCode otherwise; ``get`` returns ``b""`` on a miss)::

    from kvpool.mooncake import MooncakeDistributedStore, ReplicateConfig

    store = MooncakeDistributedStore()
    store.setup("localhost", "P2PHANDSHAKE", 512 << 20, 16 << 20, "tcp", "",
                "127.0.0.1:50051")
    store.put("key", b"value")

``metadata_server``, ``protocol`` and ``rdma_devices`` are accepted and
unused: kvpool moves bytes over shared memory on one host and TCP otherwise.

The torch tensor methods (put_tensor, get_tensor, the _with_tp and
_with_parallelism families, ...) store Mooncake's tensor object format; see
kvpool/_mooncake_tensor_format.py. Mooncake methods kvpool does not support raise
NotImplementedError (docs/python.md, "Mooncake drop-in").
"""

import enum as _enum
import os as _os
import sys as _sys
import types as _types

from . import _kvpool
from ._kvpool import (
    BufferDescriptor,
    BufferHandle,
    DiskDescriptor,
    MemoryDescriptor,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
)
from ._mooncake_host_alloc import MooncakeHostMemAllocator
from ._mooncake_tensor import TensorMethods as _TensorMethods
from ._mooncake_tensor_format import (
    ParallelAxis,
    ReadTarget,
    TensorParallelism,
)

_INVALID_PARAMS = -600
_RPC_FAIL = -900

#: mooncake.store's name for a replica's buffer descriptor.
Descriptor = BufferDescriptor


class TaskType(_enum.IntEnum):
    """Kinds of Mooncake replica tasks (create_copy_task and
    create_move_task are not supported by kvpool)."""
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(_enum.IntEnum):
    PENDING = 0
    PROCESSING = 1
    SUCCESS = 2
    FAILED = 3


def _unsupported(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(
            "MooncakeDistributedStore.%s is not supported by kvpool; see "
            "docs/python.md, section \"Mooncake drop-in\"" % name)
    method.__name__ = name
    method.__doc__ = "Not supported by kvpool: raises NotImplementedError."
    return method


class MooncakeDistributedStore(_TensorMethods, _kvpool.MooncakeDistributedStore):
    """Mooncake Store's MooncakeDistributedStore on kvpool: the byte methods
    of the native class plus Mooncake's torch tensor methods."""

    init_all = _unsupported("init_all")
    alloc_from_mem_pool = _unsupported("alloc_from_mem_pool")
    save_tensor_to_safetensor = _unsupported("save_tensor_to_safetensor")
    load_tensor_from_safetensor = _unsupported("load_tensor_from_safetensor")
    create_copy_task = _unsupported("create_copy_task")
    create_move_task = _unsupported("create_move_task")
    query_task = _unsupported("query_task")

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        """Mooncake's standalone mode (SGLang's ``standalone_storage``): this
        process keeps no segment and talks to a hosting process on this
        host. On kvpool that process is a ``kvpool-node`` (or any node) and
        ``server_address`` is its HTTP endpoint (``--metrics_port``): the
        store asks it for the master and becomes a pure client, reading the
        node's DRAM through shared memory. ``mem_pool_size`` is accepted
        and unused (kvpool needs no pool shared with the hosting process).
        0, or a negative code (INVALID_PARAMS for a malformed address,
        RPC_FAIL when the node does not answer)."""
        import json
        import urllib.error
        import urllib.request
        host, sep, port = str(server_address).rpartition(":")
        if (not sep or not host or not port.isdigit()
                or int(mem_pool_size) < 0 or int(local_buffer_size) < 0):
            return _INVALID_PARAMS
        try:
            with urllib.request.urlopen(
                    "http://%s:%s/status" % (host, port), timeout=5) as r:
                status = json.loads(r.read().decode())
            master = status["master_server_address"]
        except (OSError, ValueError, KeyError, urllib.error.URLError):
            return _RPC_FAIL
        return self.setup({
            "local_hostname": host,
            "global_segment_size": 0,
            "local_buffer_size": int(local_buffer_size),
            "master_server_address": master,
        })

    def batch_replica_clear(self, keys, segment_name=""):
        """Mooncake's replica clear: drops the keys whose lease has ended
        and returns those it dropped. With ``segment_name`` (a node id, as
        get_hostname() returns), only keys whose every replica is on that
        segment are dropped: kvpool removes a key whole, never one replica
        of it, so a key with a copy elsewhere is left as it is."""
        keys = list(keys)
        if not keys:
            return []
        if segment_name:
            descs = self.batch_get_replica_desc(keys)
            keys = [k for k in keys if descs.get(k) and all(
                d.node_id == segment_name for d in descs[k])]
            if not keys:
                return []
        codes = self.batch_remove(keys, False)
        if not isinstance(codes, list):
            return []
        return [k for k, c in zip(keys, codes) if c == 0]


def bind_to_numa_node(node):
    """Mooncake's module function: runs this thread on the CPUs of NUMA node
    ``node``. Like Mooncake, a missing NUMA or a bad node only warns."""
    import warnings
    try:
        with open("/sys/devices/system/node/node%d/cpulist" % int(node)) as f:
            text = f.read().strip()
        cpus = set()
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        _os.sched_setaffinity(0, cpus)
    except (OSError, ValueError, TypeError, AttributeError) as e:
        warnings.warn("bind_to_numa_node(%r) skipped: %s" % (node, e))



def install_as_mooncake() -> None:
    """Makes ``import mooncake.store`` (and ``from mooncake.store import
    MooncakeDistributedStore``) resolve to this module, so that an engine
    written for Mooncake runs on kvpool unchanged. Call it before the engine
    imports Mooncake; it replaces nothing if a real ``mooncake`` is already
    imported."""
    if "mooncake" in _sys.modules:
        return
    package = _types.ModuleType("mooncake")
    package.__path__ = []  # a package, so "mooncake.store" can be imported
    package.store = _sys.modules[__name__]
    _sys.modules["mooncake"] = package
    _sys.modules["mooncake.store"] = _sys.modules[__name__]


__all__ = [
    "BufferDescriptor",
    "BufferHandle",
    "Descriptor",
    "DiskDescriptor",
    "MemoryDescriptor",
    "MooncakeDistributedStore",
    "MooncakeHostMemAllocator",
    "ParallelAxis",
    "ReadTarget",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
    "TaskStatus",
    "TaskType",
    "TensorParallelism",
    "bind_to_numa_node",
    "install_as_mooncake",
]
