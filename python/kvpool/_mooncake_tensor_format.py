"""Mooncake Store's tensor object format and shard key naming (used by
_mooncake_tensor.py, the tensor methods).

Values are Mooncake tensor objects, byte for byte (so Mooncake and kvpool
clients can read each other's tensors):

    [TensorMetadata, 304 bytes][raw tensor data, C order]

TensorMetadata (little endian, natural alignment, no padding):

    offset size  field
         0    4  magic        u32 0x4D4F4F4E
         4    2  version      u16 1
         6    2  header_size  u16 304
         8    4  dtype        i32 (TensorDtype: float32=0 ... float8_e5m2=14)
        12    4  ndim         i32 (0..8)
        16    4  layout_kind  u32 (0 full object, 1 shard)
        20    4  reserved     u32 0
        24    8  data_offset  u64 304
        32    8  data_bytes   u64 (value size - data_offset)
        40   64  global_shape i64[8] (-1 past ndim)
       104   64  local_shape  i64[8] (-1 past ndim)
       168    4  axis_count   u32 (0..4)
       172    4  reserved     u32 0
       176  128  axes[4], 32 bytes each: kind i32 (dp 0, tp 1, ep 2, pp 3),
                 axis_index i32, shard_rank i32, shard_count i32,
                 split_dim i32 (-1: none), reserved0 i32 (expert/stage id),
                 reserved1 i64 (local extent of split_dim)

Return conventions are Mooncake's: writers return 0 or a negative error
code (INVALID_PARAMS, -600, for bad input), getters return a tensor or None.
torch is imported on first use, so ``kvpool.mooncake`` imports without it.
"""

import ctypes
import functools
import struct

INVALID_PARAMS = -600

MAGIC = 0x4D4F4F4E
VERSION = 1
MAX_DIMS = 8
MAX_AXES = 4

_HEADER = struct.Struct("<IHHiiIIQQ")
_SHAPE = struct.Struct("<8q")
_COUNT = struct.Struct("<II")
_AXIS = struct.Struct("<6iq")
HEADER_SIZE = _HEADER.size + 2 * _SHAPE.size + _COUNT.size + \
    MAX_AXES * _AXIS.size  # 304

LAYOUT_FULL = 0
LAYOUT_SHARD = 1

AXIS_KINDS = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
_AXIS_NAMES = {v: k for k, v in AXIS_KINDS.items()}
_AXIS_ORDER = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}

# The writer-partition manifest: magic, version, header_size, dtype, ndim,
# split_dim, shard_count, reserved, 4 bytes of padding, global shape i64[8].
_MANIFEST = struct.Struct("<IHHiiiii4x8q")  # 96 bytes
MANIFEST_MAGIC = 0x574D414E

# TensorDtype numbering -> torch attribute name.
_DTYPE_NAMES = ("float32", "float64", "int8", "uint8", "int16", "uint16",
                "int32", "uint32", "int64", "uint64", "bool", "float16",
                "bfloat16", "float8_e4m3fn", "float8_e5m2")

_torch = None


def _t():
    global _torch
    if _torch is None:
        import torch
        _torch = torch
    return _torch


def dtype_code(dtype):
    """The TensorDtype number of a torch dtype, or -1 (UNKNOWN)."""
    torch = _t()
    for code, name in enumerate(_DTYPE_NAMES):
        if getattr(torch, name, None) == dtype:
            return code
    return -1


def torch_dtype(code):
    """The torch dtype of a TensorDtype number, or None."""
    if not 0 <= code < len(_DTYPE_NAMES):
        return None
    return getattr(_t(), _DTYPE_NAMES[code], None)


# ----------------------------------------------------------------- metadata


def _shape8(shape):
    dims = list(shape) + [-1] * (MAX_DIMS - len(shape))
    return _SHAPE.pack(*dims)


