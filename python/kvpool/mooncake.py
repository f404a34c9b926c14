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
"""

import sys as _sys
import types as _types

from ._kvpool import (
    BufferDescriptor,
    BufferHandle,
    DiskDescriptor,
    MemoryDescriptor,
    MooncakeDistributedStore,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
)



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
    "DiskDescriptor",
    "MemoryDescriptor",
    "MooncakeDistributedStore",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
    "install_as_mooncake",
]
