"""kvpool.mooncake.MooncakeDistributedStore against a kvpool-master process
started here: every method, Mooncake's return conventions, zero copy with
ctypes and numpy buffers, and ReplicateConfig honoured by the master."""

import ctypes
import glob
import itertools
import os
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
    # Each failed setup needs a close() before the next (Mooncake's rule).
    for bad in (lambda: s.setup({"global_segment_size": "1MiB"}),
                lambda: s.setup({"local_hostname": "h",
                                 "global_segment_size": "lots"}),
                lambda: s.setup("h:notaport", "", 0, 0, "tcp", "",
                                "127.0.0.1:1")):
        assert bad() == INVALID_PARAMS
        assert s.close() == 0
    # Nothing listens on port 1: the master is unreachable.
    rc = s.setup("127.0.0.1", "", 0, 0, "tcp", "", "127.0.0.1:1")
    assert rc < 0 and rc != INVALID_PARAMS
    assert s.close() == 0


def test_setup_again_needs_a_close_first(master):
    s = MooncakeDistributedStore()
    cfg = {"local_hostname": "127.0.0.1", "global_segment_size": "8MB",
           "local_buffer_size": "1MB", "master_server_address": master.address}
    assert s.setup(cfg) == 0
    name = s.get_hostname()
    assert s.setup(cfg) == INVALID_PARAMS  # the first store stays
    assert s.get_hostname() == name and s.health_check() == 0
    assert s.close() == 0
    assert s.setup(dict(cfg, global_segment_size="50%")) == INVALID_PARAMS
    assert s.setup(cfg) == INVALID_PARAMS  # failed: close() first
    assert s.close() == 0
    assert s.setup(cfg) == 0
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
    # Per-key lists that do not match fail that key alone (one entry); a key
    # with no fragments gets an empty list; a missing key fails only itself.
    b0[:] = [0] * 32
    results = client.get_into_ranges(
        [p0, p1],
        [["gr-1", "gr-2", "gr-1"], ["gr-missing", "gr-2"]],
        [[[0, 1], [4], []], [[0], [8]]],
        [[[0], [0], []], [[0], [2]]],
        [[[2, 2], [4], []], [[1], [3]]],
    )
    assert results == [[[INVALID_PARAMS], [4], []],
                       [[OBJECT_NOT_FOUND], [3]]]
    assert bytes(b0[0:2]) == b"\0\0"  # the malformed key read nothing
    assert bytes(b0[4:8]) == bytes(range(100, 104))
    assert bytes(b1[8:11]) == bytes(range(102, 105))
    # Lists of different lengths across buffers: every entry fails.
    assert client.get_into_ranges([p0], [["gr-1"]], [], [], []) \
        == [[[INVALID_PARAMS]]]
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
    # Mooncake's soft_pin_ttl_ms is Optional[uint64]: None, or an int that
    # fits; anything else is a TypeError at assignment.
    for bad in (-5, 1 << 64, "5", 1.5):
        with pytest.raises(TypeError):
            c.soft_pin_ttl_ms = bad
    c.soft_pin_ttl_ms = (1 << 64) - 1
    assert c.soft_pin_ttl_ms == (1 << 64) - 1
    c.soft_pin_ttl_ms = None
    assert c.soft_pin_ttl_ms is None
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
        assert s.setup("127.0.0.1", "", 16 * MiB, 2 * MiB, "tcp", "",
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


# ------------------------------------------- Mooncake's semantics, matched


def test_setup_sizes_as_mooncake_writes_them(master):
    s = MooncakeDistributedStore()
    base = {"local_hostname": "127.0.0.1",
            "master_server_address": master.address}
    for size in ("16MB", "16 MB", "16mb", "16 MiB", "16777216", "0.015625 GB"):
        assert s.setup(dict(base, global_segment_size=size,
                            local_buffer_size="1 MB")) == 0, size
        assert s.put("size-" + size, b"ok") == 0
        assert s.close() == 0
    for bad in ("50%", "16 XB", "lots", ""):
        assert s.setup(dict(base, global_segment_size=bad)) != 0, bad


def test_hostname_without_port_takes_mooncakes_port_range(master, client):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "", 8 * MiB, MiB, "tcp", "",
                   master.address) == 0
    try:
        host, port = s.get_hostname().rsplit(":", 1)
        assert host == "127.0.0.1" and 12300 <= int(port) <= 14300
        c = ReplicateConfig()
        c.preferred_segment = s.get_hostname()
        assert client.put("port-range", b"here", c) == 0
        [d] = client.get_replica_desc("port-range")
        assert d.node_id == s.get_hostname()
    finally:
        assert s.close() == 0


