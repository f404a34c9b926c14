"""kvpool.mooncake.MooncakeDistributedStore against a kvpool-master process
started here: every method, Mooncake's return conventions, zero copy with
ctypes and numpy buffers, and ReplicateConfig honoured by the master."""

import ctypes
import re

import numpy as np
import pytest

import kvpool
from kvpool.mooncake import (MooncakeDistributedStore, ReplicaStatus,
                             ReplicateConfig, SoftPinAction)
from kvpool_testing import MasterProcess, wait_until

MiB = 1 << 20
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OBJECT_HAS_LEASE = -706
BUFFER_OVERFLOW = -10


@pytest.fixture(scope="module")
def master():
    m = MasterProcess("--default_kv_lease_ttl=2000")
    yield m
    m.stop()


@pytest.fixture(scope="module")
def host(master):
    """This process hosts a 64 MiB segment, as a Mooncake engine does."""
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 * MiB, 16 * MiB, "tcp", "",
                   master.address) == 0
    yield s
    assert s.close() == 0


@pytest.fixture(scope="module")
def client(master, host):
    """A pure client (global_segment_size 0) set up from a dict."""
    s = MooncakeDistributedStore()
    assert s.setup({
        "local_hostname": "127.0.0.1",
        "metadata_server": "http://127.0.0.1:8080/metadata",
        "global_segment_size": 0,
        "local_buffer_size": "4MiB",
        "protocol": "rdma",
        "device_name": "mlx5_0",
        "master_server_address": master.address,
    }) == 0
    yield s
    s.close()


# ------------------------------------------------------------------ setup


def test_setup_hosts_a_segment_named_by_hostname(host):
    hostname = host.get_hostname()
    m = re.fullmatch(r"127\.0\.0\.1:(\d+)", hostname)
    assert m and int(m.group(1)) > 0
    assert host.health_check() == 0
    config = ReplicateConfig()
    config.preferred_segment = hostname
    assert host.put("setup-local", b"here", config) == 0
    [desc] = host.get_replica_desc("setup-local")
    assert desc.node_id == hostname
    assert desc.is_memory_replica() and not desc.is_disk_replica()
    assert desc.get_memory_descriptor().buffer_descriptor.transport_endpoint \
        == hostname


def test_setup_dict_pure_client(client, host):
    assert client.get_hostname() == "127.0.0.1:0"
    assert client.health_check() == 0
    # The pure client's values land on the hosting store's segment.
    assert client.put("dict-client", b"v") == 0
    assert host.get("dict-client") == b"v"


def test_setup_errors_and_calls_before_setup():
    s = MooncakeDistributedStore()
    assert s.put("k", b"v") == INVALID_PARAMS
    assert s.get("k") == b""
    assert s.is_exist("k") == -1
    assert s.batch_is_exist(["a", "b"]) == [-1, -1]
    assert s.get_size("k") == INVALID_PARAMS
    assert s.get_buffer("k") is None
    assert s.register_buffer(1234, 10) == INVALID_PARAMS
    assert s.health_check() == INVALID_PARAMS
    assert s.setup({"global_segment_size": "1MiB"}) == INVALID_PARAMS
    assert s.setup({"local_hostname": "h", "global_segment_size": "lots"}) \
        == INVALID_PARAMS
    assert s.setup("h:notaport", "", 0, 0, "tcp", "", "127.0.0.1:1") \
        == INVALID_PARAMS
    # Nothing listens on port 1: the master is unreachable.
    rc = s.setup("127.0.0.1", "", 0, 0, "tcp", "", "127.0.0.1:1")
    assert rc < 0 and rc != INVALID_PARAMS
    assert s.close() == 0


# ------------------------------------------------------------ put and get


def test_put_get_size_exist(host, client):
    assert host.put("pg-1", b"hello") == 0
    assert client.get("pg-1") == b"hello"
    assert client.get("pg-missing") == b""
    assert client.get_size("pg-1") == 5
    assert client.get_size("pg-missing") == OBJECT_NOT_FOUND
    assert client.is_exist("pg-1") == 1
    assert client.is_exist("pg-missing") == 0
    assert client.batch_is_exist(["pg-1", "pg-missing"]) == [1, 0]
    # An existing key is left as it is (and the put succeeds), as in Mooncake.
    assert client.put("pg-1", b"other") == 0
    assert client.get("pg-1") == b"hello"
    assert client.upsert("pg-1", b"replaced value") == 0
    assert client.get("pg-1") == b"replaced value"
    assert client.get_size("pg-1") == 14


