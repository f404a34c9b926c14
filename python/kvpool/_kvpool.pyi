"""Type stubs of kvpool's native module (re-exported by kvpool and
kvpool.mooncake)."""

import enum
from typing import Any, Optional, Sequence, Union, overload

from typing_extensions import Buffer  # PEP 688 (collections.abc.Buffer, 3.12)

_BytesLike = Union[bytes, bytearray, memoryview, Buffer]

# ---------------------------------------------------------------- common

class StoreError(RuntimeError):
    """A kvpool call failed; ``code`` is the negative Mooncake ErrorCode."""

    @property
    def code(self) -> int: ...
    @property
    def name(self) -> str: ...

def _error_codes() -> dict[str, int]: ...

class SoftPinAction(enum.IntEnum):
    """Mooncake's values. PRESERVE: as with_soft_pin says."""

    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2

class ReplicateConfig:
    """Placement wishes of a put, honoured by the master."""

    replica_num: int
    with_soft_pin: bool
    soft_pin_action: SoftPinAction
    soft_pin_ttl_ms: Optional[int]
    """None: the master's default_kv_soft_pin_ttl; 0: no soft pin; > 0."""
    with_hard_pin: bool
    preferred_segment: str
    preferred_segments: list[str]
    prefer_alloc_in_same_node: bool
    def __init__(self) -> None: ...

class ReplicaInfo:
    @property
    def kind(self) -> str:
        """'memory' or 'local_disk'."""
    @property
    def complete(self) -> bool: ...
    @property
    def node_id(self) -> str: ...
    @property
    def data_endpoint(self) -> str: ...
    @property
    def segment_id(self) -> int: ...
    @property
    def offset(self) -> int: ...

class TierInfo:
    @property
    def size(self) -> int: ...
    @property
    def lease_remaining_ms(self) -> int: ...
    @property
    def replicas(self) -> list[ReplicaInfo]: ...
    @property
    def best_tier(self) -> str:
        """'memory', 'local_disk' or 'processing'."""

class PrefetchToMemoryStatus(enum.Enum):
    IN_MEMORY = 0
    QUEUED = 1
    THROTTLED_WATERMARK = 2
    THROTTLED_CAP = 3
    NO_LOCAL_DISK = 4
    NOT_FOUND = 5

class SegmentReport:
    segment_id: int
    node_id: str
    kind: str
    capacity: int
    used: int
    data_endpoint: str

class ClusterReport:
    objects: int
    memory_replicas: int
    evictions: int
    segments: list[SegmentReport]

# ------------------------------------------------------------ native API