def test_close_unmounts_and_the_store_sets_up_again(master, client):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "", 8 * MiB, MiB, "tcp", "",
                   master.address) == 0
    c = ReplicateConfig()
    c.preferred_segment = s.get_hostname()
    assert s.put("close-only-here", b"gone soon", c) == 0
    assert client.get("close-only-here") == b"gone soon"
    assert s.close() == 0
    # Its segment is gone, and the keys that lived only there with it.
    assert wait_until(lambda: client.is_exist("close-only-here") == 0)
    assert client.get("close-only-here") == b""
    assert s.setup("127.0.0.1", "", 8 * MiB, MiB, "tcp", "",
                   master.address) == 0
    try:
        assert s.get("close-only-here") == b""
        assert s.put("close-again", b"works") == 0
        assert s.get("close-again") == b"works"
    finally:
        assert s.close() == 0


def test_soft_pin_ttl_needs_a_soft_pin(client):
    def cfg(**kw):
        c = ReplicateConfig()
        for k, v in kw.items():
            setattr(c, k, v)
        return c
    assert client.upsert("sp-1", b"v", cfg(soft_pin_ttl_ms=1000)) \
        == INVALID_PARAMS
    assert client.upsert("sp-1", b"v", cfg(
        soft_pin_ttl_ms=1000, soft_pin_action=SoftPinAction.DISABLE)) \
        == INVALID_PARAMS
    assert client.put("sp-1", b"v", cfg(soft_pin_ttl_ms=1000)) \
        == INVALID_PARAMS
    assert client.is_exist("sp-1") == 0
    assert client.put("sp-1", b"v", cfg(
        soft_pin_ttl_ms=1000, soft_pin_action=SoftPinAction.ENABLE)) == 0
    assert client.upsert("sp-1", b"w", cfg(
        soft_pin_ttl_ms=1000, with_soft_pin=True)) == 0
    assert client.get("sp-1") == b"w"


def test_no_local_buffer_means_no_put_from_python_bytes(master, host):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "", 0, 0, "tcp", "", master.address) == 0
    try:
        for call in (lambda: s.put("nolb-1", b"v"),
                     lambda: s.upsert("nolb-1", b"v"),
                     lambda: s.put_parts("nolb-1", b"a", b"b"),
                     lambda: s.put_batch(["nolb-1"], [b"v"])):
            assert call() != 0
        assert host.is_exist("nolb-1") == 0
        # Zero-copy puts from registered memory still work, as in Mooncake.
        buf = (ctypes.c_ubyte * 64)()
        ptr = ctypes.addressof(buf)
        assert s.register_buffer(ptr, 64) == 0
        assert s.put_from("nolb-2", ptr, 64) == 0
        assert host.get("nolb-2") == bytes(64)
    finally:
        s.close()


# ------------------------------------------------- multi-buffer and upserts


def _registered(store, size, fill=None):
    buf = (ctypes.c_ubyte * size)()
    if fill is not None:
        ctypes.memmove(buf, fill, len(fill))
    assert store.register_buffer(ctypes.addressof(buf), size) == 0
    return buf, ctypes.addressof(buf)


