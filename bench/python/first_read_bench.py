#!/usr/bin/env python3
"""A separate process's first read of a value against its repeated read,
through the Python API (issue #44's setup): a kvpool-node process hosting a
segment, a writer process putting values with kvpool.Store.put, and for
each transport and API a fresh reader process that reads every value twice
(kvpool.Store.get, which returns bytes; get_into into a bytearray touched
beforehand). Each run starts its own master and node, per node setting
(--segment_huge_pages false, today's /dev/shm with 4 KiB pages, as the
baseline; true), alternating settings run by run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/first_read_bench.py \\
        [--runs 5] [--segment-mib 512]

Cells: the median over runs of each round's per-op median (ms), then the
min-max over runs; ratio = first / repeated of the medians.
"""

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

KiB = 1 << 10
MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.environ.get("KVPOOL_BIN_DIR",
                         os.path.join(HERE, "..", "..", "build", "bin"))
# (value size, values): 64 MiB of 1 MiB values as in the issue (100 there).
SIZES = [(64 * KiB, 256), (1 * MiB, 64), (4 * MiB, 16)]


def writer(master, done):
    try:
        put_all(master)
        done.put("ok")
    except Exception as e:  # the parent waits for an answer either way
        done.put("writer: %r" % e)


def put_all(master):
    import kvpool
    s = kvpool.Store(master)
    deadline = time.time() + 30
    for size, count in SIZES:
        value = os.urandom(size)
        for i in range(count):
            while True:  # until the node's segment is mounted
                try:
                    s.put("v-%d-%d" % (size, i), value)
                    break
                except kvpool.StoreError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
    s.close()


def reader(master, transport, api, out):
    try:
        out.put(read_all(master, transport, api))
    except Exception as e:
        out.put("reader %s %s: %r" % (transport, api, e))


def read_all(master, transport, api):
    import kvpool
    s = kvpool.Store(master, transport=transport)
    s.is_exist("warm-up")  # the master connection, outside the clock
    res = {}
    for size, count in SIZES:
        buf = bytearray(b"\1" * size)  # touched before the clock
        rounds = []
        for _ in range(2):
            ms = []
            for i in range(count):
                k = "v-%d-%d" % (size, i)
                t = time.perf_counter()
                if api == "get":
                    got = len(s.get(k))
                else:
                    got = s.get_into(k, buf)
                ms.append((time.perf_counter() - t) * 1e3)
                if got != size:
                    raise RuntimeError("short read of " + k)
            rounds.append(statistics.median(ms))
        res[size] = rounds
    s.close()
    return res


def start(args, tmp, huge):
    port_file = os.path.join(tmp, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    master = subprocess.Popen(
        [os.path.join(BIN_DIR, "kvpool-master"), "--rpc_port=0",
         "--metrics_port=-1", "--port_file=" + port_file],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while not (os.path.exists(port_file) and os.path.getsize(port_file)):
        if time.time() > deadline:
            raise RuntimeError("master did not start")
        time.sleep(0.02)
    addr = "127.0.0.1:" + open(port_file).read().strip()
    node = subprocess.Popen(
        [os.path.join(BIN_DIR, "kvpool-node"),
         "--master_server_address=" + addr,
         "--global_segment_size=%d" % (args.segment_mib * MiB),
         "--segment_huge_pages=" + ("true" if huge else "false")],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "node.log"),
                                               "a"))
    return addr, [node, master]


def one_run(args, tmp, huge):
    addr, procs = start(args, tmp, huge)
    ctx = mp.get_context("spawn")
    try:
        q = ctx.Queue()
        w = ctx.Process(target=writer, args=(addr, q))
        w.start()
        ok = q.get(timeout=120)
        w.join()
        if ok != "ok":
            raise RuntimeError(ok)
        got = {}
        for transport in ("shm", "tcp"):
            for api in ("get", "get_into"):
                r = ctx.Process(target=reader, args=(addr, transport, api, q))
                r.start()
                got[(transport, api)] = q.get(timeout=120)
                r.join()
                if isinstance(got[(transport, api)], str):
                    raise RuntimeError(got[(transport, api)])
        return got
    finally:
        for p in procs:  # by PID, node first
            p.terminate()
            p.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--segment-mib", type=int, default=512)
    args = ap.parse_args()
    settings = [("4k (huge pages off)", False), ("huge (default)", True)]
    results = {name: [] for name, _ in settings}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for name, huge in settings:
                results[name].append(one_run(args, tmp, huge))

    def cell(v):
        return "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v))

    print("| setting | transport | api | size | first read ms | repeated "
          "read ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in settings:
        for transport in ("shm", "tcp"):
            for api in ("get", "get_into"):
                for size, _ in SIZES:
                    first = [r[(transport, api)][size][0]
                             for r in results[name]]
                    again = [r[(transport, api)][size][1]
                             for r in results[name]]
                    print("| %s | %s | %s | %d KiB | %s | %s | %.2f |" % (
                        name, transport, api, size // KiB, cell(first),
                        cell(again),
                        statistics.median(first) / statistics.median(again)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
