"""kvpool.mooncake's torch tensor methods (Mooncake's byte format, TP and
parallelism key naming, error returns), the unsupported-method stubs and
MooncakeHostMemAllocator, against a kvpool-master started here."""

import ctypes
import struct

import pytest

from kvpool.mooncake import (MooncakeDistributedStore, MooncakeHostMemAllocator,
                             ParallelAxis, ReadTarget, ReplicateConfig,
                             TensorParallelism)
from kvpool_testing import MasterProcess

MiB = 1 << 20
INVALID_PARAMS = -600
HEADER = 304


# -------------------------------------------------------------- allocator
# (no torch needed)


def test_allocator_alloc_free():
    a = MooncakeHostMemAllocator()
    p = a.alloc(10000)
    assert p % 4096 == 0
    assert ctypes.string_at(p, 10000) == bytes(10000)  # zero-filled
    ctypes.memset(p, 7, 10000)
    assert ctypes.string_at(p + 9999, 1) == b"\x07"
    # Another instance frees it (one table, as Mooncake's ShmHelper).
    assert MooncakeHostMemAllocator().free(p) == 0
    assert a.free(p) == -1  # already freed
    assert a.free(12345) == -1  # never allocated
    assert a.free("x") == -1


def test_allocator_zero_and_bad_size():
    a = MooncakeHostMemAllocator()
    with pytest.raises(RuntimeError):
        a.alloc(0)
    with pytest.raises(TypeError):
        a.alloc(-1)


def test_unsupported_methods_raise():
    s = MooncakeDistributedStore()
    for name, args in [("create_copy_task", ("k", ["s"])),
                       ("create_move_task", ("k", "a", "b")),
                       ("query_task", (None,)), ("init_all", ("tcp", "")),
                       ("alloc_from_mem_pool", (10,)),
                       ("save_tensor_to_safetensor", ("k",)),
                       ("load_tensor_from_safetensor", (None, "f"))]:
        with pytest.raises(NotImplementedError, match=name):
            getattr(s, name)(*args)


# ---------------------------------------------------------------- tensors

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def master():
    m = MasterProcess()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def store(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 * MiB, 16 * MiB, "tcp",
                   "", master.address) == 0
    yield s
    s.close()


def _dtypes():
    names = ["float32", "float16", "bfloat16", "int8", "int16", "int32",
             "int64", "uint8", "bool", "float64", "float8_e4m3fn",
             "float8_e5m2"]
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def _sample(dtype, shape):
    base = torch.arange(1, 1 + int(torch.tensor(shape).prod()))
    if dtype == torch.bool:
        return (base % 2 == 0).reshape(shape)
    if dtype in (torch.int8, torch.uint8):
        base = base % 100
    return base.to(torch.float32).to(dtype).reshape(shape) \
        if dtype.is_floating_point else base.to(dtype).reshape(shape)


def _equal(a, b):
    return a is not None and a.dtype == b.dtype and a.shape == b.shape and \
        torch.equal(a.view(torch.uint8) if a.element_size() == 1 and
                    a.dtype.is_floating_point else a,
                    b.view(torch.uint8) if b.element_size() == 1 and
                    b.dtype.is_floating_point else b)


@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
def test_round_trip_each_dtype(store, dtype):
    t = _sample(dtype, (3, 5))
    key = "rt-%s" % dtype
    assert store.put_tensor(key, t) == 0
    assert _equal(store.get_tensor(key), t)


@pytest.mark.parametrize("shape", [(7,), (2, 3), (2, 3, 4), (2, 1, 3, 2),
                                   ()])
def test_round_trip_shapes(store, shape):
    t = torch.randn(shape)
    key = "shape-%d-%s" % (len(shape), "x".join(map(str, shape)))
    assert store.put_tensor(key, t) == 0
    assert _equal(store.get_tensor(key), t)


def test_non_contiguous_input(store):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6).t()
    assert not t.is_contiguous()
    assert store.put_tensor("noncontig", t) == 0
    assert _equal(store.get_tensor("noncontig"), t.contiguous())