def test_multi_buffer_put_and_get(client):
    # Two keys, each the concatenation of three layer pages.
    pages = [bytes([i]) * (1000 + 100 * i) for i in range(6)]
    src, sp = _registered(client, 1 << 16, b"".join(pages))
    offs = [0]
    for p in pages:
        offs.append(offs[-1] + len(p))
    keys = ["mb-1", "mb-2"]
    ptrs = [[sp + offs[i] for i in range(3)], [sp + offs[i] for i in range(3, 6)]]
    sizes = [[len(pages[i]) for i in range(3)],
             [len(pages[i]) for i in range(3, 6)]]
    assert client.batch_put_from_multi_buffers(keys, ptrs, sizes) == [0, 0]
    assert client.get("mb-1") == b"".join(pages[:3])
    assert client.get("mb-2") == b"".join(pages[3:])
    # Read back scattered over other buffers (a different split).
    dst, dp = _registered(client, 1 << 16)
    total = [sum(sizes[0]), sum(sizes[1])]
    got = client.batch_get_into_multi_buffers(
        keys + ["mb-missing"], [[dp, dp + 500], [dp + 8000], [dp + 20000]],
        [[500, total[0] - 500], [total[1]], [64]])
    assert got == [total[0], total[1], OBJECT_NOT_FOUND]
    assert bytes(dst[0:total[0]]) == b"".join(pages[:3])
    assert bytes(dst[8000:8000 + total[1]]) == b"".join(pages[3:])
    # Too little room: INVALID_PARAMS, as Mooncake.
    assert client.batch_get_into_multi_buffers(
        ["mb-1"], [[dp]], [[total[0] - 1]]) == [INVALID_PARAMS]
    # Ranges: only the bytes asked for.
    dst[0:16] = [0] * 16
    assert client.batch_get_into_multi_buffer_ranges(
        ["mb-1", "mb-2"], [[dp, dp + 4], [dp + 8]], [[4, 4], [8]],
        [[1000, 2100], [0]]) == [8, 8]
    assert bytes(dst[0:4]) == b"\1" * 4 and bytes(dst[4:8]) == b"\2" * 4
    assert bytes(dst[8:16]) == b"\3" * 8
    assert client.batch_get_into_multi_buffer_ranges(
        ["mb-1"], [[dp]], [[8]], [[total[0] - 4]]) == [INVALID_PARAMS]
    # Bad input: mismatched lists fail every key (Mooncake), unregistered or
    # negative buffers fail their key, never a crash.
    assert client.batch_put_from_multi_buffers(
        ["mb-x", "mb-y"], [[sp], [sp, sp]], [[4], [4]]) \
        == [INVALID_PARAMS, INVALID_PARAMS]
    assert client.batch_put_from_multi_buffers(["mb-x"], [[sp]], []) \
        == [INVALID_PARAMS]
    other = (ctypes.c_ubyte * 64)()
    assert client.batch_put_from_multi_buffers(
        ["mb-x", "mb-y"], [[ctypes.addressof(other)], [sp]], [[64], [-1]]) \
        == [INVALID_PARAMS, INVALID_PARAMS]
    assert client.batch_get_into_multi_buffers(
        ["mb-1"], [[ctypes.addressof(other)]], [[64]]) == [INVALID_PARAMS]
    assert client.batch_is_exist(["mb-x", "mb-y"]) == [0, 0]
    client.unregister_buffer(sp)
    client.unregister_buffer(dp)


def test_upsert_forms_and_metadata_put(client):
    src, sp = _registered(client, 4096, b"A" * 1024 + b"B" * 1024 + b"M" * 16)
    assert client.upsert_from("up-1", sp, 1024) == 0
    assert client.get("up-1") == b"A" * 1024
    assert client.upsert_from("up-1", sp + 1024, 1000) == 0
    assert client.get("up-1") == b"B" * 1000
    assert client.batch_upsert_from(["up-1", "up-2"], [sp, sp + 1024],
                                    [10, 20]) == [0, 0]
    assert client.get_batch(["up-1", "up-2"]) == [b"A" * 10, b"B" * 20]
    assert client.batch_upsert_from(["up-1"], [sp], [1, 2]) == [INVALID_PARAMS]
    assert client.upsert_parts("up-3", b"x", b"yz") == 0
    assert client.upsert_parts("up-3", b"1", b"23", b"4") == 0
    assert client.get("up-3") == b"1234"
    assert client.upsert_batch(["up-3", "up-4"], [b"new", b"four"]) == 0
    assert client.get_batch(["up-3", "up-4"]) == [b"new", b"four"]
    assert client.upsert_batch(["up-3"], []) == INVALID_PARAMS
    # put_from_with_metadata: the object is metadata then data.
    assert client.put_from_with_metadata("up-md", sp, sp + 2048, 8, 16) == 0
    assert client.get("up-md") == b"M" * 16 + b"A" * 8
    assert client.put_from_with_metadata("up-md2", sp, 0, 8, 16) \
        == INVALID_PARAMS
    client.unregister_buffer(sp)