class Store:
    """A client of a kvpool cluster. Thread-safe; every blocking call
    releases the GIL; errors raise StoreError, a miss is None."""

    def __init__(
        self,
        master_server_address: str = "127.0.0.1:50051",
        *,
        tenant: str = "default",
        transport: str = "auto",
        rpc_timeout_ms: int = 5000,
        lease_cache: bool = False,
        enable_ssd_prefetch: bool = False,
        data_connect_timeout_ms: int = 5000,
        data_io_timeout_ms: int = 30000,
        credential_file: str = "",
        tls_ca_file: str = "",
        tls_cert_file: str = "",
        tls_key_file: str = "",
    ) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *exc: Any) -> None: ...
    def put(self, key: str, value: _BytesLike,
            config: Optional[ReplicateConfig] = None) -> None:
        """Stores a value; an existing key is left as it is."""
    def upsert(self, key: str, value: _BytesLike,
               config: Optional[ReplicateConfig] = None) -> None: ...
    def batch_put(self, keys: Sequence[str], values: Sequence[_BytesLike],
                  config: Optional[ReplicateConfig] = None) -> list[int]:
        """Per-key codes, 0 = stored."""
    def get(self, key: str) -> Optional[bytes]: ...
    def batch_get(self, keys: Sequence[str]) -> list[Optional[bytes]]: ...
    @overload
    def get_into(self, key: str, buffer: _BytesLike) -> int:
        """Into any writable bytes-like object; returns the value's size."""
    @overload
    def get_into(self, key: str, buffer_ptr: int, size: int) -> int:
        """Zero copy into a registered buffer."""
    def register_buffer(self, buffer_ptr: int, size: int) -> None: ...
    def unregister_buffer(self, buffer_ptr: int) -> None: ...
    def put_from(self, key: str, buffer_ptr: int, size: int,
                 config: Optional[ReplicateConfig] = None) -> None: ...
    def batch_put_from(self, keys: Sequence[str], buffer_ptrs: Sequence[int],
                       sizes: Sequence[int],
                       config: Optional[ReplicateConfig] = None) -> list[int]:
        ...
    def batch_get_into(self, keys: Sequence[str], buffer_ptrs: Sequence[int],
                       sizes: Sequence[int]) -> list[int]:
        """Bytes read per key, or a negative code."""
    def is_exist(self, key: str, *, prefetch_to_memory: bool = False,
                 grant_lease: bool = True) -> bool: ...
    def batch_is_exist(self, keys: Sequence[str], *,
                       prefetch_to_memory: bool = False,
                       grant_lease: bool = True) -> list[bool]: ...
    def get_size(self, key: str) -> Optional[int]: ...
    def remove(self, key: str, force: bool = False) -> bool:
        """True if removed, False if it did not exist."""
    def remove_all(self, force: bool = False) -> int: ...
    def remove_by_regex(self, regex: str, force: bool = False) -> int: ...
    def get_tier_info(self, key: str) -> Optional[TierInfo]: ...
    def batch_get_tier_info(self, keys: Sequence[str]
                            ) -> list[Optional[TierInfo]]: ...
    def batch_prefetch_to_memory(self, keys: Sequence[str]
                                 ) -> list[PrefetchToMemoryStatus]: ...
    def stat(self) -> ClusterReport: ...
    def counters(self) -> dict[str, int]: ...
    def metrics_text(self) -> str: ...
    def prefetch_stats(self) -> dict[str, int]: ...
    def wait_prefetch_idle(self, timeout_ms: int) -> bool: ...

class LocalCluster:
    """A master and N nodes in this process (loopback, kernel-chosen ports).
    One running LocalCluster per process."""

    def __init__(
        self,
        num_nodes: int = 2,
        segment_size: int = 64 << 20,
        *,
        default_kv_lease_ttl: int = 10000,
        eviction_high_watermark_ratio: float = 0.9,
        eviction_ratio: float = 0.05,
        enable_ssd: bool = False,
        ssd_root: str = "",
        ssd_capacity_bytes: int = 4 << 30,
        offload_on_evict: bool = False,
        promotion_on_hit: bool = False,
        enable_prefetch_trigger: bool = False,
        heartbeat_interval_ms: int = 1000,
    ) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def __enter__(self) -> "LocalCluster": ...
    def __exit__(self, *exc: Any) -> None: ...
    @property
    def master_address(self) -> str: ...
    @property
    def node_ids(self) -> list[str]: ...
    def new_store(self, **kwargs: Any) -> Store: ...

# ------------------------------------------------- Mooncake-compatible API

class ReplicaStatus(enum.Enum):
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5

class BufferDescriptor:
    size: int
    buffer_address: int
    protocol: str
    transport_endpoint: str

class MemoryDescriptor:
    buffer_descriptor: BufferDescriptor

class DiskDescriptor:
    file_path: str
    object_size: int

class ReplicaDescriptor:
    status: ReplicaStatus
    node_id: str
    def is_memory_replica(self) -> bool: ...
    def is_disk_replica(self) -> bool: ...
    def get_memory_descriptor(self) -> MemoryDescriptor: ...
    def get_disk_descriptor(self) -> DiskDescriptor: ...

class BufferHandle(Buffer):
    """One value's bytes; supports the buffer protocol (no copy)."""

    def ptr(self) -> int: ...
    def size(self) -> int: ...
    def __len__(self) -> int: ...

