#!/usr/bin/python3
"""scripts/replay_sweep.py on a tiny grid: 2 loads x 2 DRAM-pressure shares,
arms off, all-dram, off, a 34-request trace written here (24 fill, 10
measured, as src/replay/test_trace.h). Checks sweep.json has every cell with
numbers, the maps exist, --from_dir re-renders without running, a finished
cell is not run again, and --help names every option.

    tests/replay_sweep_test.py --kvpool build/bin/kvpool
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(HERE, "..", "scripts", "replay_sweep.py")


def write_tiny_trace(path, fill=24, measured=10, gap_ms=50):
    nxt, t, lines = 0, 0, []
    for _ in range(fill):
        lines.append({"timestamp": t, "input_length": 3000,
                      "output_length": 4,
                      "hash_ids": list(range(nxt, nxt + 6))})
        nxt += 6
        t += gap_ms
    for i in range(measured):
        base = (i % fill) * 6
        lines.append({"timestamp": t, "input_length": 2900,
                      "output_length": 8,
                      "hash_ids": [base, base + 1, base + 2, base + 3, nxt,
                                   nxt + 1]})
        nxt += 2
        t += gap_ms
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvpool", required=True)
    args = ap.parse_args()
    py = sys.executable

    # --help names every option (the pass-through is described too).
    h = subprocess.run([py, SWEEP, "--help"], capture_output=True, text=True)
    check(h.returncode == 0, "--help failed")
    for opt in ("--kvpool", "--out", "--gpu_busy", "--ssd_only_share",
                "--arms", "--off_runs", "--from_dir", "--no_progress",
                "--trace"):
        check(opt in h.stdout, f"--help does not name {opt}")
    # A flag the sweep owns is refused, not passed through.
    r = subprocess.run([py, SWEEP, "--", "--time_scale", "1"],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "--time_scale" in r.stderr,
          "--time_scale was not refused")

    tmp = tempfile.mkdtemp(prefix="kvpool-sweep-test-")
    try:
        trace = os.path.join(tmp, "tiny.jsonl")
        write_tiny_trace(trace)
        out = os.path.join(tmp, "sweep")
        cmd = [py, SWEEP, "--kvpool", args.kvpool, "--out", out,
               "--gpu_busy", "0.3,0.6", "--ssd_only_share", "0.5,1",
               "--arms", "",
               "--", "--trace", trace, "--measure", "10",
               "--block_size", "256KiB", "--engines", "2", "--nodes", "2",
               "--dram", "16MiB", "--ssd", "256MiB",
               "--no_plots", "--dir", tmp]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"sweep of 4 cells: {time.monotonic() - t0:.1f} s")
        check(r.returncode == 0,
              f"sweep failed: {r.returncode}\n{r.stdout}\n{r.stderr}")
        check("cell 4/4" in r.stderr, f"no progress line: {r.stderr}")

        with open(os.path.join(out, "sweep.json")) as f:
            sweep = json.load(f)
        cells = sweep["cells"]
        check(len(cells) == 4, f"{len(cells)} cells, want 4")
        asked = sorted((c["gpu_busy"]["asked"], c["ssd_only_share"]["asked"])
                       for c in cells)
        check(asked == [(0.3, 0.5), (0.3, 1.0), (0.6, 0.5), (0.6, 1.0)],
              f"cells {asked}")
        for c in cells:
            where = c["dir"]
            check(isinstance(c["gpu_busy"]["measured"], (int, float)),
                  f"{where}: no measured gpu_busy")
            s = c["ssd_only_share"]["measured"]
            check(isinstance(s, (int, float)) and 0 <= s <= 1,
                  f"{where}: measured ssd_only_share {s}")
            # The knob reaches the replay: half of the fill comes back (at 1
            # the overflow's last eviction may leave a few in DRAM: 35 of 40
            # seen on this tiny pool).
            if c["ssd_only_share"]["asked"] == 0.5:
                check(0.3 <= s <= 0.7, f"{where}: share {s} for 0.5")
            else:
                check(s >= 0.8, f"{where}: share {s} for 1")
            check(len(c["off_p50_ms"]) == 2, f"{where}: off runs")
            check(isinstance(c["contended"], bool), f"{where}: contended")
            check(isinstance(c["off_spread_ms"], (int, float)),
                  f"{where}: no off spread")
            for name in ("off", "all-dram", "off#2"):
                e = c["arms"].get(name)
                check(e is not None, f"{where}: no arm {name}")
                for k in ("p50_ms", "ratio_to_off", "ratio_to_all_dram"):
                    check(isinstance(e[k], (int, float)) and e[k] > 0,
                          f"{where}/{name}: {k} = {e[k]}")
                check(isinstance(e["within_spread"], bool),
                      f"{where}/{name}: within_spread")
                check(isinstance(e["contended"], bool),
                      f"{where}/{name}: contended")
            check(c["arms"]["off"]["ratio_to_off"] == 1.0, "off / off")
            check(c["arms"]["off#2"]["within_spread"], "off#2 in spread")
        for ext in ("svg", "png"):
            p = os.path.join(out, f"map_all-dram.{ext}")
            check(os.path.getsize(p) > 1000, f"{p} missing or empty")

        # Resumable: every cell has its replay.json, so nothing runs again.
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr.count("done before") == 4,
              f"rerun ran cells again:\n{r.stderr}")
        # --from_dir re-renders from the cells alone.
        os.remove(os.path.join(out, "sweep.json"))
        os.remove(os.path.join(out, "map_all-dram.svg"))
        r = subprocess.run([py, SWEEP, "--from_dir", out],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"--from_dir failed:\n{r.stderr}")
        with open(os.path.join(out, "sweep.json")) as f:
            check(len(json.load(f)["cells"]) == 4, "--from_dir cells")
        check(os.path.exists(os.path.join(out, "map_all-dram.svg")),
              "--from_dir did not draw")
        check(time.monotonic() - t0 < 30, "rerun and re-render were slow")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