def test_batch_remove_and_setup_keywords(master, client):
    assert client.put_batch(["br-1", "br-2"], [b"1", b"2"]) == 0
    assert client.batch_remove(["br-1", "br-missing", "br-2"], force=True) \
        == [0, OBJECT_NOT_FOUND, 0]
    assert client.batch_is_exist(["br-1", "br-2"]) == [0, 0]
    # SGLang passes these as keywords after the seven positional arguments.
    t = MooncakeDistributedStore()
    assert t.setup("127.0.0.1", "P2PHANDSHAKE", 0, MiB, "tcp", "",
                   master.address, tenant_id="kw-tenant",
                   enable_ssd_offload=False, ssd_offload_path="") == 0
    try:
        assert t.put("kw-1", b"tenant's") == 0
        assert client.is_exist("kw-1") == 0  # another tenant's key
        assert t.get("kw-1") == b"tenant's"
    finally:
        t.close()
    # SSD offload asked for without a path is a clear error.
    assert t.setup("127.0.0.1", "", 8 * MiB, MiB, "tcp", "", master.address,
                   enable_ssd_offload=True) == INVALID_PARAMS


def test_master_lists_segments_as_mooncakes_http_api():
    """SGLang's check_server polls GET /get_all_segments on the master's
    metrics port until the answer is not empty."""
    import socket
    import urllib.error
    import urllib.request
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        http_port = probe.getsockname()[1]
    m = MasterProcess("--metrics_port=%d" % http_port)
    base = "http://127.0.0.1:%d" % http_port

    def get(path):
        try:
            with urllib.request.urlopen(base + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    s = MooncakeDistributedStore()
    try:
        assert get("/get_all_segments") == (200, "")
        assert s.setup("127.0.0.1", "", 8 * MiB, MiB, "tcp", "",
                       m.address) == 0
        name = s.get_hostname()
        assert get("/get_all_segments") == (200, name + "\n")
        assert s.put("http-1", b"x" * 1000) == 0
        status, body = get("/query_segment?segment=" + name)
        lines = body.splitlines()
        assert status == 200 and lines[0] == name
        assert int(lines[1].split(":")[1]) >= 1000
        assert lines[2] == "Capacity(bytes) : %d" % (8 * MiB)
        assert get("/query_segment?segment=nope:1")[0] == 404
        assert get("/query_segment")[0] == 400
        # A mounted segment goes under the store's name: listed once, its
        # capacity added.
        assert s.allocate_and_mount_segment(4 * MiB)["ret"] == 0
        assert get("/get_all_segments") == (200, name + "\n")
        lines = get("/query_segment?segment=" + name)[1].splitlines()
        assert lines[2] == "Capacity(bytes) : %d" % (12 * MiB)
        assert s.close() == 0
        assert get("/get_all_segments") == (200, "")
    finally:
        s.close()
        m.stop()


LEASE_EXPIRED = -707


def test_put_and_get_sessions_layer_by_layer(client):
    """Mooncake's session API: reserve, write layer by layer, publish; read
    layer by layer under one lease."""
    layers, page = 3, 4096
    src, sp = _registered(client, layers * page * 2,
                          bytes(range(256)) * (layers * page * 2 // 256))
    dst, dp = _registered(client, layers * page * 2)
    keys = ["ss-1", "ss-2"]
    assert client.batch_put_session_start(keys, [layers * page] * 2) == [0, 0]
    # Not readable before the end.
    assert client.is_exist("ss-1") == 0
    assert client.batch_put_session_start(["ss-1"], [page]) == [INVALID_PARAMS]
    for layer in range(layers):
        got = client.batch_put_from_multi_buffer_ranges(
            keys,
            [[sp + layer * page], [sp + (layers + layer) * page]],
            [[page], [page]],
            [[layer * page], [layer * page]])
        assert got == [page, page]
    # A range past the reserved size fails its key, never writes.
    assert client.batch_put_from_multi_buffer_ranges(
        ["ss-1"], [[sp]], [[page]], [[layers * page - 1]]) == [INVALID_PARAMS]
    assert client.batch_put_session_end(keys) == [0, 0]
    assert client.batch_put_session_end(keys) == [OBJECT_NOT_FOUND] * 2
    assert client.get("ss-1") == bytes(src[0:layers * page])
    assert client.get("ss-2") == bytes(src[layers * page:2 * layers * page])
    # Revoked sessions leave nothing.
    assert client.batch_put_session_start(["ss-3"], [page]) == [0]
    assert client.batch_put_session_revoke(["ss-3"]) == [0]
    assert client.is_exist("ss-3") == 0
    assert client.batch_put_from_multi_buffer_ranges(
        ["ss-3"], [[sp]], [[page]], [[0]]) == [OBJECT_NOT_FOUND]

    # Read sessions: one lookup, then layer by layer.
    assert client.batch_get_session_start(keys + ["ss-missing"]) \
        == [0, 0, OBJECT_NOT_FOUND]
    for layer in reversed(range(layers)):
        got = client.batch_get_into_multi_buffer_ranges(
            keys, [[dp + layer * page], [dp + (layers + layer) * page]],
            [[page], [page]], [[layer * page], [layer * page]])
        assert got == [page, page]
    assert bytes(dst[:]) == bytes(src[:])
    # Past the lease (2 s in this fixture), the session's reads fail; a new
    # session reads again.
    assert wait_until(lambda: client.batch_get_into_multi_buffer_ranges(
        ["ss-1"], [[dp]], [[page]], [[0]]) == [LEASE_EXPIRED], timeout=10)
    assert client.batch_get_session_start(["ss-1"]) == [0]
    assert client.batch_get_into_multi_buffer_ranges(
        ["ss-1"], [[dp]], [[page]], [[0]]) == [page]
    assert client.batch_get_session_end(keys) == 0
    client.unregister_buffer(sp)
    client.unregister_buffer(dp)


def test_multi_buffer_over_tcp(master, host):
    """The same calls with the TCP data plane (one range per buffer)."""
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": "127.0.0.1", "global_segment_size": "0",
                    "local_buffer_size": "1MB", "transport": "tcp",
                    "master_server_address": master.address}) == 0
    try:
        src, sp = _registered(s, 1 << 16, bytes(range(256)) * 256)
        dst, dp = _registered(s, 1 << 16)
        assert s.batch_put_from_multi_buffers(
            ["tcp-mb"], [[sp, sp + 1000, sp + 5000]], [[1000, 4000, 3000]]) \
            == [0]
        assert host.get("tcp-mb") == bytes(src[0:8000])
        assert s.batch_get_into_multi_buffers(
            ["tcp-mb"], [[dp + 100, dp + 3100]], [[3000, 5000]]) == [8000]
        assert bytes(dst[100:8100]) == bytes(src[0:8000])
        assert s.batch_get_into_multi_buffer_ranges(
            ["tcp-mb"], [[dp, dp + 10]], [[10, 10]], [[7990, 0]]) == [20]
        assert bytes(dst[0:10]) == bytes(src[7990:8000])
        assert bytes(dst[10:20]) == bytes(src[0:10])
        assert s.batch_put_session_start(["tcp-ss"], [8192]) == [0]
        assert s.batch_put_from_multi_buffer_ranges(
            ["tcp-ss"], [[sp + 4096, sp]], [[4096, 4096]], [[0, 4096]]) \
            == [8192]
        assert s.batch_put_session_end(["tcp-ss"]) == [0]
        assert host.get("tcp-ss") == bytes(src[4096:8192]) + bytes(src[0:4096])
    finally:
        s.close()


def test_setup_dummy_talks_to_a_hosting_node_process(master):
    """Standalone mode: a kvpool-node hosts the DRAM; the engine's store
    keeps none and finds the master through the node."""
    import os
    import subprocess
    from kvpool_testing import BIN_DIR
    node = subprocess.Popen(
        [os.path.join(BIN_DIR, "kvpool-node"),
         "--master_server_address=" + master.address,
         "--global_segment_size=16MiB", "--metrics_port=0",
         "--local_hostname=127.0.0.1", "--data_bind_address=127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    s = MooncakeDistributedStore()
    try:
        m = None
        for line in node.stdout:  # spdlog also writes to stdout
            m = re.search(r"^kvpool-node (\S+) .*metrics_port=(\d+)", line)
            if m:
                break
        assert m
        node_id, http_port = m.group(1), int(m.group(2))
        assert s.setup_dummy(0, MiB, "127.0.0.1:nope") == INVALID_PARAMS
        assert s.setup_dummy(0, MiB, "127.0.0.1:1") == -900  # nothing there
        assert s.setup_dummy(64 * MiB, MiB, "127.0.0.1:%d" % http_port) == 0
        assert s.get_hostname() == "127.0.0.1:0"  # hosts nothing itself
        c = ReplicateConfig()
        c.preferred_segment = node_id
        assert s.put("dummy-1", b"standalone", c) == 0
        assert s.get("dummy-1") == b"standalone"
        [d] = s.get_replica_desc("dummy-1")
        assert d.node_id == node_id
        # batch_replica_clear: only keys whose every replica is on the
        # named segment, and only once no lease holds them.
        assert s.batch_replica_clear(["dummy-1"], "other:1") == []
        assert wait_until(lambda: s.batch_replica_clear(["dummy-1"], node_id)
                          == ["dummy-1"], timeout=10)
        assert s.is_exist("dummy-1") == 0
    finally:
        s.close()
        node.terminate()
        node.wait(timeout=10)


def test_empty_values_are_puts_that_store_nothing(client):
    """Mooncake answers 0 for an empty put and stores nothing."""
    buf, ptr = _registered(client, 4096, b"abcdefgh")
    assert client.put("empty-1", b"") == 0
    assert client.put_parts("empty-2", b"", b"") == 0
    assert client.put_from("empty-3", ptr, 0) == 0
    assert client.batch_put_from(["empty-4", "full-4"], [ptr, ptr], [0, 8]) \
        == [0, 0]
    assert client.batch_put_from_multi_buffers(
        ["empty-5", "full-5"], [[ptr], [ptr, ptr]], [[0], [0, 8]]) == [0, 0]
    assert client.batch_is_exist(
        ["empty-%d" % i for i in range(1, 6)]) == [0] * 5
    assert client.get_batch(["full-4", "full-5"]) == [b"abcdefgh"] * 2
    # A zero-sized session cannot hold anything: refused.
    assert client.batch_put_session_start(["empty-6"], [0]) == [INVALID_PARAMS]
    client.unregister_buffer(ptr)


# ------------------------------------------------------------ mount_segment
# Mooncake's mount_segment(path, size, offset=0, protocol="tcp", location="")
# hands the pool a region of a file the caller maps itself (here a numpy
# memmap of a file under /dev/shm, the caller's own memory).

PAGE = os.sysconf("SC_PAGE_SIZE")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                  r"[0-9a-f]{12}")
_caller_files = itertools.count()


@pytest.fixture
def caller_file():
    """A page, then 8 MiB, of a file under /dev/shm mapped by this process
    as a numpy array (0xAB everywhere)."""
    path = "/dev/shm/kvpool_pytest_mount_%d_%d" % (os.getpid(),
                                                    next(_caller_files))
    with open(path, "wb") as f:
        f.truncate(PAGE + 8 * MiB)
    mem = np.memmap(path, dtype=np.uint8, mode="r+")
    mem[:] = 0xAB
    yield path, mem
    del mem
    os.unlink(path)


def _mappings_of(path):
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith(path))


@pytest.fixture
def small_host(master):
    """A hosting store whose own segment (1 MiB) cannot take a 2 MiB value:
    such values land in what is mounted."""
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "", 1 * MiB, 4 * MiB, "tcp", "",
                   master.address) == 0
    yield s
    s.close()