class MooncakeDistributedStore:
    """Mooncake Store's class: ints back (0 / positive, or a negative
    ErrorCode), b"" / None on a miss; never raises for a failed operation."""

    def __init__(self) -> None: ...
    @overload
    def setup(
        self,
        local_hostname: str,
        metadata_server: str,
        global_segment_size: int = 16 << 20,
        local_buffer_size: int = 16 << 20,
        protocol: str = "tcp",
        rdma_devices: str = "",
        master_server_addr: str = "127.0.0.1:50051",
        engine: Any = None,
    ) -> int: ...
    @overload
    def setup(self, config: dict[str, Any]) -> int: ...
    def close(self) -> int: ...
    def get_hostname(self) -> str: ...
    def health_check(self) -> int: ...
    def mount_segment(self, path: str, size: int, offset: int = 0,
                      protocol: str = "tcp", location: str = ""
                      ) -> dict[str, Any]: ...
    def unmount_segment(self, segment_ids: Sequence[str],
                        grace_period_seconds: int = 0) -> int: ...
    def allocate_and_mount_segment(self, size: int, protocol: str = "tcp",
                                   location: str = "") -> dict[str, Any]: ...
    def unmount_and_free_segment(self, segment_ids: Sequence[str],
                                 grace_period_seconds: int = 0) -> int: ...
    def put(self, key: str, value: _BytesLike,
            config: Optional[ReplicateConfig] = None) -> int: ...
    def upsert(self, key: str, value: _BytesLike,
               config: Optional[ReplicateConfig] = None) -> int: ...
    def put_parts(self, key: str, *parts: _BytesLike,
                  config: Optional[ReplicateConfig] = None) -> int: ...
    def put_batch(self, keys: Sequence[str], values: Sequence[_BytesLike],
                  config: Optional[ReplicateConfig] = None) -> int: ...
    def get(self, key: str) -> bytes: ...
    def get_batch(self, keys: Sequence[str]) -> list[bytes]: ...
    def get_buffer(self, key: str) -> Optional[BufferHandle]: ...
    def batch_get_buffer(self, keys: Sequence[str]
                         ) -> list[Optional[BufferHandle]]: ...
    def get_size(self, key: str) -> int: ...
    def is_exist(self, key: str) -> int: ...
    def batch_is_exist(self, keys: Sequence[str]) -> list[int]: ...
    def remove(self, key: str, force: bool = False) -> int: ...
    def batch_remove(self, keys: Sequence[str],
                     force: bool = False) -> list[int]: ...
    def remove_all(self, force: bool = False) -> int: ...
    def remove_by_regex(self, regex_pattern: str, force: bool = False) -> int:
        ...
    def register_buffer(self, buffer_ptr: int, size: int) -> int: ...
    def unregister_buffer(self, buffer_ptr: int) -> int: ...
    def put_from(self, key: str, buffer_ptr: int, size: int,
                 config: Optional[ReplicateConfig] = None) -> int: ...
    def get_into(self, key: str, buffer_ptr: int, size: int) -> int: ...
    def batch_put_from(self, keys: Sequence[str], buffer_ptrs: Sequence[int],
                       sizes: Sequence[int],
                       config: Optional[ReplicateConfig] = None) -> list[int]:
        ...
    def batch_get_into(self, keys: Sequence[str], buffer_ptrs: Sequence[int],
                       sizes: Sequence[int]) -> list[int]: ...
    def get_into_ranges(
        self,
        buffer_ptrs: Sequence[int],
        all_keys: Sequence[Sequence[str]],
        all_dst_offsets: Sequence[Sequence[Sequence[int]]],
        all_src_offsets: Sequence[Sequence[Sequence[int]]],
        all_sizes: Sequence[Sequence[Sequence[int]]],
    ) -> list[list[list[int]]]: ...
    def get_replica_desc(self, key: str) -> list[ReplicaDescriptor]: ...
    def batch_get_replica_desc(
            self, keys: Sequence[str]) -> dict[str, list[ReplicaDescriptor]]:
        ...