def encode_metadata(dtype, global_shape, local_shape, data_bytes,
                    layout_kind=LAYOUT_FULL, axes=()):
    """TensorMetadata bytes. ``axes``: (kind, rank, count, split_dim or None,
    reserved0) tuples; reserved1 is the local extent of split_dim."""
    out = bytearray(_HEADER.pack(MAGIC, VERSION, HEADER_SIZE, dtype,
                                 len(global_shape), layout_kind, 0,
                                 HEADER_SIZE, data_bytes))
    out += _shape8(global_shape)
    out += _shape8(local_shape)
    out += _COUNT.pack(len(axes), 0)
    for i in range(MAX_AXES):
        if i < len(axes):
            kind, rank, count, split_dim, reserved0 = axes[i]
            extent = local_shape[split_dim] if split_dim is not None else 0
            out += _AXIS.pack(kind, i, rank, count,
                              -1 if split_dim is None else split_dim,
                              reserved0, extent)
        else:
            out += bytes(_AXIS.size)
    return bytes(out)


class Metadata:
    __slots__ = ("dtype", "ndim", "layout_kind", "data_offset", "data_bytes",
                 "global_shape", "local_shape", "axes")


def decode_metadata(buf, total):
    """Parses and checks the metadata at the start of ``buf`` (a value of
    ``total`` bytes), as Mooncake's ValidateTensorMetadata does; None if it
    is not a tensor object."""
    if total < HEADER_SIZE or len(buf) < HEADER_SIZE:
        return None
    (magic, version, header_size, dtype, ndim, layout_kind, _, data_offset,
     data_bytes) = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC or version != VERSION or header_size != HEADER_SIZE:
        return None
    if not 0 <= dtype < len(_DTYPE_NAMES) or not 0 <= ndim <= MAX_DIMS:
        return None
    if layout_kind > LAYOUT_SHARD:
        return None
    if not HEADER_SIZE <= data_offset <= total or \
            data_bytes != total - data_offset:
        return None
    gshape = _SHAPE.unpack_from(buf, _HEADER.size)
    lshape = _SHAPE.unpack_from(buf, _HEADER.size + _SHAPE.size)
    for i in range(MAX_DIMS):
        if i < ndim:
            if gshape[i] <= 0 or lshape[i] < 0:
                return None
        elif gshape[i] != -1 or lshape[i] != -1:
            return None
    axis_count, _ = _COUNT.unpack_from(buf, _HEADER.size + 2 * _SHAPE.size)
    if axis_count > MAX_AXES:
        return None
    axes = []
    base = _HEADER.size + 2 * _SHAPE.size + _COUNT.size
    for i in range(axis_count):
        kind, _, rank, count, split_dim, reserved0, _ = _AXIS.unpack_from(
            buf, base + i * _AXIS.size)
        if not 0 <= kind <= 4 or count <= 0 or not 0 <= rank < count:
            return None
        if not -1 <= split_dim < ndim:
            return None
        axes.append((kind, rank, count, split_dim, reserved0))
    m = Metadata()
    m.dtype, m.ndim, m.layout_kind = dtype, ndim, layout_kind
    m.data_offset, m.data_bytes = data_offset, data_bytes
    m.global_shape = tuple(gshape[:ndim])
    m.local_shape = tuple(lshape[:ndim])
    m.axes = axes
    return m


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def decode_tensor(buf, total, address=None):
    """A tensor from a tensor object of ``total`` bytes: copied out of the
    bytes-like ``buf``, or, with ``address``, a tensor viewing the memory
    there (as Mooncake's get_tensor_into returns). None if malformed."""
    torch = _t()
    m = decode_metadata(buf, total)
    if m is None or m.data_bytes == 0:
        return None
    dtype = torch_dtype(m.dtype)
    if dtype is None:
        return None
    elem = torch.empty((), dtype=dtype).element_size()
    if _numel(m.local_shape) * elem != m.data_bytes:
        return None
    if address is None:
        raw = bytearray(memoryview(buf)[m.data_offset:total])
    else:
        raw = (ctypes.c_char * m.data_bytes).from_address(
            address + m.data_offset)
    flat = torch.frombuffer(raw, dtype=torch.uint8)
    return flat.view(dtype).reshape(m.local_shape)


# ------------------------------------------------------------------ tensors


def _is_cpu_tensor(tensor):
    torch = _t()
    return isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu"


def _data_view(tensor):
    """(contiguous tensor, 1-D byte view of its data); the tensor must stay
    alive while the view is used."""
    c = tensor.contiguous()
    nbytes = c.numel() * c.element_size()
    view = (ctypes.c_char * nbytes).from_address(c.data_ptr())
    return c, memoryview(view).cast("B")