def test_put_accepts_bytes_like_values(client):
    arr = np.arange(256, dtype=np.float32)
    assert client.put("bl-np", arr) == 0
    assert np.array_equal(np.frombuffer(client.get("bl-np"), np.float32), arr)
    assert client.put("bl-ba", bytearray(b"ba")) == 0
    assert client.put("bl-mv", memoryview(b"xmvx")[1:3]) == 0
    assert client.get("bl-ba") == b"ba"
    assert client.get("bl-mv") == b"mv"
    with pytest.raises(TypeError):
        client.put("bl-int", 5)


def test_put_batch_get_batch_put_parts(client):
    keys = ["pb-%d" % i for i in range(5)]
    values = [bytes([i]) * (i + 1) * 100 for i in range(5)]
    assert client.put_batch(keys, values) == 0
    assert client.get_batch(keys + ["pb-missing"]) == values + [b""]
    assert client.put_batch(["pb-x", "pb-y"], [b"1"]) == INVALID_PARAMS
    config = ReplicateConfig()
    assert client.put_parts("pp-1", b"Hello, ", b"World", b"!",
                            config=config) == 0
    assert client.get("pp-1") == b"Hello, World!"


def test_get_buffer_and_batch_get_buffer(client, master):
    payload = bytes(range(256)) * 40
    assert client.put("gb-1", payload) == 0
    h = client.get_buffer("gb-1")
    assert h is not None
    assert h.size() == len(h) == len(payload)
    assert h.ptr() != 0
    assert bytes(memoryview(h)) == payload
    assert np.array_equal(np.frombuffer(h, np.uint8),
                          np.frombuffer(payload, np.uint8))
    assert client.get_buffer("gb-missing") is None
    hs = client.batch_get_buffer(["gb-1", "gb-missing"])
    assert bytes(hs[0]) == payload and hs[1] is None
    # A value larger than the local buffer (4 MiB) still reads (heap).
    big = b"B" * (5 * MiB)
    assert client.put("gb-big", big) == 0
    assert bytes(client.get_buffer("gb-big")) == big
    # A handle stays valid after its store is closed.
    other = MooncakeDistributedStore()
    assert other.setup("127.0.0.1", "", 0, 1 * MiB, "tcp", "",
                       master.address) == 0
    kept = other.get_buffer("gb-1")
    assert other.close() == 0
    assert bytes(kept) == payload


# -------------------------------------------------------------- zero copy


def test_zero_copy_with_ctypes_buffers(client):
    size = 1 * MiB
    src = (ctypes.c_ubyte * size)()
    dst = (ctypes.c_ubyte * size)()
    unregistered = (ctypes.c_ubyte * 4096)()
    src_ptr, dst_ptr = ctypes.addressof(src), ctypes.addressof(dst)
    ctypes.memset(src_ptr, 0x5A, size)
    assert client.register_buffer(src_ptr, size) == 0
    assert client.register_buffer(dst_ptr, size) == 0
    assert client.register_buffer(src_ptr, size) == INVALID_PARAMS  # overlap

    assert client.put_from("zc-1", src_ptr, 4096) == 0
    assert client.get_into("zc-1", dst_ptr, size) == 4096
    assert bytes(dst[:4096]) == b"\x5a" * 4096
    # Invalid arguments are INVALID_PARAMS, never a crash.
    assert client.get_into("zc-1", ctypes.addressof(unregistered), 4096) \
        == INVALID_PARAMS
    assert client.put_from("zc-2", ctypes.addressof(unregistered), 4096) \
        == INVALID_PARAMS
    assert client.get_into("zc-1", dst_ptr, -1) == INVALID_PARAMS
    assert client.put_from("zc-2", src_ptr, -8) == INVALID_PARAMS
    assert client.get_into("zc-1", 0, 4096) == INVALID_PARAMS
    assert client.get_into("zc-1", -4096, 4096) == INVALID_PARAMS
    assert client.put_from("zc-2", src_ptr, size + 1) == INVALID_PARAMS
    assert client.get_into("zc-1", dst_ptr + size - 100, 4096) \
        == INVALID_PARAMS
    assert client.get_into("zc-1", dst_ptr, 100) == BUFFER_OVERFLOW
    assert client.get_into("zc-missing", dst_ptr, size) == OBJECT_NOT_FOUND
    assert client.is_exist("zc-2") == 0

    assert client.unregister_buffer(src_ptr) == 0
    assert client.unregister_buffer(src_ptr) == INVALID_PARAMS
    assert client.put_from("zc-3", src_ptr, 10) == INVALID_PARAMS
    assert client.unregister_buffer(dst_ptr) == 0