def test_mount_segment_serves_a_callers_file_over_tcp(master, client,
                                                      small_host,
                                                      caller_file):
    path, mem = caller_file
    here = ReplicateConfig()
    here.preferred_segment = small_host.get_hostname()
    big = [bytes(np.random.default_rng(i).integers(0, 256, 2 * MiB,
                                                   dtype=np.uint8))
           for i in range(3)]
    assert _mappings_of(path) == 1  # the caller's own
    # Mooncake's positional order: path, size, offset, protocol, location.
    r = small_host.mount_segment(path, 8 * MiB, PAGE, "tcp", "")
    assert r["ret"] == 0, r
    [sid] = r["segment_ids"]
    assert UUID.fullmatch(sid)
    assert _mappings_of(path) == 2

    native = kvpool.Store(master.address)  # auto: shm where it can
    try:
        for i, v in enumerate(big):
            assert small_host.put("mnt-%d" % i, v, here) == 0
            # The value is in the caller's memory, where the master put it.
            [rep] = native.get_tier_info("mnt-%d" % i).replicas
            start = PAGE + rep.offset
            assert bytes(mem[start:start + len(v)]) == v
            # Read back by other clients, byte-exact, over TCP.
            assert native.get("mnt-%d" % i) == v
            assert client.get("mnt-%d" % i) == v
        counters = native.counters()
        assert counters["tcp_bytes_read"] == 3 * 2 * MiB
        assert counters["shm_bytes_read"] == 0
        assert all(b == 0xAB for b in bytes(mem[:PAGE]))  # outside the region

        assert small_host.unmount_segment([sid]) == 0
        assert _mappings_of(path) == 1
        for i in range(3):
            assert client.get("mnt-%d" % i) == b""
            assert client.is_exist("mnt-%d" % i) == 0
            assert client.get_size("mnt-%d" % i) == OBJECT_NOT_FOUND
        # The caller has its memory back: what it writes is never read,
        # and nothing is placed there any more (the store's own segment is
        # too small: the value goes to another store's).
        mem[:] = 0
        assert small_host.put("mnt-again", big[0], here) == 0
        [rep] = native.get_tier_info("mnt-again").replicas
        assert rep.node_id != small_host.get_hostname()
        assert client.get("mnt-again") == big[0]
        assert client.get("mnt-0") == b""
    finally:
        native.close()


