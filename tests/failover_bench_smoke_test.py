#!/usr/bin/python3
"""`kvpool bench failover` at a tiny N: real etcd, two HA masters, the
leader killed with SIGKILL. Checks that every JSON field is there, that
every key came back and that the sampled values read back byte for byte
(sample_bad == 0). Asserts no timing. Exits 77 (ctest SKIP_RETURN_CODE)
when etcd is not installed, as the bench does.

    tests/failover_bench_smoke_test.py --kvpool build/bin/kvpool
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

SKIP = 77
OBJECTS = 2000
ROW_FIELDS = [
    "objects", "run", "put_sec", "dir_sync_ms", "elected_ms",
    "first_right_get_ms", "all_served_ms", "first_put_ms", "node_rereg_ms",
    "successor_cpu_ms",
    "served", "exist_sweep_ms", "sweep_passes", "probe_wrong", "sampled",
    "sample_bad", "sample_missing", "error",
]
# Times that must have been reached (-1 in the JSON means never).
REACHED = ["elected_ms", "first_right_get_ms", "all_served_ms",
           "first_put_ms"]


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and \
        math.isfinite(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvpool", required=True)
    a = ap.parse_args()
    if not os.path.exists("/usr/bin/etcd"):
        print("skipped: /usr/bin/etcd is not installed")
        return SKIP
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "failover.json")
        svg = os.path.join(d, "failover.svg")
        r = subprocess.run(
            [a.kvpool, "bench", "failover", "--objects", str(OBJECTS),
             "--samples", "500", "--timeout", "60", "--json", js,
             "--svg", svg],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=150)
        if r.returncode == SKIP:
            print("skipped:", r.stderr.strip()[-200:])
            return SKIP
        with open(js) as f:
            doc = json.load(f)
        errors = []
        if r.returncode != 0:
            errors.append(f"exit {r.returncode}: {r.stdout[-800:]}")
        if not os.path.getsize(svg):
            errors.append("empty svg")
        rows = doc.get("rows", [])
        if len(rows) != 1:
            errors.append(f"{len(rows)} rows, expected 1")
        for row in rows:
            for k in ROW_FIELDS:
                if k not in row:
                    errors.append(f"missing field {k}")
            if row.get("error"):
                errors.append(f"error: {row['error']}")
            for k in REACHED:
                if not number(row.get(k)) or row[k] < 0:
                    errors.append(f"{k} not reached: {row.get(k)}")
            rereg = row.get("node_rereg_ms", [])
            if len(rereg) != 2 or not all(number(v) and v >= 0
                                          for v in rereg):
                errors.append(f"node_rereg_ms: {rereg}")
            if row.get("objects") != OBJECTS or row.get("served") != OBJECTS:
                errors.append(f"served {row.get('served')} of {OBJECTS}")
            if row.get("sample_bad") != 0 or row.get("sample_missing") != 0:
                errors.append(f"sample: {row.get('sample_bad')} bad, "
                              f"{row.get('sample_missing')} missing")
            if row.get("sampled") != 500 or row.get("probe_wrong") != 0:
                errors.append(f"sampled {row.get('sampled')}, probe_wrong "
                              f"{row.get('probe_wrong')}")
        if errors:
            print("FAIL:\n  " + "\n  ".join(errors))
            print(r.stderr[-2000:])
            return 1
    print("ok: kvpool bench failover at N=2000: every field, every key back, "
          "0 bad of 500 sampled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