def test_stored_bytes_are_mooncake_layout(store):
    t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    assert store.put_tensor("layout", t) == 0
    raw = store.get("layout")
    assert len(raw) == HEADER + 24
    magic, version, hsize, dtype, ndim, kind, _, off, nbytes = \
        struct.unpack_from("<IHHiiIIQQ", raw, 0)
    assert (magic, version, hsize) == (0x4D4F4F4E, 1, HEADER)
    assert (dtype, ndim, kind, off, nbytes) == (6, 2, 0, HEADER, 24)
    assert struct.unpack_from("<8q", raw, 40) == (2, 3) + (-1,) * 6
    assert struct.unpack_from("<8q", raw, 104) == (2, 3) + (-1,) * 6
    assert struct.unpack_from("<II", raw, 168) == (0, 0)
    assert raw[176:HEADER] == bytes(128)
    assert raw[HEADER:] == t.numpy().tobytes()


def test_batch_forms_with_missing_key(store):
    ts = [torch.randn(4), torch.ones(2, 2, dtype=torch.int64)]
    assert store.batch_put_tensor(["b-1", "b-2"], ts) == [0, 0]
    got = store.batch_get_tensor(["b-1", "b-missing", "b-2"])
    assert _equal(got[0], ts[0]) and got[1] is None and _equal(got[2], ts[1])
    assert store.batch_pub_tensor(["b-3"], [ts[0]], ReplicateConfig()) == [0]
    assert store.get_tensor("b-missing") is None


def test_get_tensor_into_registered_buffer(store):
    t = torch.randn(8, 16)
    buf = (ctypes.c_ubyte * (1 * MiB))()
    ptr = ctypes.addressof(buf)
    assert store.register_buffer(ptr, len(buf)) == 0
    try:
        assert store.put_tensor("into-1", t) == 0
        got = store.get_tensor_into("into-1", ptr, len(buf))
        assert _equal(got, t)
        assert got.data_ptr() == ptr + HEADER  # a view of the buffer
        assert store.get_tensor_into("into-missing", ptr, len(buf)) is None
        half = len(buf) // 2
        res = store.batch_get_tensor_into(["into-1", "into-missing"],
                                          [ptr, ptr + half], [half, half])
        assert _equal(res[0], t) and res[1] is None
        assert store.batch_get_tensor_into(["into-1"], [ptr, ptr], [8]) == \
            [INVALID_PARAMS]
        # put_tensor_from of the object now in the buffer.
        n = HEADER + t.numel() * 4
        assert store.put_tensor_from("into-2", ptr, n) == 0
        assert _equal(store.get_tensor("into-2"), t)
        assert store.put_tensor_from("into-3", 0, n) == INVALID_PARAMS
        assert store.put_tensor_from("into-3", ptr, HEADER) == INVALID_PARAMS
        assert store.put_tensor_with_tp_from("into-tp", ptr, n,
                                             tp_size=2, split_dim=0) == 0
        assert _equal(store.get_tensor_with_tp("into-tp", 1, 2), t[4:])
    finally:
        store.unregister_buffer(ptr)