def test_mount_segment_errors_answer_mooncakes_codes(master, client,
                                                    small_host, caller_file):
    path, mem = caller_file
    fail = {"ret": -1, "segment_ids": []}
    # Not set up, or a pure client (which hosts no segment): -1, as Mooncake
    # answers for a store that is not a real, set up client.
    assert MooncakeDistributedStore().mount_segment(path, MiB) == fail
    assert MooncakeDistributedStore().unmount_segment(["x"]) == -1
    assert client.mount_segment(path, MiB) == fail
    assert client.allocate_and_mount_segment(MiB) == dict(fail,
                                                          allocated_size=0)
    s = small_host
    assert s.mount_segment(path + ".missing", MiB) == fail
    assert s.mount_segment("", MiB) == fail
    assert s.mount_segment(path, MiB, 100) == fail          # unaligned offset
    assert s.mount_segment(path, 9 * MiB, PAGE) == fail     # past the end
    assert s.mount_segment(path, -1) == fail
    assert s.mount_segment(path, MiB, -PAGE) == fail
    # Zero bytes mount nothing and succeed, as in Mooncake (once the file
    # opens and the offset is valid).
    assert s.mount_segment(path, 0, PAGE) == {"ret": 0, "segment_ids": []}
    assert s.mount_segment(path + ".missing", 0) == fail
    assert s.mount_segment(path, 0, 100) == fail
    # The hosting store's own segment file: its bytes are in use already.
    # In /dev/shm, or in the huge tmpfs the node mounted under it
    # (segment_huge_pages).
    own = "kvpool-%d-%s" % (os.getpid(), s.get_hostname())
    own = (glob.glob("/dev/shm/kvpool-huge-%d-*/%s" % (os.getpid(), own)) +
           ["/dev/shm/" + own])[0]
    assert s.mount_segment(own, MiB) == fail
    r = s.mount_segment(path, 4 * MiB, PAGE)
    assert r["ret"] == 0
    [sid] = r["segment_ids"]
    # The same bytes twice would hand each range out twice: refused (where
    # Mooncake would mount them again).
    assert s.mount_segment(path, 4 * MiB, PAGE) == fail
    assert s.mount_segment(path, 2 * PAGE) == fail
    r2 = s.mount_segment(path, 4 * MiB, PAGE + 4 * MiB)  # the rest is free
    assert r2["ret"] == 0
    # Unknown and malformed ids: -1; the others in the list still go.
    assert s.unmount_segment(["not-a-uuid"]) == -1
    assert s.unmount_segment(["00000000-0000-0000-0000-000000000001"]) == -1
    assert s.unmount_and_free_segment([sid]) == -1  # not an allocated one
    assert s.unmount_segment([]) == 0
    assert s.unmount_segment(["nope", sid]) == -1
    assert s.unmount_segment([sid]) == -1  # gone already
    with pytest.raises(TypeError):  # a list of ids, as in Mooncake
        s.unmount_segment(r2["segment_ids"][0])
    # The grace period is accepted (kvpool unmounts at once).
    assert s.unmount_segment(r2["segment_ids"], 5) == 0
    assert s.unmount_segment(r2["segment_ids"], grace_period_seconds=0) == -1
    assert _mappings_of(path) == 1
    assert s.health_check() == 0 and s.put("after-errors", b"ok") == 0
    assert client.get("after-errors") == b"ok"


