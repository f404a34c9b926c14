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

print("seeds written under", os.path.join(HERE, "corpus"))
