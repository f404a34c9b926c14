"""Mooncake Store's torch tensor methods, written over kvpool's byte API.

Values are Mooncake tensor objects, byte for byte (the layout and the shard
key names are in _mooncake_tensor_format.py), so Mooncake and kvpool
clients read each other's tensors. Return conventions are Mooncake's:
writers return 0 or a negative error code (INVALID_PARAMS, -600, for bad
input), getters return a tensor or None.
"""

import ctypes
import functools

from ._mooncake_tensor_format import (  # noqa: F401
    AXIS_KINDS,
    HEADER_SIZE,
    INVALID_PARAMS,
    _canonical,
    _is_cpu_tensor,
    _t,
    _tensor_object,
    decode_manifest,
    decode_metadata,
    decode_tensor,
    dtype_code,
    encode_manifest,
    metadata_axes,
    parallelism_key,
    parse_parallelism,
    parse_writer_partition,
    stored_axes,
    tp_key,
    tp_shards,
    with_tp_rank,
    writer_manifest_key,
    writer_shard_key,
)

def _fail_int(*_a, **_k):
    return INVALID_PARAMS


def _fail_none(*_a, **_k):
    return None


def _len_of(seq):
    try:
        return len(seq)
    except TypeError:
        return 0


def _fail_list_int(self, keys=None, *_a, **_k):
    return [INVALID_PARAMS] * _len_of(keys)


def _fail_list_none(self, keys=None, *_a, **_k):
    return [None] * _len_of(keys)