def test_tp_split_and_reassembly(store):
    t = torch.randn(3, 10, 2)
    assert store.put_tensor_with_tp("tp-1", t, tp_size=4, split_dim=1) == 0
    pieces = torch.chunk(t, 4, dim=1)
    for rank in range(4):
        shard = store.get_tensor_with_tp("tp-1", rank, 4, 1)
        assert _equal(shard, pieces[rank].contiguous())
        assert _equal(store.get_tensor("tp-1_tp_%d" % rank),
                      pieces[rank].contiguous())
    raw = store.get("tp-1_tp_3")
    assert struct.unpack_from("<I", raw, 16) == (1,)  # shard layout
    assert struct.unpack_from("<8q", raw, 40)[:3] == (3, 10, 2)
    assert struct.unpack_from("<8q", raw, 104)[:3] == (3, 1, 2)
    assert struct.unpack_from("<6iq", raw, 176) == (1, 0, 3, 4, 1, 0, 1)
    got = store.batch_get_tensor_with_tp(["tp-1", "tp-none"], 2, 4)
    assert _equal(got[0], pieces[2].contiguous()) and got[1] is None
    # One row cannot make two pieces: that slot alone fails.
    assert store.batch_put_tensor_with_tp(["tp-2", "tp-3"],
                                          [t, t[:1]], tp_size=2,
                                          split_dim=0) == [0, INVALID_PARAMS]
    assert store.batch_put_tensor_with_tp(["tp-2", "tp-3"], [t, t[:2]],
                                          tp_size=2, split_dim=0) == [0, 0]
    assert _equal(store.get_tensor_with_tp("tp-3", 1, 2), t[1:2])
    # tp_size 1 is a plain put/get at the key.
    assert store.put_tensor_with_tp("tp-4", t) == 0
    assert _equal(store.get_tensor("tp-4"), t)
    # A piece would be empty (3 rows, 4 ranks): refused.
    assert store.put_tensor_with_tp("tp-5", t, tp_size=4, split_dim=0) == \
        INVALID_PARAMS


def _tp(rank, size, split_dim):
    return TensorParallelism([ParallelAxis("tp", rank, size, split_dim)])


def test_parallelism_variants(store):
    t = torch.randn(4, 6)
    assert store.put_tensor_with_parallelism("par-1", t, _tp(0, 2, 1)) == 0
    pieces = torch.chunk(t, 2, dim=1)
    for rank in range(2):
        target = ReadTarget("shard", _tp(rank, 2, 1))
        assert _equal(store.get_tensor_with_parallelism("par-1", target),
                      pieces[rank].contiguous())
        # Same key naming as the _with_tp calls.
        assert _equal(store.get_tensor_with_tp("par-1", rank, 2, 1),
                      pieces[rank].contiguous())
    full = store.get_tensor_with_parallelism(
        "par-1", ReadTarget("full", _tp(0, 2, 1)))
    assert _equal(full, t)
    # DP + TP: the full tensor split along TP, DP rank in the key.
    par = TensorParallelism([ParallelAxis("dp", 1, 2),
                             ParallelAxis("tp", 0, 2, 0)])
    assert store.put_tensor_with_parallelism("par-2", t, par) == 0
    assert store.get("par-2__dp_1of2__tp_1of2_sd0") != b""
    shard = store.get_tensor_with_parallelism(
        "par-2", ReadTarget("shard", TensorParallelism(
            [ParallelAxis("tp", 1, 2, 0), ParallelAxis("dp", 1, 2)])))
    assert _equal(shard, t[2:])
    assert _equal(store.get_tensor_with_parallelism(
        "par-2", ReadTarget("full", par)), t)
    # Writer partitions: each writer stores its piece; a full read joins.
    for rank in range(3):
        assert store.put_tensor_with_parallelism(
            "par-3", torch.arange(12).reshape(6, 2),
            writer_partition=(rank, 3, 0)) == 0
    assert _equal(store.get_tensor_with_parallelism(
        "par-3", ReadTarget("full")), torch.arange(12).reshape(6, 2))
    assert _equal(store.get_tensor_with_parallelism(
        "par-3", ReadTarget("shard", _tp(1, 3, 0))),
        torch.arange(4, 8).reshape(2, 2))
    # No parallelism: a full object; batch forms.
    assert store.batch_put_tensor_with_parallelism(
        ["par-4", "par-5"], [t, t], [None, _tp(1, 2, 0)]) == [0, 0]
    got = store.batch_get_tensor_with_parallelism(
        ["par-4", "par-5", "par-x"],
        [None, ReadTarget("shard", _tp(1, 2, 0)), None])
    assert _equal(got[0], t) and _equal(got[1], t[2:]) and got[2] is None
    # Errors.
    assert store.put_tensor_with_parallelism(
        "par-6", t, _tp(0, 2, 0), writer_partition=(0, 2, 0)) == \
        INVALID_PARAMS
    assert store.put_tensor_with_parallelism(
        "par-6", t, TensorParallelism([ParallelAxis("tp", 0, 2)])) == \
        INVALID_PARAMS  # TP needs split_dim
    assert store.put_tensor_with_parallelism(
        "par-6", t, TensorParallelism([ParallelAxis("xx", 0, 2)])) == \
        INVALID_PARAMS
    assert store.get_tensor_with_parallelism(
        "par-1", ReadTarget("shard")) is None


