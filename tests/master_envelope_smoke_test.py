#!/usr/bin/python3
"""`kvpool bench master-envelope` at tiny object counts: every step has every
field a simulation reads (docs/master_envelope.md), with values of the right
kind, and the SVGs are written. Asserts no timing: only that the figures
exist, are numbers, and that counts add up.

    tests/master_envelope_smoke_test.py --kvpool build/bin/kvpool
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

STEPS = [2000, 6000]
NODES = 8
STEP_FIELDS = [
    "objects", "fill_s", "bytes_per_object", "rss_bytes_per_object",
    "put_keys_per_s", "put_p50_us", "put_p99_us", "put_max_us",
    "lookup_keys_per_s", "lookup_untracked_keys_per_s",
    "lookup_tracked_keys_per_s", "heartbeat_us", "heartbeat_p99_us",
    "housekeep_ms", "evicted_objects", "evict_ms", "evict_ns_per_object",
    "node_objects", "node_death_ms", "restart_objects", "restart_s",
    "shard_holds",
]
PHASES = ["fill", "lookup", "housekeep", "evict", "node_death", "restart"]
HOLD_FIELDS = ["max_ms", "p999_ms", "holds", "over_8ms", "cpu_max_ms", "cpu_p999_ms",
               "cpu_over_8ms"]


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and \
        math.isfinite(v) and v >= 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvpool", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "envelope.json")
        svg = os.path.join(d, "envelope")
        subprocess.run(
            [a.kvpool, "bench", "master-envelope",
             "--steps", ",".join(map(str, STEPS)), "--nodes", str(NODES),
             "--threads", "1,2", "--put-window", "512", "--seconds", "0.05",
             "--json", js, "--svg", svg],
            check=True, stdout=subprocess.DEVNULL, timeout=120)
        with open(js) as f:
            doc = json.load(f)
        errors = []
        if doc.get("nodes") != NODES:
            errors.append(f"nodes: {doc.get('nodes')}")
        steps = doc.get("steps", [])
        if [s.get("objects") for s in steps] != STEPS:
            errors.append(f"steps: {[s.get('objects') for s in steps]}")
        for s in steps:
            n = s.get("objects")
            for f in STEP_FIELDS:
                if f not in s:
                    errors.append(f"step {n}: no {f}")
                elif f not in ("lookup_keys_per_s", "shard_holds") and \
                        not number(s[f]):
                    errors.append(f"step {n}: {f} = {s[f]!r}")
            cases = {(c.get("batch"), c.get("threads"))
                     for c in s.get("lookup_keys_per_s", [])
                     if number(c.get("keys_per_s"))}
            want = {(b, t) for b in (1, 128) for t in (1, 2)}
            if cases != want:
                errors.append(f"step {n}: lookup cases {sorted(cases)}")
            for p in PHASES:
                h = s.get("shard_holds", {}).get(p, {})
                for f in HOLD_FIELDS:
                    if not number(h.get(f)):
                        errors.append(f"step {n}: shard_holds.{p}.{f}")
            # What the counts must be, whatever the timings.
            if s.get("restart_objects") != n:
                errors.append(f"step {n}: {s.get('restart_objects')} "
                              "re-registered")
            if s.get("node_objects") != n // 4:
                errors.append(f"step {n}: dead node held "
                              f"{s.get('node_objects')}")
            if not 0 < s.get("evicted_objects", 0) <= n:
                errors.append(f"step {n}: evicted {s.get('evicted_objects')}")
        for part in ("memory", "lookups", "latency", "holds"):
            path = f"{svg}-{part}.svg"
            if not os.path.exists(path) or "<svg" not in open(path).read():
                errors.append(f"no {path}")
    if errors:
        print("FAIL:\n  " + "\n  ".join(errors))
        return 1
    print(f"ok: {len(STEPS)} steps, every field present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
