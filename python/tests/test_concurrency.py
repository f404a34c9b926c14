"""Many threads on one kvpool.Store and one MooncakeDistributedStore, and
proof that every blocking call releases the GIL: with the master behind a
proxy that stops forwarding, each call blocks until its RPC deadline while
the main thread keeps running Python code."""

import threading
import time

import numpy as np
import pytest

import kvpool
from kvpool.mooncake import MooncakeDistributedStore
from kvpool_testing import PausableProxy

MiB = 1 << 20
RPC_TIMEOUT_MS = 800


@pytest.fixture(scope="module")
def cluster():
    with kvpool.LocalCluster(num_nodes=2, segment_size=64 * MiB) as c:
        yield c


def mooncake_client(master_address, **extra):
    s = MooncakeDistributedStore()
    config = {"local_hostname": "127.0.0.1", "global_segment_size": 0,
              "local_buffer_size": "8MiB",
              "master_server_addr": master_address}
    config.update(extra)
    assert s.setup(config) == 0
    return s


def run_threads(n, body):
    errors = []

    def wrapped(i):
        try:
            body(i)
        except BaseException as e:  # reported by the main thread
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_threads_share_one_store_of_each_kind(cluster):
    native = cluster.new_store()
    mc = mooncake_client(cluster.master_address)
    rng = np.random.default_rng(3)
    blobs = [rng.bytes(int(n)) for n in rng.integers(1, 200_000, 16)]

    def body(t):
        buf = np.zeros(256 * 1024, np.uint8)
        native.register_buffer(buf.ctypes.data, buf.nbytes)
        assert mc.register_buffer(buf.ctypes.data, buf.nbytes) == 0
        for i in range(25):
            v = blobs[(t + i) % len(blobs)]
            k = "c-%d-%d" % (t, i)
            native.put(k, v)
            assert native.get(k) == v
            assert mc.get(k) == v
            assert mc.get_into(k, buf.ctypes.data, buf.nbytes) == len(v)
            assert buf[:len(v)].tobytes() == v
            mk = "m-%d-%d" % (t, i)
            assert mc.put(mk, v) == 0
            assert mc.is_exist(mk) == 1
            assert native.get_size(mk) == len(v)
        keys = ["c-%d-%d" % (t, i) for i in range(25)]
        assert native.batch_is_exist(keys) == [True] * 25
        assert mc.batch_is_exist(keys) == [1] * 25
        assert all(v is not None for v in native.batch_get(keys))
        native.unregister_buffer(buf.ctypes.data)
        assert mc.unregister_buffer(buf.ctypes.data) == 0

    assert run_threads(8, body) == []
    assert mc.close() == 0
    native.close()


