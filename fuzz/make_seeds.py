#!/usr/bin/env python3
"""Writes the small seed corpora of fuzz/corpus/<target>/ (docs/fuzzing.md).

Every seed is generated here from the formats' definitions; rerun to
regenerate: python3 fuzz/make_seeds.py
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_size_parse: text sizes (the first 8 bytes also seed a u64).
for i, s in enumerate(["4096", "64MiB", "1gib", "512K", "3TB", "0",
                       "18446744073709551615", "1.5GiB", " 2 MB ", "16b",
                       # Regression: more than 19 digits (FormatSize's
                       # 20-digit values, leading zeros) were refused.
                       "10000000000000000000", "000000000000000000004096"]):
    put("fuzz_size_parse", f"seed{i}", s)

# ---- fuzz_trace: byte 0 = limit (mod 4), then JSON lines.
def trace_line(ts, inp, out, ids):
    return json.dumps({"timestamp": ts, "input_length": inp,
                       "output_length": out, "hash_ids": ids})

put("fuzz_trace", "one", b"\x00" + trace_line(0, 512, 6, [0]).encode())
put("fuzz_trace", "three", b"\x02" + "\n".join(
    [trace_line(0, 1024, 6, [0, 1]), trace_line(10.5, 512, 3, [0]),
     trace_line(10.5, 2048, 9, [0, 1, 2, 3])]).encode() + b"\n")
put("fuzz_trace", "blank_lines", b"\x00\n  \n" +
    trace_line(1, 1, 1, []).encode() + b"\r\n\t\n")
# Regression: counts that nlohmann would wrap (negative), truncate (1.5) or
# take from a bool must be errors, not 2^64 - 512 tokens.
put("fuzz_trace", "regress_negative_count", b"\x00" +
    b'{"timestamp": 0, "input_length": -512, "output_length": 6, '
    b'"hash_ids": [0]}\n')
put("fuzz_trace", "regress_fraction_and_bool", b"\x00" +
    b'{"timestamp": 0, "input_length": 1.5, "output_length": true, '
    b'"hash_ids": [-1]}\n')
put("fuzz_trace", "decreasing", b"\x00" + "\n".join(
    [trace_line(5, 1, 1, [1]), trace_line(4, 1, 1, [1])]).encode())

# ---- fuzz_config: TOML / INI files with the keys fuzz_config.cc defines.
put("fuzz_config", "toml", 'rpc_address = "127.0.0.1"\nrpc_port = 50051\n'
    'metrics_port = -1\neviction_high_watermark_ratio = 0.9\n'
    'global_segment_size = "256MiB"\nenable_offload = true\n')
put("fuzz_config", "ini", "[default]\nrpc_port=0\nmax_tenants=16\n"
    "write_capability_ttl_ms=5000\ndata_capabilities=false\n")
put("fuzz_config", "array", 'engine = ["id=e0,nodes=n0", "id=e1"]\n'
    "default_kv_lease_ttl = 100\n")
put("fuzz_config", "comments", "# a comment\n; another\n"
    "global_segment_size=1GiB\n")

# ---- fuzz_ssd_record: byte 0 = mode, byte 1 = split (blocks), then bytes.
BLOCK = 4096
MAGIC = 0x010044535350564B


def xxh3(b):
    try:
        import xxhash
        return xxhash.xxh3_64_intdigest(b)
    except ImportError:
        return 0  # the harness's "fix" modes (2, 4) make the checksums right


def record(file_id, offset, seq, tenant, key, value, kind=1, version=7):
    names = tenant + key
    fixed = struct.pack("<QHHHHIIQQQQQ", MAGIC, 2, kind, len(tenant),
                        len(key), file_id, 0, offset, seq, len(value),
                        xxh3(value), 0)
    block = bytearray(fixed + names + struct.pack("<Q", version))
    block += b"\0" * (BLOCK - len(block))
    pad = (-len(value)) % BLOCK
    return bytes(block) + value + b"\0" * pad


def seg(records):
    out, pos = b"", 0
    for r in records:
        out += r(pos)
        pos = len(out)
    return out

f1 = seg([lambda p: record(1, p, 1, b"", b"k1", b"hello"),
          lambda p: record(1, p, 2, b"t", b"k2", bytes(range(256)) * 20)])
put("fuzz_ssd_record", "one_file", bytes([7, 0xFF]) + f1)
f2 = seg([lambda p: record(1, p, 3, b"", b"k1", b"newer")])
put("fuzz_ssd_record", "two_files",
    bytes([7, len(f1) // BLOCK]) + f1 + f2)
put("fuzz_ssd_record", "dead", bytes([7, 0xFF]) + seg(
    [lambda p: record(1, p, 1, b"", b"k", b"v"),
     lambda p: record(1, p, 2, b"", b"k", b"", kind=2)]))
put("fuzz_ssd_record", "torn", bytes([6, 0xFF]) + f1[:BLOCK + 100])
put("fuzz_ssd_record", "unverified", bytes([2, 0xFF]) + f1)
# Regression: a header (checksum fixed by mode bit 1) whose value_len is near
# 2^64 made the record's span wrap to one block and the scan hash 2^64 bytes.
huge = bytearray(record(1, 0, 1, b"", b"big", b"v"))
struct.pack_into("<Q", huge, 40, 2**64 - 100)
put("fuzz_ssd_record", "regress_huge_value_len", bytes([3, 0xFF]) + huge)

# ---- fuzz_wire_frame: byte 0 bit 0 = the harness sends a valid HELLO
# first; bit 1 = the server without SSD_READ/PREFETCH handlers.
HDR = struct.Struct("<IHHIiQ")
KV = 0x5044564B


def frame(op, count, body, status=0):
    return HDR.pack(KV, 3, op, count, status, len(body)) + body


def rng(seg_id, off, length):
    return struct.pack("<QQQQQ", seg_id, off, length, 0, 0) + b"\0" * 40


hello = frame(4, 0, b"fuzz-node")
read = frame(1, 2, rng(1, 0, 16) + rng(2, 4000, 96))
write = frame(2, 2, rng(1, 100, 4) + rng(9, 0, 3) + b"ABCDxyz")
ssd = frame(3, 2, struct.pack("<QII", 10, 1, 3) + b"\0" * 40 + b"tkey" +
            struct.pack("<QII", 5, 0, 4) + b"\0" * 40 + b"miss")
pf = frame(5, 2, struct.pack("<I", 0) + struct.pack("<I", 2) + b"k1" +
           b"\0" * 40 + struct.pack("<I", 4) + b"miss" + b"\0" * 40)
put("fuzz_wire_frame", "hello_read", b"\x00" + hello + read)
put("fuzz_wire_frame", "write_read", b"\x01" + write + read)
put("fuzz_wire_frame", "ssd_read", b"\x01" + ssd)
put("fuzz_wire_frame", "prefetch", b"\x01" + pf)
put("fuzz_wire_frame", "no_handlers", b"\x03" + ssd + pf + read)
put("fuzz_wire_frame", "wrong_node", b"\x00" + frame(4, 0, b"other"))

# ---- fuzz_wire_client: byte 0 = op (0 READ, 1 WRITE, 2 SSD_READ,
# 3 PREFETCH), byte 1 = op count, then the server's reply after the HELLO.
def resp(op, codes, data=b"", status=0):
    body = b"".join(struct.pack("<i", c) for c in codes) + data
    return HDR.pack(KV, 3, op, len(codes), status, len(body)) + body

put("fuzz_wire_client", "read_ok", bytes([0, 2]) + resp(1, [0, 0], b"a" * 32))
put("fuzz_wire_client", "read_mixed", bytes([0, 2]) +
    resp(1, [0, -600], b"b" * 16))
put("fuzz_wire_client", "write_ok", bytes([1, 1]) + resp(2, [0]))
put("fuzz_wire_client", "ssd", bytes([2, 2]) + resp(3, [0, -704], b"c" * 16))
put("fuzz_wire_client", "prefetch", bytes([3, 2]) + resp(5, [0, -704]))
put("fuzz_wire_client", "refused", bytes([0, 1]) +
    HDR.pack(KV, 3, 1, 0, -600, 0))

# ---- protobuf wire format, for the master's requests (proto/kvpool.proto).
def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def fv(num, v):  # varint field: ints, bools, enums
    return varint(num << 3) + varint(int(v))


def fb(num, b):  # length-delimited field: strings, bytes, messages
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def msg(*fields):
    return b"".join(fields)


# ---- fuzz_master_rpc: byte 0 = mode (bits 0-4 the RPC, bits 5-6 the config
# variant, bit 7 a sequence of [type][length][message] records). The RPCs in
# the harness's order (Rpcs()); 29-31 are steps (clock, eviction, heartbeats);
# 32 is MountExtraSegment (in records only: a record's type is bits 0-5 of
# its byte, modulo 33).
RPC = {n: i for i, n in enumerate([
    "MountSegment", "UnmountSegment", "Heartbeat", "PullPromotionTasks",
    "PutStart", "BatchPutStart", "PutEnd", "BatchPutEnd", "PutRevoke",
    "BatchPutRevoke", "GetReplicaList", "BatchGetReplicaList", "ExistKey",
    "BatchExistKey", "Remove", "RemoveAll", "BatchRemove",
    "BatchQueryReadOnly", "GetClusterStats", "NotifyOffload",
    "RegisterMemoryObjects", "RegisterDiskObjects", "RemoveDiskReplicas",
    "PromotionAllocStart", "NotifyPromotion", "BatchPromotionAllocStart",
    "BatchPromotionNotify", "RegisterPrefetchTask", "BatchPrefetchToMemory",
    "StepClock", "StepEvict", "StepBeat", "MountExtraSegment"])}
# The harness's cluster (SetUpCluster): segments 1 (node-a), 2 (node-b),
# 3 (node-b's prefetch buffer), 4 (node-c, re-mounted, directory not in);
# default tenant: k0 4096 (SSD copy on node-a), k1 65536 x2, k2 1000 soft
# pin, k3 100 hard pin, p0 2048 being put, u0 300 (an upsert to 600 in
# progress), d0 8192, d1 300 and d3 1500 SSD-only on node-a, d2 2500
# SSD-only on node-b; tenant t1: k0 512, d0 4096 SSD-only on node-b.
# Promotion tasks: 1 = d0 (router), 2 = d1 (on hit, staged), both in node-a's
# mailbox; 3 = t1/d0 (exist, node-b). The next task is 4.


def key_req(t, k):
    return msg(fb(1, t), fb(2, k))


def keys_req(t, keys, *extra):
    return msg(fb(1, t), *[fb(2, k) for k in keys], *extra)


def put_req(t, k, size, replicas=0, upsert=False, pref="", soft=False,
            hard=False, excluded=()):
    cfg = msg(fv(1, replicas) if replicas else b"", fb(2, pref) if pref else b"",
              fv(3, 1) if soft else b"", fv(4, 1) if hard else b"")
    return msg(fb(1, t), fb(2, k), fv(3, size), fb(4, cfg),
               fv(5, 1) if upsert else b"", *[fb(6, n) for n in excluded])


def disk_obj(t, k, size, version=0):
    return msg(fb(1, t), fb(2, k), fv(3, size), fv(4, version) if version else b"")


def mem_obj(t, k, off, size, version=0):
    return msg(fb(1, t), fb(2, k), fv(3, off), fv(4, size),
               fv(5, version) if version else b"")


def promo_req(node, t, k, size, task):
    return msg(fb(1, node), fb(2, t), fb(3, k), fv(4, size), fv(5, task))


def notify_req(node, t, k, task, success, expired=False):
    return msg(fb(1, node), fb(2, t), fb(3, k), fv(4, task),
               fv(5, 1) if success else b"", fv(6, 1) if expired else b"")


MR = "fuzz_master_rpc"
single = {
    "mount": ("MountSegment", msg(fb(1, "node-d"), fb(2, "host-d"),
                                  fv(4, 1 << 20), fb(6, "node-d:7000"),
                                  fv(7, 1), fv(8, 1), fv(10, 1))),
    "mount_buffer": ("MountSegment", msg(fb(1, "node-a"), fv(3, 1),
                                         fv(4, 65536))),
    "remount_node_a": ("MountSegment", msg(fb(1, "node-a"), fv(4, 1 << 20),
                                           fv(9, 1), fv(10, 1))),
    "unmount": ("UnmountSegment", msg(fb(1, "node-b"), fv(2, 2))),
    "heartbeat": ("Heartbeat", msg(fb(1, "node-b"), fv(3, 8), fv(4, 3))),
    "pull": ("PullPromotionTasks", msg(fb(1, "node-b"), fv(2, 8))),
    "put": ("PutStart", put_req("", "k9", 5000, replicas=2)),
    "put_upsert": ("PutStart", put_req("", "k0", 700, upsert=True,
                                       pref="node-b", soft=True)),
    "put_excluded": ("PutStart", put_req("t2", "k5", 100, hard=True,
                                         excluded=["node-a"])),
    "batch_put": ("BatchPutStart", msg(fb(1, put_req("", "x1", 10)),
                                       fb(1, put_req("t1", "x2", 20)))),
    "put_end": ("PutEnd", key_req("", "p0")),
    "put_end_upsert": ("PutEnd", key_req("", "u0")),
    "batch_put_end": ("BatchPutEnd", keys_req("", ["p0", "u0", "k0"])),
    "revoke": ("PutRevoke", key_req("", "u0")),
    "batch_revoke": ("BatchPutRevoke", keys_req("", ["p0", "u0"])),
    "get": ("GetReplicaList", key_req("", "k1")),
    "get_ssd": ("GetReplicaList", key_req("t1", "d0")),
    "batch_get": ("BatchGetReplicaList", keys_req("", ["k0", "d0", "p0", "zz"])),
    "exist": ("ExistKey", keys_req("", ["k0", "p0", "d1", "nope"])),
    "batch_exist": ("BatchExistKey", keys_req("t1", ["k0", "d0"], fv(3, 1))),
    "remove": ("Remove", msg(fb(1, ""), fb(2, "k1"))),
    "remove_force": ("Remove", msg(fb(1, ""), fb(2, "k0"), fv(3, 1))),
    "remove_all": ("RemoveAll", msg(fb(1, ""), fv(2, 1))),
    "remove_regex": ("RemoveAll", msg(fb(1, ""), fb(3, "k[0-9]"))),
    "batch_remove": ("BatchRemove", keys_req("", ["k2", "d0", "p0"], fv(3, 1))),
    "query": ("BatchQueryReadOnly", keys_req("", ["k0", "k1", "d0", "p0", "u0"])),
    "stats": ("GetClusterStats", b""),
    "offload": ("NotifyOffload", msg(fb(1, "node-b"), fb(2, msg(
        fb(1, ""), fb(2, "k3"), fv(3, 4), fv(4, 0))))),
    "register_memory": ("RegisterMemoryObjects", msg(
        fb(1, "node-c"), fv(2, 4), fb(3, mem_obj("", "c0", 0, 1000, 100)),
        fb(3, mem_obj("", "k0", 4096, 4096, 1)), fv(4, 1))),
    "register_disk": ("RegisterDiskObjects", msg(
        fb(1, "node-b"), fb(2, disk_obj("", "k1", 65536, 2)),
        fb(2, disk_obj("t2", "e0", 77)))),
    "remove_disk": ("RemoveDiskReplicas", msg(
        fb(1, "node-a"), fb(2, disk_obj("", "d0", 8192)),
        fb(2, disk_obj("", "k0", 4096)))),
    "promotion_alloc": ("PromotionAllocStart", promo_req("node-a", "", "d0",
                                                         8192, 1)),
    "promotion_notify": ("NotifyPromotion", notify_req("node-a", "", "d1", 2,
                                                       True)),
    "batch_promotion_alloc": ("BatchPromotionAllocStart", msg(
        fb(1, promo_req("node-a", "", "d0", 8192, 1)),
        fb(1, promo_req("node-b", "t1", "d0", 4096, 3)))),
    "batch_promotion_notify": ("BatchPromotionNotify", msg(
        fb(1, notify_req("node-a", "", "d1", 2, True)),
        fb(1, notify_req("node-a", "", "d0", 1, False, True)))),
    "register_prefetch": ("RegisterPrefetchTask", msg(
        fb(1, "node-a"), fb(2, ""), fb(3, "d0"), fb(3, "d1"))),
    "prefetch": ("BatchPrefetchToMemory", msg(fb(1, ""), fb(2, "d0"),
                                              fb(2, "d1"), fb(2, "k0"),
                                              fv(3, 50))),
    "step_clock": ("StepClock", bytes([0xE8, 0x03, 5])),
    "step_beat": ("StepBeat", bytes([0x0B])),
}
for name, (rpc, body) in single.items():
    put(MR, name, bytes([RPC[rpc]]) + body)
# The same under the other config variants (tight limits; other policies).
for name in ("put", "register_memory", "prefetch", "remove_force"):
    rpc, body = single[name]
    put(MR, name + "_v1", bytes([RPC[rpc] | 0x20]) + body)
    put(MR, name + "_v2", bytes([RPC[rpc] | 0x40]) + body)


def seq(variant, *records):
    out = bytearray([0x80 | variant << 5])
    for rpc, body in records:
        assert len(body) < 256
        out += bytes([RPC[rpc], len(body)]) + body
    return bytes(out)

put(MR, "seq_put_get_remove", seq(0, ("PutStart", put_req("", "k9", 3000)),
                                  ("PutEnd", key_req("", "k9")),
                                  ("GetReplicaList", key_req("", "k9")),
                                  ("StepClock", bytes([0x10, 0x27, 0])),
                                  ("Remove", msg(fb(1, ""), fb(2, "k9")))))
put(MR, "seq_promotion", seq(0, ("PromotionAllocStart",
                                 promo_req("node-a", "", "d0", 8192, 1)),
                             ("NotifyPromotion",
                              notify_req("node-a", "", "d0", 1, True)),
                             ("GetReplicaList", key_req("", "d0")),
                             ("StepBeat", bytes([0x01]))))
put(MR, "seq_offload_evict", seq(2, ("StepBeat", bytes([0x03])),
                                 ("StepEvict", bytes([0xFF, 0xFF, 0])),
                                 ("BatchQueryReadOnly",
                                  keys_req("", ["k0", "k1", "k2"]))))
put(MR, "seq_directory", seq(0, ("RegisterMemoryObjects", msg(
    fb(1, "node-c"), fv(2, 4), fb(3, mem_obj("", "c0", 0, 1000, 100)))),
    ("RegisterMemoryObjects", msg(fb(1, "node-c"), fv(2, 4),
                                  fb(3, mem_obj("", "c1", 1024, 64)), fv(4, 1))),
    ("StepClock", bytes([0xE8, 0x03, 3])),
    ("PutStart", put_req("", "c2", 500, pref="node-c")),
    ("StepBeat", bytes([0x01]))))
put(MR, "seq_node_dies", seq(0, ("StepClock", bytes([20, 0, 63])),
                             ("StepClock", bytes([20, 0, 63])),
                             ("BatchGetReplicaList",
                              keys_req("", ["k0", "k1", "d0"]))))
put(MR, "seq_router_buffer", seq(0, (
    "BatchPrefetchToMemory", msg(fb(1, ""), fb(2, "d2"), fb(2, "d3"))),
    ("PullPromotionTasks", msg(fb(1, "node-b"), fv(2, 8))),
    ("PromotionAllocStart", promo_req("node-b", "", "d2", 2500, 4)),
    ("NotifyPromotion", notify_req("node-b", "", "d2", 4, True)),
    ("Heartbeat", msg(fb(1, "node-a"), fv(3, 8))),
    ("GetReplicaList", key_req("", "d2"))))
put(MR, "seq_deadline_expires", seq(0, (
    "BatchPrefetchToMemory", msg(fb(1, ""), fb(2, "d3"), fv(3, 5))),
    ("StepClock", bytes([1, 0, 0])),
    ("Heartbeat", msg(fb(1, "node-a"), fv(3, 8)))))
put(MR, "seq_deadline_holder_expired", seq(0, (
    "BatchPrefetchToMemory", msg(fb(1, ""), fb(2, "d2"), fv(3, 500))),
    ("NotifyPromotion", notify_req("node-b", "", "d2", 4, False, True))))
put(MR, "seq_hit_promotes", seq(0, ("GetReplicaList", key_req("", "d3")),
                                ("Heartbeat", msg(fb(1, "node-a"), fv(3, 8))),
                                ("PromotionAllocStart",
                                 promo_req("node-a", "", "d3", 1500, 4)),
                                ("NotifyPromotion",
                                 notify_req("node-a", "", "d3", 4, True))))
put(MR, "seq_prefetch_deadline", seq(0, (
    "BatchPrefetchToMemory", msg(fb(1, ""), fb(2, "d0"), fb(2, "d1"),
                                 fv(3, 5))),
    ("StepClock", bytes([1, 0, 0])),
    ("StepBeat", bytes([0x19])),
    ("PullPromotionTasks", msg(fb(1, "node-b"), fv(2, 8)))))



def extra_req(node, size=0, path="", remount=False, open_id=0):
    """MountExtraSegmentRequest: the first call (mount closed) or, with
    open_id, the second (open)."""
    return msg(fb(1, node), fv(2, size) if size else b"",
               fb(3, path) if path else b"", fv(4, 1) if remount else b"",
               fv(5, open_id) if open_id else b"")


# Extra segments (Mooncake's mount_segment): the cluster's next segment id
# is 5. A 2 MiB value fits in no segment of the cluster but an extra one.
MiB = 1 << 20
extra_mount = [
    ("MountExtraSegment", extra_req("node-a", 4 * MiB)),
    ("PutStart", put_req("", "x5", 2 * MiB, pref="node-a")),  # closed: no room
    ("MountExtraSegment", extra_req("node-a", open_id=5)),
    ("PutStart", put_req("", "x5", 2 * MiB, pref="node-a")),
    ("PutEnd", key_req("", "x5")),
    ("GetReplicaList", key_req("", "x5")),
    ("UnmountSegment", msg(fb(1, "node-a"), fv(2, 5))),
    ("ExistKey", keys_req("", ["x5", "k0"])),
    ("StepBeat", bytes([0x01]))]
put(MR, "seq_extra_mount_put_unmount", seq(0, *extra_mount))
put(MR, "seq_extra_mount_v2", seq(2, *extra_mount))
put(MR, "seq_extra_remount", seq(
    0, ("MountExtraSegment", extra_req("node-b", 2 * MiB,
                                       "/kvpool-node-b-extra1", remount=True)),
    ("MountExtraSegment", extra_req("node-b", open_id=5)),  # leases first
    ("PutStart", put_req("", "x6", 3 * MiB // 2, pref="node-b")),
    ("StepClock", bytes([0xE8, 0x03, 6])),
    ("PutStart", put_req("", "x6", 3 * MiB // 2, pref="node-b")),
    ("PromotionAllocStart", promo_req("node-b", "", "d2", 2500, 4)),
    ("StepEvict", bytes([0xFF, 0xFF, 0])),
    ("StepBeat", bytes([0x0B]))))
put(MR, "seq_extra_errors", seq(
    0, ("MountExtraSegment", extra_req("node-x", MiB)),  # unknown node
    ("MountExtraSegment", extra_req("node-a")),  # zero bytes
    ("MountExtraSegment", extra_req("node-b", open_id=2)),  # a main segment
    ("MountExtraSegment", extra_req("node-a", open_id=99)),
    ("MountExtraSegment", extra_req("node-a", MiB)),
    ("MountExtraSegment", extra_req("node-b", open_id=5)),  # not node-b's
    ("MountExtraSegment", extra_req("node-a", open_id=1 << 40)),
    ("UnmountSegment", msg(fb(1, "node-b"), fv(2, 5))),
    ("MountExtraSegment", extra_req("node-a", open_id=5)),
    ("MountExtraSegment", extra_req("node-a", open_id=5)),  # open already
    ("UnmountSegment", msg(fb(1, "node-a"), fv(2, 5))),
    ("MountExtraSegment", extra_req("node-a", open_id=5))))  # gone
put(MR, "seq_extra_node_dies", seq(
    0, ("MountExtraSegment", extra_req("node-a", 2 * MiB)),
    ("MountExtraSegment", extra_req("node-a", open_id=5)),
    ("PutStart", put_req("", "x7", MiB + 4096, pref="node-a")),
    ("PutEnd", key_req("", "x7")),
    ("StepClock", bytes([20, 0, 63])),
    ("StepClock", bytes([20, 0, 63])),
    ("GetReplicaList", key_req("", "x7")),
    ("MountExtraSegment", extra_req("node-a", MiB))))

# ---- fuzz_router_http: byte 0 % 4 = handler (0 /route, 1 /complete,
# 2 /stats, 3 /queue), then the body. The harness's cluster: default tenant m0-m3 and
# b0 in DRAM (b0 also on SSD), d0-d3 SSD-only (d0, d1 on node-a; d2, d3 on
# node-b), p0 being put; tenant t1: m0 in DRAM, d0 SSD-only. Engines e0
# (node-a), e1 (node-b), e2 (no node).
RH = "fuzz_router_http"


def route(body):
    return b"\x00" + (body if isinstance(body, bytes) else
                      json.dumps(body).encode())


def complete(body):
    return b"\x01" + (body if isinstance(body, bytes) else
                      json.dumps(body).encode())

put(RH, "route_memory", route({"request_id": "r1",
                               "block_keys": ["m0", "m1", "m2"]}))
put(RH, "route_ssd", route({"request_id": "r2", "tenant": "default",
                            "block_keys": ["m0", "d0", "d1", "x9", "m1"]}))
put(RH, "route_node_b", route({"request_id": "r3",
                               "block_keys": ["d2", "d3", "m3", "b0"]}))
put(RH, "route_processing", route({"request_id": "r4",
                                   "block_keys": ["m0", "p0", "m1"]}))
put(RH, "route_tenant", route({"request_id": "r5", "tenant": "t1",
                               "block_keys": ["m0", "d0", "m1"]}))
put(RH, "route_miss", route({"request_id": "", "tenant": "",
                             "block_keys": ["nope"]}))
put(RH, "route_empty_keys", route({"request_id": "r6", "block_keys": []}))
put(RH, "route_bad_key", route({"request_id": "r7", "block_keys": ["m0", ""]}))
put(RH, "route_long_tenant", route({"request_id": "r8", "tenant": "t" * 300,
                                    "block_keys": ["m0"]}))
put(RH, "route_wrong_types", route({"request_id": 7, "block_keys": "m0"}))
put(RH, "route_not_json", route(b'{"request_id": "r9", "block_keys": [m0]'))
put(RH, "route_not_object", route(b'["m0"]'))
put(RH, "route_unicode", route('{"request_id": "\\u00e9\\ud83d\\ude00", '
                               '"block_keys": ["m\\u0000", "d0"]}'.encode()))
put(RH, "complete", complete({"engine_id": "e0"}))
put(RH, "complete_e1", complete({"engine_id": "e1"}))
put(RH, "complete_unknown", complete({"engine_id": "e9"}))
put(RH, "complete_bad", complete({"engine": "e0"}))
put(RH, "stats", b"\x02")


def queue(body):
    return b"\x03" + (body if isinstance(body, bytes) else
                      json.dumps(body).encode())


put(RH, "queue", queue({"engine_id": "e0", "waiting": 3}))
put(RH, "queue_zero", queue({"engine_id": "e1", "waiting": 0}))
put(RH, "queue_unknown", queue({"engine_id": "e9", "waiting": 1}))
put(RH, "queue_negative", queue({"engine_id": "e0", "waiting": -1}))
put(RH, "queue_float", queue(b'{"engine_id": "e0", "waiting": 2.0}'))
put(RH, "queue_huge", queue(b'{"engine_id": "e0", '
                            b'"waiting": 18446744073709551615}'))

print("seeds written under", os.path.join(HERE, "corpus"))
