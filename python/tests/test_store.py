"""kvpool.Store, the native API, on a kvpool.LocalCluster started from
Python: put/get in every form, zero copy, batches, exist with
prefetch_to_memory, remove, the tier lookup and batch_prefetch_to_memory."""

import ctypes

import numpy as np
import pytest

import kvpool
from kvpool import ErrorCode, ReplicateConfig, StoreError
from kvpool_testing import MasterProcess

MiB = 1 << 20


@pytest.fixture(scope="module")
def cluster():
    with kvpool.LocalCluster(num_nodes=2, segment_size=32 * MiB,
                             enable_prefetch_trigger=True) as c:
        yield c


@pytest.fixture(scope="module")
def store(cluster):
    with cluster.new_store() as s:
        yield s


def test_put_get_forms(store):
    store.put("n-1", b"hello")
    assert store.get("n-1") == b"hello"
    assert store.get("n-missing") is None
    store.put("n-1", b"ignored")  # an existing key is left as it is
    assert store.get("n-1") == b"hello"
    store.upsert("n-1", bytearray(b"replaced"))
    assert store.get("n-1") == b"replaced"
    arr = np.linspace(0, 1, 1000, dtype=np.float64)
    store.put("n-np", arr)
    assert np.array_equal(np.frombuffer(store.get("n-np")), arr)
    assert store.get_size("n-np") == arr.nbytes
    assert store.get_size("n-missing") is None


def test_get_into_any_writable_buffer(store):
    store.put("gi-1", b"0123456789")
    out = bytearray(16)
    assert store.get_into("gi-1", out) == 10
    assert out[:10] == b"0123456789"
    arr = np.zeros(10, dtype=np.uint8)
    assert store.get_into("gi-1", arr) == 10
    assert arr.tobytes() == b"0123456789"
    with pytest.raises(StoreError) as e:
        store.get_into("gi-1", bytearray(4))
    assert e.value.code == ErrorCode.BUFFER_OVERFLOW
    assert e.value.name == "BUFFER_OVERFLOW"
    with pytest.raises(StoreError) as e:
        store.get_into("gi-missing", out)
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    with pytest.raises(BufferError):  # bytes are read-only
        store.get_into("gi-1", b"read-only bytes")


def test_batch_put_get(store):
    keys = ["b-%d" % i for i in range(10)]
    values = [("value %d" % i).encode() * (i + 1) for i in range(10)]
    assert store.batch_put(keys, values) == [0] * 10
    assert store.batch_get(keys + ["b-missing"]) == values + [None]
    assert store.batch_put(["b-x"], []) == [ErrorCode.INVALID_PARAMS]


def test_zero_copy_registered_buffers(store):
    size = 256 * 1024
    src = np.frombuffer(np.random.default_rng(1).bytes(size), np.uint8).copy()
    dst = np.zeros(size, np.uint8)
    store.register_buffer(src.ctypes.data, size)
    store.register_buffer(dst.ctypes.data, size)
    store.put_from("zc-n", src.ctypes.data, size)
    assert store.get_into("zc-n", dst.ctypes.data, size) == size
    assert np.array_equal(src, dst)

    half = size // 2
    keys = ["zcb-0", "zcb-1"]
    assert store.batch_put_from(keys, [src.ctypes.data,
                                       src.ctypes.data + half],
                                [half, half]) == [0, 0]
    dst[:] = 0
    assert store.batch_get_into(keys, [dst.ctypes.data + half,
                                       dst.ctypes.data],
                                [half, half]) == [half, half]
    assert np.array_equal(dst[half:], src[:half])
    assert np.array_equal(dst[:half], src[half:])

    loose = (ctypes.c_char * 1024)()
    with pytest.raises(StoreError) as e:
        store.put_from("zc-loose", ctypes.addressof(loose), 1024)
    assert e.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(StoreError) as e:
        store.get_into("zc-n", dst.ctypes.data, -1)
    assert e.value.code == ErrorCode.INVALID_PARAMS
    assert store.batch_get_into(["zc-n"], [ctypes.addressof(loose)],
                                [1024]) == [ErrorCode.INVALID_PARAMS]
    store.unregister_buffer(src.ctypes.data)
    store.unregister_buffer(dst.ctypes.data)
    with pytest.raises(StoreError):
        store.unregister_buffer(dst.ctypes.data)