def test_every_blocking_call_releases_the_gil(cluster):
    proxy = PausableProxy(int(cluster.master_address.rsplit(":", 1)[1]))
    native = kvpool.Store(proxy.address, rpc_timeout_ms=RPC_TIMEOUT_MS)
    mc = mooncake_client(proxy.address, rpc_timeout_ms=RPC_TIMEOUT_MS)
    buf = np.zeros(MiB, np.uint8)
    p = buf.ctypes.data
    native.register_buffer(p, buf.nbytes)
    assert mc.register_buffer(p, buf.nbytes) == 0
    native.put("gil-1", b"x" * 100)  # the connections exist before the pause
    assert mc.get("gil-1") == b"x" * 100

    def swallow(f):
        def call():
            try:
                f()
            except kvpool.StoreError:
                pass  # the deadline; only the blocking matters here
        return call

    k, ks = "gil-1", ["gil-1", "gil-2"]
    calls = {
        "Store.put": lambda: native.put("gil-n", b"v"),
        "Store.upsert": lambda: native.upsert("gil-n", b"v"),
        "Store.batch_put": lambda: native.batch_put(["gil-n"], [b"v"]),
        "Store.get": lambda: native.get(k),
        "Store.batch_get": lambda: native.batch_get(ks),
        "Store.get_into(buffer)": lambda: native.get_into(k, bytearray(200)),
        "Store.get_into(ptr)": lambda: native.get_into(k, p, 200),
        "Store.put_from": lambda: native.put_from("gil-n", p, 10),
        "Store.batch_put_from": lambda: native.batch_put_from(["gil-n"], [p],
                                                              [10]),
        "Store.batch_get_into": lambda: native.batch_get_into([k], [p], [200]),
        "Store.is_exist": lambda: native.is_exist(k),
        "Store.batch_is_exist": lambda: native.batch_is_exist(ks),
        "Store.get_size": lambda: native.get_size(k),
        "Store.remove": lambda: native.remove("gil-n"),
        "Store.remove_all": lambda: native.remove_all(),
        "Store.remove_by_regex": lambda: native.remove_by_regex("gil-n"),
        "Store.get_tier_info": lambda: native.get_tier_info(k),
        "Store.batch_get_tier_info": lambda: native.batch_get_tier_info(ks),
        "Store.batch_prefetch_to_memory":
            lambda: native.batch_prefetch_to_memory(ks),
        "Store.stat": lambda: native.stat(),
        "Mooncake.setup": lambda: MooncakeDistributedStore().setup(
            {"local_hostname": "127.0.0.1", "global_segment_size": 0,
             "master_server_addr": proxy.address,
             "rpc_timeout_ms": RPC_TIMEOUT_MS}),
        "Mooncake.put": lambda: mc.put("gil-m", b"v"),
        "Mooncake.upsert": lambda: mc.upsert("gil-m", b"v"),
        "Mooncake.put_parts": lambda: mc.put_parts("gil-m", b"a", b"b"),
        "Mooncake.put_batch": lambda: mc.put_batch(["gil-m"], [b"v"]),
        "Mooncake.get": lambda: mc.get(k),
        "Mooncake.get_batch": lambda: mc.get_batch(ks),
        "Mooncake.get_buffer": lambda: mc.get_buffer(k),
        "Mooncake.batch_get_buffer": lambda: mc.batch_get_buffer(ks),
        "Mooncake.get_size": lambda: mc.get_size(k),
        "Mooncake.is_exist": lambda: mc.is_exist(k),
        "Mooncake.batch_is_exist": lambda: mc.batch_is_exist(ks),
        "Mooncake.remove": lambda: mc.remove("gil-m"),
        "Mooncake.batch_remove": lambda: mc.batch_remove(["gil-m"]),
        "Mooncake.remove_all": lambda: mc.remove_all(),
        "Mooncake.remove_by_regex": lambda: mc.remove_by_regex("gil-m"),
        "Mooncake.put_from": lambda: mc.put_from("gil-m", p, 10),
        "Mooncake.get_into": lambda: mc.get_into(k, p, 200),
        "Mooncake.batch_put_from": lambda: mc.batch_put_from(["gil-m"], [p],
                                                             [10]),
        "Mooncake.batch_get_into": lambda: mc.batch_get_into([k], [p], [200]),
        "Mooncake.get_into_ranges": lambda: mc.get_into_ranges(
            [p], [[k]], [[[0]]], [[[0]]], [[[10]]]),
        "Mooncake.get_replica_desc": lambda: mc.get_replica_desc(k),
        "Mooncake.batch_get_replica_desc":
            lambda: mc.batch_get_replica_desc(ks),
        "Mooncake.health_check": lambda: mc.health_check(),
    }
    windows = {}

    def timed(name, f):
        t0 = time.monotonic()
        swallow(f)()
        windows[name] = (t0, time.monotonic())

    proxy.pause()
    threads = [threading.Thread(target=timed, args=item)
               for item in calls.items()]
    for t in threads:
        t.start()
    samples = []
    while any(t.is_alive() for t in threads):
        samples.append(time.monotonic())
        time.sleep(0.001)
    for t in threads:
        t.join()
    proxy.resume()

    samples = np.array(samples)
    for name, (t0, t1) in windows.items():
        # It blocked (else this proves nothing) ...
        assert t1 - t0 >= 0.5 * RPC_TIMEOUT_MS / 1000, name
        # ... and the main thread ran Python meanwhile.
        inside = np.count_nonzero((samples > t0 + 0.1) & (samples < t1 - 0.1))
        assert inside >= 20, (name, inside)

    # Forwarding again: both stores recover.
    assert native.get("gil-1") == b"x" * 100
    assert mc.get("gil-1") == b"x" * 100
    mc.close()
    native.close()
    proxy.close()
