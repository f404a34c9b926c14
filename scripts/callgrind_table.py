#!/usr/bin/env python3
"""Instructions per op from `kvpool bench transfer --security
--security-instructions N` run under callgrind (docs/security.md).

Usage: callgrind_table.py WINDOWS.tsv CALLGRIND_DIR

WINDOWS.tsv is what the bench printed on stdout ("window<TAB>label<TAB>ops
<TAB>wall seconds" lines); CALLGRIND_DIR holds the callgrind.out.* files,
one per window, each named by its label in its "desc: Trigger" line. The
clusters' own threads (heartbeats, housekeeping) run during every window;
the "idle" windows give their rate, taken off each window in proportion to
its wall time. Each arm has a window per pass (the bench runs the arms
forward, then backward); the smaller is kept. Prints instructions per op
for each arm and each arm's difference from "open".
"""
import glob
import os
import sys


def read_dumps(directory):
    """label -> instructions (the dump's summary line)."""
    dumps = {}
    for path in glob.glob(os.path.join(directory, "callgrind.out.*")):
        label = summary = None
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    label = line.split(": ", 3)[3].strip()
                elif line.startswith("summary: "):
                    summary = int(line.split()[1])
                    break
        if label is not None and summary is not None:
            dumps[label] = summary
    return dumps


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    windows = []
    with open(sys.argv[1]) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 4 and parts[0] == "window":
                windows.append((parts[1], int(parts[2]), float(parts[3])))
    dumps = read_dumps(sys.argv[2])
    missing = [w[0] for w in windows if w[0] not in dumps]
    if missing:
        sys.exit(f"error: no callgrind dump for windows {missing}")
    idle = [(dumps[label], wall) for label, _, wall in windows
            if label.startswith("idle")]
    if not idle:
        sys.exit("error: no idle window to take the background from")
    idle_rate = sum(i for i, _ in idle) / sum(w for _, w in idle)
    per_op = {}
    for label, n, wall in windows:
        if label.startswith("idle"):
            continue
        op, path, size, arm, _pass = label.split(" ")
        # Background and one-off work only ever add instructions: of an
        # arm's windows (one per pass), the smallest is the closest to
        # what its ops cost.
        v = (dumps[label] - idle_rate * wall) / n
        cell = per_op.setdefault((op, path, size), {})
        cell[arm] = min(cell.get(arm, v), v)
    arms = ["open", "open-again", "caps", "caps+auth", "caps+auth+tls"]
    print(f"background (idle windows): {idle_rate / 1e6:.2f} M instructions/s,"
          " taken off each window by its wall time")
    print("instructions per op (thousands), all threads of the process: "
          "client, master, node; in brackets the arm's difference from open")
    print(f"{'op':4} {'path':4} {'size':6} {'open':>9} " +
          " ".join(f"{a:>22}" for a in arms[1:]))
    for (op, path, size), by_arm in per_op.items():
        base = by_arm["open"]
        cells = []
        for a in arms[1:]:
            if a not in by_arm:
                cells.append(f"{'-':>22}")
                continue
            v = by_arm[a]
            cells.append(f"{v / 1e3:9.1f} [{(v - base) / 1e3:+7.1f},"
                         f"{(v / base - 1) * 100:+5.1f}%]")
        print(f"{op:4} {path:4} {size:6} {base / 1e3:9.1f} " + " ".join(cells))


if __name__ == "__main__":
    main()
