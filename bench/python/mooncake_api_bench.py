#!/usr/bin/env python3
"""The Mooncake drop-in's speed through Mooncake's own Python API, so the
same script can time kvpool.mooncake and a real mooncake.store side by side
(alternating rounds in one run, when both are importable and each has a
master to talk to).

A writer process hosts a segment and puts values from Python bytes; a
separate pure-client process reads them back with get_into and
batch_get_into x16, and times batch_is_exist of 128 keys and is_exist.

    PYTHONPATH=build/python python3 bench/python/mooncake_api_bench.py
    # with Mooncake too (its master started by you, P2PHANDSHAKE metadata):
    ... --impl kvpool --impl mooncake --mooncake-master 127.0.0.1:50051

Without --kvpool-master the script starts build/bin/kvpool-master itself
(on a free loopback port) and stops it at the end.
"""

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.environ.get("KVPOOL_BIN_DIR",
                         os.path.join(HERE, "..", "..", "build", "bin"))


def store_class(impl):
    if impl == "kvpool":
        from kvpool.mooncake import MooncakeDistributedStore
    else:
        from mooncake.store import MooncakeDistributedStore
    return MooncakeDistributedStore


def writer(impl, master, sizes, count, tag, ready, results, done):
    s = store_class(impl)()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 2048 * MiB, 64 * MiB, "tcp", "",
                 master)
    if rc != 0:
        results.put(("error", "writer setup: %d" % rc))
        ready.set()
        return
    out = {}
    first = None  # the store's very first put, inside the first average
    for size in sizes:
        value = os.urandom(size)
        t = time.perf_counter()
        for i in range(count):
            if s.put("%s-%d-%d" % (tag, size, i), value) != 0:
                results.put(("error", "put failed"))
            if first is None:
                first = time.perf_counter() - t
        dt = (time.perf_counter() - t) / count
        out[size] = dt
    results.put(("put", out, first))
    ready.set()
    done.wait()  # keep hosting while the reader reads
    s.close()


def reader(impl, master, sizes, count, tag, results):
    s = store_class(impl)()
    if s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 * MiB, "tcp", "",
               master) != 0:
        results.put(("error", "reader setup"))
        return
    cap = max(sizes) * 16
    buf = (ctypes.c_ubyte * cap)()
    ptr = ctypes.addressof(buf)
    s.register_buffer(ptr, cap)
    out = {}
    first = None  # the reader's very first get, inside the first average
    for size in sizes:
        keys = ["%s-%d-%d" % (tag, size, i) for i in range(count)]
        t = time.perf_counter()
        for k in keys:
            if s.get_into(k, ptr, size) != size:
                results.put(("error", "get_into failed"))
            if first is None:
                first = time.perf_counter() - t
        one = (time.perf_counter() - t) / len(keys)
        batches = [keys[i:i + 16] for i in range(0, len(keys) - 15, 16)]
        t = time.perf_counter()
        for b in batches:
            got = s.batch_get_into(b, [ptr + j * size for j in range(16)],
                                   [size] * 16)
            if any(g != size for g in got):
                results.put(("error", "batch_get_into failed"))
        batch = (time.perf_counter() - t) / max(1, len(batches))
        out[size] = (one, batch)
    probe = ["%s-%d-%d" % (tag, sizes[0], i) for i in range(64)] + \
        ["missing-%d" % i for i in range(64)]
    n = 300
    t = time.perf_counter()
    for _ in range(n):
        s.batch_is_exist(probe)
    exist128 = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for _ in range(n):
        s.is_exist(probe[0])
    exist1 = (time.perf_counter() - t) / n
    results.put(("get", out, exist128, exist1, first))
    s.unregister_buffer(ptr)
    s.close()


def one_round(impl, master, sizes, count, tag):
    ctx = mp.get_context("spawn")
    results, ready, done = ctx.Queue(), ctx.Event(), ctx.Event()
    w = ctx.Process(target=writer,
                    args=(impl, master, sizes, count, tag, ready, results,
                          done))
    w.start()
    ready.wait(600)
    r = ctx.Process(target=reader,
                    args=(impl, master, sizes, count, tag, results))
    r.start()
    r.join()
    done.set()
    w.join()
    got = {}
    while not results.empty():
        item = results.get()
        if item[0] == "error":
            raise RuntimeError("%s: %s" % (impl, item[1]))
        got[item[0]] = item[1:]
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", action="append", choices=["kvpool", "mooncake"])
    ap.add_argument("--kvpool-master", default="")
    ap.add_argument("--mooncake-master", default="127.0.0.1:50051")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--sizes", type=int, nargs="+", default=[MiB, 4 * MiB])
    args = ap.parse_args()
    impls = args.impl or ["kvpool"]
    started = None
    kv_master = args.kvpool_master
    if "kvpool" in impls and not kv_master:
        tmp = tempfile.mkdtemp(prefix="kvpool-mcbench-")
        port_file = os.path.join(tmp, "port")
        started = subprocess.Popen(
            [os.path.join(BIN_DIR, "kvpool-master"), "--rpc_port=0",
             "--metrics_port=-1", "--port_file=" + port_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.exists(port_file) and os.path.getsize(port_file):
                break
            time.sleep(0.01)
        kv_master = "127.0.0.1:" + open(port_file).read().strip()
    masters = {"kvpool": kv_master, "mooncake": args.mooncake_master}
    rows = {i: [] for i in impls}
    try:
        for rnd in range(args.rounds):
            for impl in (impls if rnd % 2 == 0 else impls[::-1]):
                print("round %d/%d: %s ..." % (rnd + 1, args.rounds, impl),
                      file=sys.stderr, flush=True)
                rows[impl].append(one_round(impl, masters[impl], args.sizes,
                                            args.count, "r%d" % rnd))
    finally:
        if started:
            started.terminate()
            started.wait()
    print("\nMooncake-API bench (medians over %d rounds; writer hosts 2 GiB "
          "and puts from bytes, a separate pure client reads)" % args.rounds)
    print("%-9s %-22s %10s %10s" % ("impl", "case", "ms/call", "GB/s"))
    for impl in impls:
        for size in args.sizes:
            put = statistics.median(r["put"][0][size] for r in rows[impl])
            one = statistics.median(r["get"][0][size][0] for r in rows[impl])
            b16 = statistics.median(r["get"][0][size][1] for r in rows[impl])
            label = "%d MiB" % (size // MiB)
            print("%-9s %-22s %10.3f %10.2f" % (impl, "put " + label,
                                                put * 1e3, size / put / 1e9))
            print("%-9s %-22s %10.3f %10.2f" % (impl, "get_into " + label,
                                                one * 1e3, size / one / 1e9))
            print("%-9s %-22s %10.3f %10.2f" % (
                impl, "batch_get_into16 " + label, b16 * 1e3,
                16 * size / b16 / 1e9))
        first = statistics.median(r["put"][1] for r in rows[impl])
        print("%-9s %-22s %10.3f %10s" % (impl, "first put (in the above)",
                                          first * 1e3, "-"))
        first_get = statistics.median(r["get"][3] for r in rows[impl])
        print("%-9s %-22s %10.3f %10s" % (impl, "first get (in the above)",
                                          first_get * 1e3, "-"))
        e128 = statistics.median(r["get"][1] for r in rows[impl])
        e1 = statistics.median(r["get"][2] for r in rows[impl])
        print("%-9s %-22s %10.3f %10s" % (impl, "batch_is_exist x128",
                                          e128 * 1e3, "-"))
        print("%-9s %-22s %10.3f %10s" % (impl, "is_exist", e1 * 1e3, "-"))


if __name__ == "__main__":
    main()