def test_batch_zero_copy_with_numpy(client):
    n, block = 8, 64 * 1024
    src = np.random.default_rng(7).integers(0, 255, n * block, dtype=np.uint8)
    dst = np.zeros(n * block, dtype=np.uint8)
    sp, dp = src.ctypes.data, dst.ctypes.data
    assert client.register_buffer(sp, src.nbytes) == 0
    assert client.register_buffer(dp, dst.nbytes) == 0
    keys = ["bz-%d" % i for i in range(n)]
    ptrs = [sp + i * block for i in range(n)]
    assert client.batch_put_from(keys, ptrs, [block] * n) == [0] * n
    got = client.batch_get_into(keys + ["bz-missing"],
                                [dp + i * block for i in range(n)] + [dp],
                                [block] * (n + 1))
    assert got == [block] * n + [OBJECT_NOT_FOUND]
    assert np.array_equal(src, dst)
    # A bad entry fails alone; mismatched lengths fail every key.
    assert client.batch_put_from(["bz-a", "bz-b"], [sp, sp], [10, -1]) \
        == [0, INVALID_PARAMS]
    assert client.batch_get_into(keys[:2], [dp], [block, block]) \
        == [INVALID_PARAMS, INVALID_PARAMS]
    assert client.unregister_buffer(sp) == 0
    assert client.unregister_buffer(dp) == 0


def test_get_into_ranges(client):
    assert client.put("gr-1", bytes(range(64))) == 0
    assert client.put("gr-2", bytes(range(100, 164))) == 0
    b0 = (ctypes.c_ubyte * 32)()
    b1 = (ctypes.c_ubyte * 32)()
    p0, p1 = ctypes.addressof(b0), ctypes.addressof(b1)
    assert client.register_buffer(p0, 32) == 0
    assert client.register_buffer(p1, 32) == 0
    results = client.get_into_ranges(
        [p0, p1],
        [["gr-1", "gr-2"], ["gr-2", "gr-missing"]],
        [[[0, 20], [8]], [[4], [16]]],
        [[[1, 30], [2]], [[0], [10]]],
        [[[4, 3], [5]], [[6], [4]]],
    )
    assert results == [[[4, 3], [5]], [[6], [OBJECT_NOT_FOUND]]]
    assert bytes(b0[0:4]) == bytes(range(1, 5))
    assert bytes(b0[20:23]) == bytes(range(30, 33))
    assert bytes(b0[8:13]) == bytes(range(102, 107))
    assert bytes(b1[4:10]) == bytes(range(100, 106))
    # Past the value's end or the buffer's end: that fragment only fails.
    results = client.get_into_ranges([p0], [["gr-1"]], [[[0, 30]]],
                                     [[[60, 0]]], [[[8, 4]]])
    assert results == [[[INVALID_PARAMS, INVALID_PARAMS]]]
    assert client.unregister_buffer(p0) == 0
    assert client.unregister_buffer(p1) == 0


# ----------------------------------------------------------------- remove


def test_remove_family(master, client):
    assert client.put("rm-1", b"x") == 0
    assert client.get("rm-1") == b"x"  # the get leaves a read lease
    assert client.remove("rm-1") == OBJECT_HAS_LEASE
    assert client.remove("rm-1", force=True) == 0
    assert client.remove("rm-1") == OBJECT_NOT_FOUND
    assert client.put_batch(["rb-1", "rb-2"], [b"1", b"2"]) == 0
    assert client.batch_remove(["rb-1", "rb-missing", "rb-2"]) \
        == [0, OBJECT_NOT_FOUND, 0]
    assert client.put_batch(["rx-a", "rx-b", "rx-c", "keep-rx"],
                            [b"a"] * 4) == 0
    assert client.remove_by_regex("rx-.*") == 3
    assert client.batch_is_exist(["rx-a", "keep-rx"]) == [0, 1]
    assert client.remove_by_regex("(") == INVALID_PARAMS

    tenant = MooncakeDistributedStore()
    assert tenant.setup({"local_hostname": "127.0.0.1",
                         "global_segment_size": "0",
                         "master_server_addr": master.address,
                         "tenant": "remove-all-tenant"}) == 0
    assert tenant.put_batch(["t-1", "t-2", "t-3"], [b"t"] * 3) == 0
    assert tenant.remove_all() == 3
    assert tenant.is_exist("t-1") == 0
    assert client.is_exist("keep-rx") == 1  # other tenants untouched
    tenant.close()


# ---------------------------------------------------- replica descriptors


def test_replica_descriptors(client):
    assert client.put("rd-1", b"abcdef") == 0
    [desc] = client.get_replica_desc("rd-1")
    assert desc.status == ReplicaStatus.COMPLETE
    bd = desc.get_memory_descriptor().buffer_descriptor
    assert bd.size == 6 and bd.protocol == "tcp"
    with pytest.raises(ValueError):
        desc.get_disk_descriptor()
    assert client.get_replica_desc("rd-missing") == []
    descs = client.batch_get_replica_desc(["rd-1", "rd-missing"])
    assert list(descs) == ["rd-1"] and len(descs["rd-1"]) == 1


# ------------------------------------------------------- ReplicateConfig