def guarded(fail):
    """Turns any exception from inside a method into its failure value."""

    def wrap(fn):
        @functools.wraps(fn)
        def method(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except NotImplementedError:
                raise
            except Exception:
                return fail(self, *args, **kwargs)
        return method
    return wrap


# ------------------------------------------------------------ store methods


def _config_ok(config):
    """Mooncake's validate_replicate_config: preferred_segments, when given,
    must have replica_num entries."""
    if config is None:
        return True
    segs = getattr(config, "preferred_segments", None) or []
    return not segs or len(segs) == getattr(config, "replica_num", 1)


def _cfg(config):
    """A ReplicateConfig object: the native methods are given one always
    (Mooncake's default ReplicateConfig{} when the caller passed None)."""
    if config is not None:
        return config
    from ._kvpool import ReplicateConfig
    return ReplicateConfig()


def _same_len_lists(*seqs):
    if not all(isinstance(s, (list, tuple)) for s in seqs):
        return False
    return len({len(s) for s in seqs}) == 1


class TensorMethods:
    """Mooncake's tensor methods; mixed into kvpool.mooncake's
    MooncakeDistributedStore, whose byte methods (put_parts, put_batch,
    get_buffer, get_into, put_from, ... and their upsert forms) they call."""

    # --------------------------------------------------------- internals

    def _write_parts(self, key, meta, view, config, upsert):
        if not isinstance(key, str):
            return INVALID_PARAMS
        fn = self.upsert_parts if upsert else self.put_parts
        return fn(key, meta, view, config=_cfg(config))

    def _write_one(self, key, tensor, config, upsert):
        obj = _tensor_object(tensor)
        if obj is None:
            return INVALID_PARAMS
        meta, keep, view = obj
        rc = self._write_parts(key, meta, view, config, upsert)
        del keep
        return rc

    def _write_tp(self, key, tensor, config, tp_size, split_dim, upsert,
                  axes=None):
        """Splits a full tensor into all tp_size shards and writes each,
        under key_tp_<rank> (or the parallelism key of ``axes``); the first
        error wins."""
        pieces = tp_shards(tensor, tp_size, split_dim)
        if pieces is None:
            return INVALID_PARAMS
        for rank, piece in enumerate(pieces):
            if axes is None:
                shard_key = tp_key(key, rank)
                maxes = [(AXIS_KINDS["tp"], rank, tp_size, split_dim, 0)]
            else:
                ranked = with_tp_rank(axes, rank)
                shard_key = parallelism_key(key, ranked)
                maxes = metadata_axes(ranked)
            obj = _tensor_object(piece, tuple(tensor.shape), maxes)
            if obj is None:
                return INVALID_PARAMS
            meta, keep, view = obj
            rc = self._write_parts(shard_key, meta, view, config, upsert)
            del keep
            if rc != 0:
                return rc
        return 0

    def _write_many(self, keys, objs, config, upsert):
        """Writes (key, (meta, tensor, view) or None) pairs; one result per
        key. One batch call; per-key calls when the batch fails, to learn
        which key failed (a put of an existing key is a no-op success)."""
        results = [INVALID_PARAMS] * len(keys)
        idx = [i for i, o in enumerate(objs)
               if o is not None and isinstance(keys[i], str)]
        if not idx:
            return results
        values = [bytes(objs[i][0]) + objs[i][2].tobytes() for i in idx]
        batch = self.upsert_batch if upsert else self.put_batch
        rc = batch([keys[i] for i in idx], values, config=_cfg(config))
        if rc == 0:
            for i in idx:
                results[i] = 0
            return results
        for i in idx:
            meta, _, view = objs[i]
            results[i] = self._write_parts(keys[i], meta, view, config,
                                           upsert)
        return results

    def _batch_write(self, keys, tensors, config, upsert):
        if not _same_len_lists(keys, tensors) or not keys:
            return [INVALID_PARAMS] * _len_of(keys)
        if not _config_ok(config):
            return [INVALID_PARAMS] * len(keys)
        return self._write_many(list(keys),
                                [_tensor_object(t) for t in tensors],
                                config, upsert)

    def _batch_write_tp(self, keys, tensors, config, tp_size, split_dim,
                        upsert):
        if not _same_len_lists(keys, tensors) or not keys:
            return [INVALID_PARAMS] * _len_of(keys)
        if not _config_ok(config):
            return [INVALID_PARAMS] * len(keys)
        all_keys, all_objs, owner = [], [], []
        results = [INVALID_PARAMS] * len(keys)
        for i, (key, tensor) in enumerate(zip(keys, tensors)):
            pieces = tp_shards(tensor, tp_size, split_dim)
            if pieces is None or not isinstance(key, str):
                continue
            for rank, piece in enumerate(pieces):
                all_keys.append(tp_key(key, rank))
                all_objs.append(_tensor_object(
                    piece, tuple(tensor.shape),
                    [(AXIS_KINDS["tp"], rank, tp_size, split_dim, 0)]))
                owner.append(i)
        if not all_keys:
            return results
        codes = self._write_many(all_keys, all_objs, config, upsert)
        done = set()
        for i, code in zip(owner, codes):
            if i in done:
                continue
            if code != 0:
                results[i] = code
                done.add(i)
            else:
                results[i] = 0
        return results

    def _read(self, key):
        if not isinstance(key, str):
            return None
        h = self.get_buffer(key)
        if h is None:
            return None
        return decode_tensor(memoryview(h), h.size())

    def _read_into(self, key, buffer_ptr, size):
        if not isinstance(key, str):
            return None
        n = self.get_into(key, buffer_ptr, size)
        if n <= HEADER_SIZE:
            return None
        head = ctypes.string_at(buffer_ptr, HEADER_SIZE)
        return decode_tensor(head, n, address=buffer_ptr)

    def _read_meta(self, key):
        """(metadata, BufferHandle) of a stored tensor object, or None."""
        h = self.get_buffer(key)
        if h is None:
            return None
        m = decode_metadata(memoryview(h), h.size())
        return None if m is None else (m, h)

    # ------------------------------------------------------- put and get

    @guarded(_fail_int)
    def put_tensor(self, key, tensor):
        """Stores a CPU tensor (any layout; a non-contiguous tensor is
        copied contiguous first). 0 or a negative error code."""
        return self._write_one(key, tensor, None, False)

    @guarded(_fail_int)
    def upsert_tensor(self, key, tensor):
        return self._write_one(key, tensor, None, True)

    @guarded(_fail_int)
    def pub_tensor(self, key, tensor, config=None):
        if not _config_ok(config):
            return INVALID_PARAMS
        return self._write_one(key, tensor, config, False)

    @guarded(_fail_int)
    def upsert_pub_tensor(self, key, tensor, config=None):
        if not _config_ok(config):
            return INVALID_PARAMS
        return self._write_one(key, tensor, config, True)

    @guarded(_fail_list_int)
    def batch_put_tensor(self, keys, tensors_list):
        return self._batch_write(keys, tensors_list, None, False)

    @guarded(_fail_list_int)
    def batch_upsert_tensor(self, keys, tensors_list):
        return self._batch_write(keys, tensors_list, None, True)

    @guarded(_fail_list_int)
    def batch_pub_tensor(self, keys, tensors_list, config=None):
        return self._batch_write(keys, tensors_list, config, False)

    @guarded(_fail_list_int)
    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        return self._batch_write(keys, tensors_list, config, True)

    @guarded(_fail_none)
    def get_tensor(self, key):
        """The stored tensor (a copy owned by Python) or None."""
        return self._read(key)

    @guarded(_fail_list_none)
    def batch_get_tensor(self, keys):
        if not isinstance(keys, (list, tuple)):
            return []
        if not keys:
            return []
        if not all(isinstance(k, str) for k in keys):
            return [self._read(k) for k in keys]
        handles = self.batch_get_buffer(list(keys))
        if len(handles) != len(keys):
            return [None] * len(keys)
        return [None if h is None else decode_tensor(memoryview(h), h.size())
                for h in handles]

    @guarded(_fail_none)
    def get_tensor_into(self, key, buffer_ptr, size):
        """Reads the tensor object into a registered buffer and returns a
        tensor viewing the buffer's data (no copy), or None."""
        return self._read_into(key, buffer_ptr, size)

    @guarded(_fail_list_int)
    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        """Tensors viewing the buffers, None in a failed slot. Mismatched
        list lengths: INVALID_PARAMS in every slot, as Mooncake."""
        if not _same_len_lists(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * _len_of(keys)
        if not keys:
            return []
        if not all(isinstance(k, str) for k in keys):
            return [INVALID_PARAMS] * len(keys)
        counts = self.batch_get_into(list(keys), list(buffer_ptrs),
                                     list(sizes))
        out = []
        for ptr, n in zip(buffer_ptrs, counts):
            if n <= HEADER_SIZE:
                out.append(None)
                continue
            head = ctypes.string_at(ptr, HEADER_SIZE)
            out.append(decode_tensor(head, n, address=ptr))
        return out

    # ---------------------------------------------------- zero-copy puts

    def _put_from_checked(self, key, buffer_ptr, size, upsert, config=None):
        if not isinstance(buffer_ptr, int) or buffer_ptr == 0:
            return INVALID_PARAMS
        if not isinstance(size, int) or size <= HEADER_SIZE:
            return INVALID_PARAMS
        fn = self.upsert_from if upsert else self.put_from
        return fn(key, buffer_ptr, size, config=_cfg(config))

    def _batch_put_from_checked(self, keys, buffer_ptrs, sizes, upsert,
                                config=None):
        if isinstance(keys, (list, tuple)) and not keys:
            return []
        if not _same_len_lists(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * _len_of(keys)
        for p, s in zip(buffer_ptrs, sizes):
            if not isinstance(p, int) or p == 0 or \
                    not isinstance(s, int) or s <= HEADER_SIZE:
                return [INVALID_PARAMS] * len(keys)
        fn = self.batch_upsert_from if upsert else self.batch_put_from
        return fn(list(keys), list(buffer_ptrs), list(sizes),
                  config=_cfg(config))

    @guarded(_fail_int)
    def put_tensor_from(self, key, buffer_ptr, size):
        """Stores ``size`` bytes of a registered buffer that already holds a
        tensor object ([TensorMetadata][data])."""
        return self._put_from_checked(key, buffer_ptr, size, False)

    @guarded(_fail_int)
    def upsert_tensor_from(self, key, buffer_ptr, size):
        return self._put_from_checked(key, buffer_ptr, size, True)

    @guarded(_fail_list_int)
    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._batch_put_from_checked(keys, buffer_ptrs, sizes, False)

    @guarded(_fail_list_int)
    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._batch_put_from_checked(keys, buffer_ptrs, sizes, True)

    @staticmethod
    def _tensor_at(buffer_ptr, size):
        """A copy of the tensor object at buffer_ptr, or None."""
        if not isinstance(buffer_ptr, int) or buffer_ptr == 0 or \
                not isinstance(size, int) or size <= HEADER_SIZE:
            return None
        head = ctypes.string_at(buffer_ptr, HEADER_SIZE)
        if decode_metadata(head, size) is None:
            return None
        return decode_tensor(ctypes.string_at(buffer_ptr, size), size)

    # ---------------------------------------------------------------- TP

    @guarded(_fail_int)
    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1,
                           split_dim=0):
        """Splits the tensor into tp_size pieces along split_dim (torch.chunk
        sizes) and stores piece r under key_tp_<r>, for every r; tp_rank is
        unused, as in Mooncake. tp_size <= 1: put_tensor(key, tensor)."""
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._write_one(key, tensor, None, False)
        return self._write_tp(key, tensor, None, tp_size, split_dim, False)

    @guarded(_fail_int)
    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0,
                           tp_size=1, split_dim=0):
        if not _config_ok(config):
            return INVALID_PARAMS
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._write_one(key, tensor, config, False)
        return self._write_tp(key, tensor, config, tp_size, split_dim, False)

    @guarded(_fail_list_int)
    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0,
                                 tp_size=1, split_dim=0):
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._batch_write(base_keys, tensors_list, None, False)
        return self._batch_write_tp(base_keys, tensors_list, None, tp_size,
                                    split_dim, False)

    @guarded(_fail_list_int)
    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None,
                                 tp_rank=0, tp_size=1, split_dim=0):
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._batch_write(base_keys, tensors_list, config, False)
        return self._batch_write_tp(base_keys, tensors_list, config, tp_size,
                                    split_dim, False)

    @guarded(_fail_none)
    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """The shard key_tp_<tp_rank> (tp_size > 1) or the tensor at key."""
        if isinstance(tp_size, int) and tp_size > 1:
            return self._read(tp_key(key, tp_rank))
        return self._read(key)

    @guarded(_fail_list_none)
    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        if isinstance(tp_size, int) and tp_size > 1 and \
                isinstance(base_keys, (list, tuple)):
            base_keys = [tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor(base_keys)

    @guarded(_fail_none)
    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0,
                                tp_size=1, split_dim=0):
        if isinstance(tp_size, int) and tp_size > 1:
            key = tp_key(key, tp_rank)
        return self._read_into(key, buffer_ptr, size)

    @guarded(_fail_list_none)
    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes,
                                      tp_rank=0, tp_size=1, split_dim=0):
        if not isinstance(base_keys, (list, tuple)):
            return []
        if isinstance(tp_size, int) and tp_size > 1:
            base_keys = [tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor_into(base_keys, buffer_ptrs, sizes)

    @guarded(_fail_int)
    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0,
                                tp_size=1, split_dim=0):
        """A full tensor object in a buffer, split and stored as with
        put_tensor_with_tp. tp_size <= 1: put_tensor_from."""
        tensor = self._tensor_at(buffer_ptr, size)
        if tensor is None:
            return INVALID_PARAMS
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._put_from_checked(key, buffer_ptr, size, False)
        return self._write_tp(key, tensor, None, tp_size, split_dim, False)

    @guarded(_fail_list_int)
    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes,
                                      tp_rank=0, tp_size=1, split_dim=0):
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self._batch_put_from_checked(base_keys, buffer_ptrs,
                                                sizes, False)
        if not _same_len_lists(base_keys, buffer_ptrs, sizes) or \
                not base_keys:
            return [INVALID_PARAMS] * _len_of(base_keys)
        tensors = [self._tensor_at(p, s) for p, s in zip(buffer_ptrs, sizes)]
        return self._batch_write_tp(base_keys, tensors, None, tp_size,
                                    split_dim, False)

    # ------------------------------------------------------- parallelism

    def _write_parallel(self, key, tensor, parallelism, config,
                        writer_partition, upsert):
        if parallelism is not None and writer_partition is not None:
            return INVALID_PARAMS
        if not _config_ok(config):
            return INVALID_PARAMS
        if writer_partition is not None:
            wp = parse_writer_partition(writer_partition)
            if wp is None or not _is_cpu_tensor(tensor):
                return INVALID_PARAMS
            rank, size, sd = wp
            pieces = tp_shards(tensor, size, sd)
            if pieces is None:
                return INVALID_PARAMS
            obj = _tensor_object(pieces[rank], tuple(tensor.shape),
                                 [(AXIS_KINDS["tp"], rank, size, sd, 0)])
            if obj is None:
                return INVALID_PARAMS
            meta, keep, view = obj
            rc = self._write_parts(writer_shard_key(key, rank, size, sd),
                                   meta, view, config, upsert)
            del keep
            if rc != 0:
                return rc
            manifest = encode_manifest(dtype_code(tensor.dtype),
                                       tuple(tensor.shape), sd, size)
            write = self.upsert if upsert else self.put
            return write(writer_manifest_key(key), manifest, _cfg(config))
        if parallelism is None:
            return self._write_one(key, tensor, config, upsert)
        axes = parse_parallelism(parallelism)
        if axes is None:
            return INVALID_PARAMS
        tp = [a for a in axes if a[0] == "tp"]
        if len(axes) == 1 and tp:
            # A lone TP axis: the full tensor is split into every rank's
            # shard under key_tp_<r>, as put_tensor_with_tp.
            return self._write_tp(key, tensor, config, tp[0][2], tp[0][3],
                                  upsert)
        if tp:
            return self._write_tp(key, tensor, config, tp[0][2], tp[0][3],
                                  upsert, axes)
        # No TP axis: the tensor is this shard, stored as it is.
        obj = _tensor_object(tensor, tuple(getattr(tensor, "shape", ())),
                             metadata_axes(axes))
        if obj is None:
            return INVALID_PARAMS
        meta, keep, view = obj
        rc = self._write_parts(parallelism_key(key, axes), meta, view,
                               config, upsert)
        del keep
        return rc

    def _batch_write_parallel(self, keys, tensors, parallelisms, config,
                              writer_partitions, upsert):
        n = _len_of(keys)
        if parallelisms is not None and writer_partitions is not None:
            return [INVALID_PARAMS] * n
        if not _same_len_lists(keys, tensors):
            return [INVALID_PARAMS] * n
        if parallelisms is None and writer_partitions is None:
            return self._batch_write(keys, tensors, config, upsert)
        reqs = parallelisms if parallelisms is not None else writer_partitions
        if not isinstance(reqs, list) or len(reqs) != n:
            return [INVALID_PARAMS] * n
        out = []
        for key, tensor, req in zip(keys, tensors, reqs):
            if parallelisms is not None:
                out.append(self._write_parallel(key, tensor, req, config,
                                                None, upsert))
            else:
                out.append(self._write_parallel(key, tensor, None, config,
                                                req, upsert))
        return out

    @guarded(_fail_int)
    def put_tensor_with_parallelism(self, key, tensor, parallelism=None,
                                    config=None, writer_partition=None):
        """parallelism None: a full object at key. A lone TP axis: the full
        tensor split into key_tp_<r> for every rank. Several axes with TP:
        the full tensor split along TP, one object per TP rank under the
        parallelism key. No TP axis: the tensor stored as that shard.
        writer_partition (rank, size, split_dim): only that rank's piece of
        the full tensor, plus a manifest so a "full" read can reassemble."""
        return self._write_parallel(key, tensor, parallelism, config,
                                    writer_partition, False)

    @guarded(_fail_int)
    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None,
                                       config=None, writer_partition=None):
        return self._write_parallel(key, tensor, parallelism, config,
                                    writer_partition, True)

    @guarded(_fail_list_int)
    def batch_put_tensor_with_parallelism(self, keys, tensors_list,
                                          parallelisms=None, config=None,
                                          writer_partitions=None):
        return self._batch_write_parallel(keys, tensors_list, parallelisms,
                                          config, writer_partitions, False)

    @guarded(_fail_list_int)
    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list,
                                             parallelisms=None, config=None,
                                             writer_partitions=None):
        return self._batch_write_parallel(keys, tensors_list, parallelisms,
                                          config, writer_partitions, True)

    def _write_parallel_from(self, key, buffer_ptr, size, parallelism,
                             config, writer_partition, upsert):
        if parallelism is None and writer_partition is None:
            if self._tensor_at(buffer_ptr, size) is None:
                return INVALID_PARAMS
            if not _config_ok(config):
                return INVALID_PARAMS
            return self._put_from_checked(key, buffer_ptr, size, upsert,
                                          config)
        tensor = self._tensor_at(buffer_ptr, size)
        if tensor is None:
            return INVALID_PARAMS
        return self._write_parallel(key, tensor, parallelism, config,
                                    writer_partition, upsert)

    def _batch_write_parallel_from(self, keys, buffer_ptrs, sizes,
                                   parallelisms, config, writer_partitions,
                                   upsert):
        n = _len_of(keys)
        if parallelisms is not None and writer_partitions is not None:
            return [INVALID_PARAMS] * n
        if not _same_len_lists(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * n
        if parallelisms is None and writer_partitions is None:
            if not _config_ok(config):
                return [INVALID_PARAMS] * n
            for p, s in zip(buffer_ptrs, sizes):
                if self._tensor_at(p, s) is None:
                    return [INVALID_PARAMS] * n
            return self._batch_put_from_checked(keys, buffer_ptrs, sizes,
                                                upsert, config)
        reqs = parallelisms if parallelisms is not None else writer_partitions
        if not isinstance(reqs, list) or len(reqs) != n:
            return [INVALID_PARAMS] * n
        out = []
        for key, p, s, req in zip(keys, buffer_ptrs, sizes, reqs):
            par, wp = (req, None) if parallelisms is not None else (None, req)
            out.append(self._write_parallel_from(key, p, s, par, config, wp,
                                                 upsert))
        return out

    @guarded(_fail_int)
    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size,
                                         parallelism=None, config=None,
                                         writer_partition=None):
        return self._write_parallel_from(key, buffer_ptr, size, parallelism,
                                         config, writer_partition, False)

    @guarded(_fail_int)
    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size,
                                            parallelism=None, config=None,
                                            writer_partition=None):
        return self._write_parallel_from(key, buffer_ptr, size, parallelism,
                                         config, writer_partition, True)

    @guarded(_fail_list_int)
    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                               parallelisms=None, config=None,
                                               writer_partitions=None):
        return self._batch_write_parallel_from(keys, buffer_ptrs, sizes,
                                               parallelisms, config,
                                               writer_partitions, False)

    @guarded(_fail_list_int)
    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs,
                                                  sizes, parallelisms=None,
                                                  config=None,
                                                  writer_partitions=None):
        return self._batch_write_parallel_from(keys, buffer_ptrs, sizes,
                                               parallelisms, config,
                                               writer_partitions, True)

    def _read_shard(self, key, axes):
        """The stored shard of ``axes`` (its metadata must match), falling
        back to a writer-partition shard for a lone TP axis."""
        got = self._read_meta(parallelism_key(key, axes))
        if got is not None and stored_axes(got[0]) == _canonical(axes):
            return decode_tensor(memoryview(got[1]), got[1].size())
        if len(axes) == 1 and axes[0][0] == "tp":
            _, rank, size, sd, _, _ = axes[0]
            got = self._read_meta(writer_shard_key(key, rank, size, sd))
            if got is not None and stored_axes(got[0]) == _canonical(axes):
                return decode_tensor(memoryview(got[1]), got[1].size())
        return None

    def _read_full(self, key, axes):
        torch = _t()
        if axes is None:
            h = self.get_buffer(writer_manifest_key(key))
            manifest = decode_manifest(None if h is None else memoryview(h))
            if manifest is None:
                return self._read(key)
            _, shape, sd, count = manifest
            keys = [writer_shard_key(key, r, count, sd) for r in range(count)]
        else:
            tp = [a for a in axes if a[0] == "tp"]
            if not tp:
                return None
            _, _, count, sd, _, _ = tp[0]
            shape = None
            if len(axes) == 1:
                keys = [tp_key(key, r) for r in range(count)]
            else:
                keys = [parallelism_key(key, with_tp_rank(axes, r))
                        for r in range(count)]
        pieces = [self._read(k) for k in keys]
        if any(p is None for p in pieces):
            return None
        try:
            full = torch.cat(pieces, dim=sd)
        except (RuntimeError, IndexError):
            return None
        if shape is not None and tuple(full.shape) != tuple(shape):
            return None
        return full

    def _read_target(self, key, target):
        if not isinstance(key, str):
            return None
        mode = "as_stored" if target is None else getattr(target, "mode",
                                                          None)
        if isinstance(mode, str):
            mode = mode.lower()
        par = None if target is None else getattr(target, "parallelism",
                                                  None)
        axes = None
        if par is not None:
            axes = parse_parallelism(par)
            if axes is None:
                return None
        if mode == "as_stored":
            return self._read(key)
        if mode == "shard":
            return None if axes is None else self._read_shard(key, axes)
        if mode == "full":
            return self._read_full(key, axes)
        return None

    @guarded(_fail_none)
    def get_tensor_with_parallelism(self, key, target=None):
        """target None or mode "as_stored": the object at key. "shard": the
        stored shard of target.parallelism. "full": the full tensor,
        reassembled from its TP shards (or writer-partition shards)."""
        return self._read_target(key, target)

    @guarded(_fail_list_none)
    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        if not isinstance(keys, (list, tuple)):
            return []
        if targets is None:
            return self.batch_get_tensor(keys)
        if not isinstance(targets, list) or len(targets) != len(keys):
            return [None] * len(keys)
        return [self._read_target(k, t) for k, t in zip(keys, targets)]

    def _read_target_into(self, key, buffer_ptr, size, target):
        mode = "as_stored" if target is None else str(
            getattr(target, "mode", "")).lower()
        if mode == "as_stored":
            return self._read_into(key, buffer_ptr, size)
        if mode == "shard":
            axes = parse_parallelism(getattr(target, "parallelism", None))
            if axes is None:
                return None
            got = self._read_meta(parallelism_key(key, axes))
            if got is not None and stored_axes(got[0]) == _canonical(axes):
                return self._read_into(parallelism_key(key, axes),
                                       buffer_ptr, size)
            if len(axes) == 1 and axes[0][0] == "tp":
                _, rank, count, sd, _, _ = axes[0]
                return self._read_into(writer_shard_key(key, rank, count, sd),
                                       buffer_ptr, size)
            return None
        # "full": reassembled here, then copied into the buffer.
        full = self._read_target(key, target)
        if full is None or not isinstance(buffer_ptr, int) or buffer_ptr == 0:
            return None
        obj = _tensor_object(full)
        if obj is None:
            return None
        meta, keep, view = obj
        total = len(meta) + view.nbytes
        if not isinstance(size, int) or size < total:
            return None
        ctypes.memmove(buffer_ptr, meta, len(meta))
        ctypes.memmove(buffer_ptr + len(meta), keep.data_ptr(), view.nbytes)
        return decode_tensor(meta, total, address=buffer_ptr)

    @guarded(_fail_none)
    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size,
                                         target=None):
        return self._read_target_into(key, buffer_ptr, size, target)

    @guarded(_fail_list_none)
    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes,
                                               targets=None):
        if not isinstance(keys, (list, tuple)):
            return []
        if targets is None:
            return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)
        if not _same_len_lists(keys, buffer_ptrs, sizes, targets):
            return [None] * len(keys)
        return [self._read_target_into(k, p, s, t)
                for k, p, s, t in zip(keys, buffer_ptrs, sizes, targets)]