def _tensor_object(tensor, global_shape=None, axes=()):
    """(metadata bytes, contiguous tensor, data view) of a CPU tensor, or
    None when Mooncake refuses the tensor (not a CPU tensor, unknown dtype,
    more than 8 dimensions, a zero-sized dimension)."""
    if not _is_cpu_tensor(tensor):
        return None
    code = dtype_code(tensor.dtype)
    shape = tuple(tensor.shape)
    if code < 0 or len(shape) > MAX_DIMS or any(d <= 0 for d in shape):
        return None
    c, view = _data_view(tensor)
    if global_shape is None:
        meta = encode_metadata(code, shape, shape, view.nbytes)
    else:
        meta = encode_metadata(code, tuple(global_shape), shape, view.nbytes,
                               LAYOUT_SHARD, axes)
    return meta, c, view


def shard_range(dim_size, rank, count):
    """(start, length) of shard ``rank`` of ``count`` along a dimension of
    ``dim_size``: ceil-sized pieces, as torch.chunk cuts them."""
    chunk = -(-dim_size // count)
    start = rank * chunk
    if start >= dim_size:
        return dim_size, 0
    return start, min(chunk, dim_size - start)


def tp_shards(tensor, tp_size, split_dim):
    """The tp_size pieces of a tensor along split_dim, or None when the
    split is not possible or a piece would be empty (Mooncake refuses)."""
    if not _is_cpu_tensor(tensor) or not isinstance(tp_size, int) or \
            not isinstance(split_dim, int):
        return None
    if tp_size <= 0 or not 0 <= split_dim < tensor.dim():
        return None
    pieces = []
    for rank in range(tp_size):
        start, length = shard_range(tensor.shape[split_dim], rank, tp_size)
        if length == 0:
            return None
        pieces.append(tensor.narrow(split_dim, start, length))
    return pieces


def tp_key(key, rank):
    return "%s_tp_%d" % (key, rank)


# -------------------------------------------------------------- parallelism


class ParallelAxis:
    """One axis of a shard's identity (Mooncake's ``ParallelAxis``)."""

    def __init__(self, kind="", rank=0, size=1, split_dim=None,
                 expert_id=None, stage_id=None):
        self.kind = kind
        self.rank = rank
        self.size = size
        self.split_dim = split_dim
        self.expert_id = expert_id
        self.stage_id = stage_id

    def __repr__(self):
        return ("ParallelAxis(kind=%r, rank=%r, size=%r, split_dim=%r, "
                "expert_id=%r, stage_id=%r)" % (
                    self.kind, self.rank, self.size, self.split_dim,
                    self.expert_id, self.stage_id))


class TensorParallelism:
    """An ordered list of axes (Mooncake's ``TensorParallelism``)."""

    def __init__(self, axes=None):
        self.axes = list(axes) if axes else []

    def __repr__(self):
        return "TensorParallelism(axes=%r)" % (self.axes,)


class ReadTarget:
    """What a read returns (Mooncake's ``ReadTarget``): mode "as_stored",
    "shard" (needs ``parallelism``) or "full"."""

    _MODES = ("as_stored", "shard", "full")

    def __init__(self, mode="as_stored", parallelism=None):
        self._mode = "as_stored"
        self.mode = mode
        self.parallelism = parallelism

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, value):
        if not isinstance(value, str) or value.lower() not in self._MODES:
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = value.lower()

    def __repr__(self):
        return "ReadTarget(mode=%r, parallelism=%r)" % (self._mode,
                                                        self.parallelism)


