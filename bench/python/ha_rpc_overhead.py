#!/usr/bin/env python3
"""What following the leader through etcd costs per master call: the same
call (is_exist of a missing key, one master round trip) against a master
without HA and against one with --enable_ha (its reply carries the
kvpool-epoch header, the client checks it), both on loopback, measured in
alternating rounds in one run. Prints a table (median of per-round medians)
and, with --json, writes the raw numbers.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/ha_rpc_overhead.py
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN_DIR = os.environ.get("KVPOOL_BIN_DIR",
                         os.path.join(HERE, "..", "..", "build", "bin"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import kvpool

    work = tempfile.mkdtemp(prefix="kvpool-ha-overhead-")
    procs = []
    try:
        cport, pport = free_port(), free_port()
        c, p = "http://127.0.0.1:%d" % cport, "http://127.0.0.1:%d" % pport
        procs.append(subprocess.Popen(
            ["etcd", "--name", "b", "--data-dir", os.path.join(work, "etcd"),
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", "b=" + p, "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        plain_port, ha_port = free_port(), free_port()
        procs.append(subprocess.Popen(
            [os.path.join(BIN_DIR, "kvpool-master"), "--rpc_port=%d" % plain_port,
             "--metrics_port=-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [os.path.join(BIN_DIR, "kvpool-master"), "--rpc_port=%d" % ha_port,
             "--metrics_port=-1", "--enable_ha",
             "--etcd_endpoints=127.0.0.1:%d" % cport, "--cluster_id=bench"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        stores = {}

        def connect(name, address):
            try:
                st = kvpool.Store(address, rpc_timeout_ms=2000)
                st.is_exist("probe")
                stores[name] = st
                return True
            except Exception:  # not up yet
                return False

        if not wait_until(lambda: connect("plain", "127.0.0.1:%d" % plain_port)):
            sys.exit("the plain master did not answer")
        if not wait_until(lambda: connect(
                "ha", "etcd://127.0.0.1:%d/bench" % cport), timeout=30):
            sys.exit("the HA master did not lead")
        per_round = {"plain": [], "ha": []}
        for r in range(args.rounds):
            order = ["plain", "ha"] if r % 2 == 0 else ["ha", "plain"]
            for name in order:
                st = stores[name]
                lat = []
                for i in range(args.calls):
                    t0 = time.perf_counter_ns()
                    st.is_exist("missing-%d" % i)
                    lat.append(time.perf_counter_ns() - t0)
                per_round[name].append(statistics.median(lat) / 1000.0)
            print("round %d/%d: plain %.1f us, ha %.1f us" % (
                r + 1, args.rounds, per_round["plain"][-1], per_round["ha"][-1]),
                file=sys.stderr)
        ratios = [h / p for h, p in zip(per_round["ha"], per_round["plain"])]
        q = statistics.quantiles(ratios, n=4)
        print("\n| master | is_exist p50 (us, median of %d rounds of %d calls) |"
              % (args.rounds, args.calls))
        print("|---|---:|")
        for name in ("plain", "ha"):
            print("| %s | %.1f |" % (name, statistics.median(per_round[name])))
        print("\nHA / plain, median of per-round ratios: %.3f (quartiles %.3f-%.3f)"
              % (statistics.median(ratios), q[0], q[2]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"per_round_us": per_round, "ratios": ratios}, f, indent=1)
        for st in stores.values():
            st.close()
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