def test_replicate_config_defaults_and_validation(client):
    c = ReplicateConfig()
    assert (c.replica_num, c.with_soft_pin, c.with_hard_pin) == (1, False,
                                                                 False)
    assert c.soft_pin_action == SoftPinAction.PRESERVE
    assert c.soft_pin_ttl_ms is None
    assert c.preferred_segment == "" and c.preferred_segments == []
    assert [int(a) for a in (SoftPinAction.PRESERVE, SoftPinAction.ENABLE,
                             SoftPinAction.DISABLE)] == [0, 1, 2]
    c.replica_num = 0
    assert client.put("rc-bad", b"x", c) == INVALID_PARAMS
    c.replica_num = 1
    c.soft_pin_ttl_ms = -5
    assert client.put("rc-bad", b"x", c) == INVALID_PARAMS
    assert client.put("rc-none", b"x", None) == 0
    assert "replica_num=1" in str(c)


def test_two_hosts_preferred_segment_and_replicas(master, host, client):
    other = MooncakeDistributedStore()
    assert other.setup("127.0.0.1", "", 32 * MiB, 0, "tcp", "",
                       master.address) == 0
    try:
        c = ReplicateConfig()
        c.preferred_segment = other.get_hostname()
        assert client.put("ps-1", b"there", c) == 0
        [d] = client.get_replica_desc("ps-1")
        assert d.node_id == other.get_hostname()
        c = ReplicateConfig()
        c.replica_num = 2
        assert client.put("ps-2", b"twice", c) == 0
        nodes = {d.node_id for d in client.get_replica_desc("ps-2")}
        assert nodes == {host.get_hostname(), other.get_hostname()}
    finally:
        assert other.close() == 0


def test_pinned_objects_are_evicted_last():
    """16 MiB of DRAM: unpinned values go first, soft-pinned ones only when
    nothing unpinned is left, hard-pinned ones never."""
    m = MasterProcess("--default_kv_lease_ttl=20",
                      "--eviction_high_watermark_ratio=0.9",
                      "--eviction_ratio=0.05")
    s = MooncakeDistributedStore()
    try:
        assert s.setup("127.0.0.1", "", 16 * MiB, 0, "tcp", "",
                       m.address) == 0
        value = b"v" * MiB

        def cfg(**kw):
            c = ReplicateConfig()
            for k, v in kw.items():
                setattr(c, k, v)
            return c

        # Put first, so they are the least recently used of all.
        assert s.put("hard-0", value, cfg(with_hard_pin=True)) == 0
        assert s.put("soft-0", value, cfg(with_soft_pin=True)) == 0
        assert s.put("soft-1", value,
                     cfg(soft_pin_action=SoftPinAction.ENABLE)) == 0
        # Mooncake's semantics: a zero TTL and DISABLE mean no soft pin.
        assert s.put("zero-ttl", value,
                     cfg(with_soft_pin=True, soft_pin_ttl_ms=0)) == 0
        assert s.put("disabled", value,
                     cfg(with_soft_pin=True,
                         soft_pin_action=SoftPinAction.DISABLE)) == 0
        unpinned = ["u-%d" % i for i in range(20)]
        for k in unpinned:
            assert s.put(k, value) == 0
        assert s.batch_is_exist(["hard-0", "soft-0", "soft-1"]) == [1, 1, 1]
        assert s.batch_is_exist(["zero-ttl", "disabled"]) == [0, 0]
        assert sum(s.batch_is_exist(unpinned)) < len(unpinned)

        # Nothing unpinned left: more hard-pinned values push the soft-pinned
        # ones out, never a hard-pinned one.
        assert s.remove_by_regex("u-.*", True) >= 0
        # Removed ranges a lease still covers are freed by the master's
        # housekeeping once the lease ends; wait for that.
        used = lambda: kvpool.Store(m.address).stat().segments[0].used
        assert wait_until(lambda: used() <= 3 * MiB + 4096)
        hard = ["hard-%d" % i for i in range(1, 13)]
        for k in hard:
            assert s.put(k, value, cfg(with_hard_pin=True)) == 0
        assert wait_until(
            lambda: 0 in s.batch_is_exist(["soft-0", "soft-1"]))
        assert s.batch_is_exist(["hard-0"] + hard) == [1] * 13
    finally:
        s.close()
        m.stop()


def test_install_as_mooncake_makes_mooncake_store_importable():
    import sys

    import kvpool.mooncake as kvm
    if "mooncake" in sys.modules:
        pytest.skip("a real mooncake is imported")
    kvm.install_as_mooncake()
    try:
        from mooncake.store import MooncakeDistributedStore as Imported
        from mooncake.store import ReplicateConfig as ImportedConfig
        assert Imported is MooncakeDistributedStore
        assert ImportedConfig is ReplicateConfig
    finally:
        del sys.modules["mooncake"], sys.modules["mooncake.store"]