def _opt_int(v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError
    return v


def parse_parallelism(obj):
    """A validated, canonically ordered list of axis tuples
    (kind_name, rank, size, split_dim, expert_id, stage_id) in the order
    given, or None if invalid (Mooncake's validation rules)."""
    try:
        axes_in = list(obj.axes)
    except (AttributeError, TypeError):
        return None
    if not axes_in or len(axes_in) > MAX_AXES:
        return None
    axes, seen = [], set()
    try:
        for a in axes_in:
            kind = str(a.kind).lower()
            rank, size = _opt_int(a.rank), _opt_int(a.size)
            sd, eid, sid = (_opt_int(a.split_dim), _opt_int(a.expert_id),
                            _opt_int(a.stage_id))
            if kind not in AXIS_KINDS or rank is None or size is None:
                return None
            if size <= 0 or not 0 <= rank < size or kind in seen:
                return None
            seen.add(kind)
            if kind == "tp" and sd is None:
                return None
            if kind in ("dp", "ep", "pp") and sd is not None:
                return None
            if kind == "ep" and eid is None:
                return None
            if kind == "pp" and sid is None:
                return None
            axes.append((kind, rank, size, sd, eid, sid))
    except (AttributeError, TypeError, ValueError):
        return None
    return axes


def _canonical(axes):
    return sorted(axes, key=lambda a: _AXIS_ORDER[a[0]])


def parallelism_key(key, axes):
    """Mooncake's storage key of a shard: key_tp_<rank> for a lone TP axis,
    else key__<kind>_<rank>of<size>[_sd<d>][_eid<e>][_sid<s>] per axis in
    dp, tp, ep, pp order."""
    if len(axes) == 1 and axes[0][0] == "tp":
        return tp_key(key, axes[0][1])
    out = key
    for kind, rank, size, sd, eid, sid in _canonical(axes):
        out += "__%s_%dof%d" % (kind, rank, size)
        if sd is not None:
            out += "_sd%d" % sd
        if eid is not None:
            out += "_eid%d" % eid
        if sid is not None:
            out += "_sid%d" % sid
    return out


def metadata_axes(axes):
    """Axis tuples for encode_metadata, in the order given."""
    out = []
    for kind, rank, size, sd, eid, sid in axes:
        reserved0 = eid if kind == "ep" else sid if kind == "pp" else 0
        out.append((AXIS_KINDS[kind], rank, size, sd, reserved0 or 0))
    return out


def stored_axes(m):
    """The parallelism recorded in a shard's metadata, canonical order."""
    out = []
    for kind, rank, count, sd, reserved0 in m.axes:
        name = _AXIS_NAMES.get(kind)
        if name is None:
            return None
        out.append((name, rank, count, None if sd < 0 else sd,
                    reserved0 if name == "ep" else None,
                    reserved0 if name == "pp" else None))
    return _canonical(out)


def with_tp_rank(axes, rank):
    return [(k, rank if k == "tp" else r, s, sd, e, st)
            for k, r, s, sd, e, st in axes]


def parse_writer_partition(obj):
    """(rank, size, split_dim) from an object with those attributes or a
    3-sequence; None if invalid."""
    try:
        if hasattr(obj, "rank"):
            vals = (obj.rank, obj.size, obj.split_dim)
        else:
            vals = tuple(obj)
        if len(vals) != 3:
            return None
        rank, size, sd = (_opt_int(v) for v in vals)
    except (AttributeError, TypeError, ValueError):
        return None
    if rank is None or size is None or sd is None:
        return None
    if size <= 0 or not 0 <= rank < size or sd < 0:
        return None
    return rank, size, sd


def writer_shard_key(key, rank, size, split_dim):
    return "%s__writer_%dof%d_sd%d" % (key, rank, size, split_dim)


def writer_manifest_key(key):
    return key + "__writer_manifest"


def encode_manifest(dtype, shape, split_dim, count):
    dims = list(shape) + [-1] * (MAX_DIMS - len(shape))
    return _MANIFEST.pack(MANIFEST_MAGIC, 1, _MANIFEST.size, dtype,
                          len(shape), split_dim, count, 0, *dims)


def decode_manifest(buf):
    """(dtype, global shape, split_dim, shard count) or None."""
    if buf is None or len(buf) < _MANIFEST.size:
        return None
    vals = _MANIFEST.unpack_from(buf, 0)
    magic, version, size, dtype, ndim, sd, count = vals[:7]
    if magic != MANIFEST_MAGIC or version != 1 or size != _MANIFEST.size:
        return None
    if not 0 <= ndim <= MAX_DIMS or count <= 0 or not 0 <= sd < ndim:
        return None
    shape = tuple(vals[8:8 + ndim])
    if any(d <= 0 for d in shape):
        return None
    return dtype, shape, sd, count


# ------------------------------------------------------- failure decorators