def test_allocate_and_mount_segment_and_close(master, client, small_host,
                                              caller_file):
    s = small_host
    here = ReplicateConfig()
    here.preferred_segment = s.get_hostname()
    r = s.allocate_and_mount_segment(4 * MiB + 1, "tcp", "")
    assert r["ret"] == 0 and len(r["segment_ids"]) == 1
    assert r["allocated_size"] == 4 * MiB + PAGE  # whole pages
    v = bytes(range(256)) * (3 * MiB // 256)
    assert s.put("alloc-1", v, here) == 0
    # The store's own memory: a client on this host maps it.
    native = kvpool.Store(master.address, transport="shm")
    try:
        assert native.get("alloc-1") == v
        assert native.counters()["shm_bytes_read"] == len(v)
    finally:
        native.close()
    assert s.unmount_segment(r["segment_ids"]) == -1  # not a mount_segment id
    assert s.unmount_and_free_segment(r["segment_ids"]) == 0
    assert client.get("alloc-1") == b""
    assert s.allocate_and_mount_segment(0) == {
        "ret": -1, "segment_ids": [], "allocated_size": 0}
    # close() takes every mounted segment out of the pool, and the store
    # lets go of the caller's file.
    path, _ = caller_file
    m = s.mount_segment(path, 4 * MiB, PAGE)
    a = s.allocate_and_mount_segment(4 * MiB)
    assert m["ret"] == 0 and a["ret"] == 0
    assert s.put("close-mounted", v, here) == 0
    assert client.get("close-mounted") == v
    assert s.close() == 0
    assert wait_until(lambda: client.is_exist("close-mounted") == 0)
    assert _mappings_of(path) == 1
