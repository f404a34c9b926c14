"""kvpool: a distributed, tiered KV-cache store for LLM inference.

The native API::

    import kvpool
    with kvpool.LocalCluster(num_nodes=2) as cluster:
        store = cluster.new_store()
        store.put("block-1", b"bytes")
        assert store.get("block-1") == b"bytes"

``kvpool.mooncake.MooncakeDistributedStore`` is a drop-in for Mooncake
Store's Python class (SGLang HiCache, vLLM, LMCache).

Errors raise :class:`StoreError`; its ``code`` is an :class:`ErrorCode`
value (Mooncake's numbering).
"""

import enum as _enum

from . import _kvpool
from ._kvpool import (
    ClusterReport,
    LocalCluster,
    PrefetchToMemoryStatus,
    ReplicaInfo,
    ReplicateConfig,
    SegmentReport,
    SoftPinAction,
    Store,
    StoreError,
    TierInfo,
)

#: Error codes, equal to Mooncake Store's (OBJECT_NOT_FOUND = -704, ...).
ErrorCode = _enum.IntEnum("ErrorCode", _kvpool._error_codes())
ErrorCode.__module__ = __name__

__all__ = [
    "ClusterReport",
    "ErrorCode",
    "LocalCluster",
    "PrefetchToMemoryStatus",
    "ReplicaInfo",
    "ReplicateConfig",
    "SegmentReport",
    "SoftPinAction",
    "Store",
    "StoreError",
    "TierInfo",
]