def test_upsert_tensor_forms(store):
    if not hasattr(MooncakeDistributedStore, "upsert_parts"):
        pytest.skip("upsert_parts not in this build yet")
    assert store.put_tensor("up-1", torch.zeros(3)) == 0
    assert store.put_tensor("up-1", torch.ones(3)) == 0  # put keeps it
    assert _equal(store.get_tensor("up-1"), torch.zeros(3))
    assert store.upsert_tensor("up-1", torch.ones(4)) == 0
    assert _equal(store.get_tensor("up-1"), torch.ones(4))
    assert store.upsert_pub_tensor("up-1", torch.ones(2), None) == 0
    assert _equal(store.get_tensor("up-1"), torch.ones(2))
    if hasattr(MooncakeDistributedStore, "upsert_batch"):
        assert store.batch_upsert_tensor(["up-1", "up-2"],
                                         [torch.ones(5), torch.ones(1)]) \
            == [0, 0]
        assert _equal(store.get_tensor("up-1"), torch.ones(5))
    assert store.upsert_tensor_with_parallelism(
        "up-3", torch.ones(4), _tp(0, 2, 0)) == 0


def test_bad_input_returns_codes(store):
    t = torch.ones(2)
    assert store.put_tensor("bad", [1, 2]) == INVALID_PARAMS
    assert store.put_tensor("bad", None) == INVALID_PARAMS
    assert store.put_tensor(5, t) == INVALID_PARAMS
    assert store.put_tensor("bad", torch.zeros(0)) == INVALID_PARAMS
    assert store.put_tensor("bad", torch.ones([1] * 9)) == INVALID_PARAMS
    assert store.put_tensor("bad", torch.ones(2, dtype=torch.complex64)) \
        == INVALID_PARAMS
    assert store.batch_put_tensor(["a", "b"], [t]) == [INVALID_PARAMS] * 2
    assert store.batch_put_tensor([], []) == []
    assert store.batch_put_tensor(["a", "b"], [t, "x"])[1] == INVALID_PARAMS
    assert store.put_tensor_with_tp("bad", t, tp_size=2, split_dim=5) == \
        INVALID_PARAMS
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    cfg.preferred_segments = ["only-one"]
    assert store.pub_tensor("bad", t, cfg) == INVALID_PARAMS
    assert store.batch_pub_tensor(["bad"], [t], cfg) == [INVALID_PARAMS]
    # A value that is not a tensor object, or too short for the header.
    assert store.put("short", b"x" * 100) == 0
    assert store.get_tensor("short") is None
    assert store.put("long", b"x" * 1000) == 0
    assert store.get_tensor("long") is None
    assert store.batch_get_tensor(["short", "long"]) == [None, None]
    assert store.get_tensor(123) is None
    # Unknown dtype number in an otherwise valid header.
    assert store.put_tensor("dt", torch.ones(2)) == 0
    raw = bytearray(store.get("dt"))
    struct.pack_into("<i", raw, 8, 99)
    assert store.put("dt-bad", bytes(raw)) == 0
    assert store.get_tensor("dt-bad") is None
    # Not set up.
    fresh = MooncakeDistributedStore()
    assert fresh.put_tensor("k", t) < 0
    assert fresh.get_tensor("k") is None
    assert fresh.batch_get_tensor(["k"]) in ([None], [])