def test_exist_and_prefetch_to_memory(cluster, store):
    store.put("ex-1", b"x")
    assert store.is_exist("ex-1") is True
    assert store.is_exist("ex-missing") is False
    assert store.batch_is_exist(["ex-1", "ex-missing"],
                                grant_lease=False) == [True, False]
    # With enable_ssd_prefetch, an exist probe of an existing key hands it
    # to the prefetcher (here it is already in DRAM).
    with cluster.new_store(enable_ssd_prefetch=True) as p:
        assert p.batch_is_exist(["ex-1", "ex-missing"],
                                prefetch_to_memory=True) == [True, False]
        assert p.wait_prefetch_idle(5000)
        stats = p.prefetch_stats()
        assert stats["triggers"] >= 1 and stats["keys_triggered"] == 1
    assert store.prefetch_stats()["triggers"] == 0


def test_tier_lookup_and_placement(cluster, store):
    node0, node1 = cluster.node_ids
    c = ReplicateConfig()
    c.preferred_segment = node1
    store.put("t-1", b"abc", c)
    info = store.get_tier_info("t-1")
    assert info.size == 3 and info.best_tier == "memory"
    [r] = info.replicas
    assert (r.kind, r.complete, r.node_id) == ("memory", True, node1)
    assert store.get_tier_info("t-missing") is None
    c = ReplicateConfig()
    c.replica_num = 2
    store.put("t-2", b"twice", c)
    infos = store.batch_get_tier_info(["t-1", "t-2", "t-missing"])
    assert infos[2] is None
    assert {r.node_id for r in infos[1].replicas} == {node0, node1}
    bad = ReplicateConfig()
    bad.replica_num = 0
    with pytest.raises(StoreError) as e:
        store.put("t-bad", b"x", bad)
    assert e.value.code == ErrorCode.INVALID_PARAMS


def test_batch_prefetch_to_memory(store):
    store.put("pf-1", b"in dram")
    got = store.batch_prefetch_to_memory(["pf-1", "pf-missing"])
    assert got == [kvpool.PrefetchToMemoryStatus.IN_MEMORY,
                   kvpool.PrefetchToMemoryStatus.NOT_FOUND]


def test_batch_prefetch_to_memory_disabled():
    # A master process: one LocalCluster per process (segment file names).
    m = MasterProcess()
    try:
        with kvpool.Store(m.address) as s:
            with pytest.raises(StoreError) as e:
                s.batch_prefetch_to_memory(["k"])
            assert e.value.code == ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS
    finally:
        m.stop()


def test_remove_family(cluster):
    with cluster.new_store(tenant="remove-tests") as s:
        s.put("r-1", b"1")
        assert s.remove("r-1") is True
        assert s.remove("r-1") is False
        s.put("r-2", b"2")
        s.get("r-2")  # a read lease
        with pytest.raises(StoreError) as e:
            s.remove("r-2")
        assert e.value.code == ErrorCode.OBJECT_HAS_LEASE
        assert s.remove("r-2", force=True) is True
        s.batch_put(["rx-1", "rx-2", "other"], [b"a", b"b", b"c"])
        assert s.remove_by_regex("rx-[0-9]") == 2
        assert s.batch_is_exist(["rx-1", "other"]) == [False, True]
        with pytest.raises(StoreError):
            s.remove_by_regex("[")
        assert s.remove_all(force=True) == 1
        assert s.stat().objects >= 0


def test_stat_counters_and_close(cluster):
    s = cluster.new_store(transport="tcp")
    s.put("sc-1", b"x" * 1000)
    assert s.get("sc-1") == b"x" * 1000
    assert s.counters()["tcp_bytes_read"] >= 1000
    report = s.stat()
    assert len(report.segments) == 2 and report.objects >= 1
    s.close()
    with pytest.raises(StoreError) as e:
        s.get("sc-1")
    assert e.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(StoreError):
        kvpool.Store(cluster.master_address, transport="carrier-pigeon")


def test_type_stub_matches_the_module():
    """Every class and public member of _kvpool.pyi exists in the module."""
    import ast
    import os

    import kvpool._kvpool as native
    path = os.path.join(os.path.dirname(kvpool.__file__), "_kvpool.pyi")
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert hasattr(native, node.name), node.name
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(native, node.name)
        for member in node.body:
            if isinstance(member, ast.FunctionDef):
                name = member.name
            elif isinstance(member, ast.AnnAssign):
                name = member.target.id
            elif isinstance(member, ast.Assign):
                name = member.targets[0].id
            else:
                continue
            assert hasattr(cls, name), (node.name, name)
