#!/usr/bin/env bash
# What Abseil's deadlock detection costs kvpool's RPCs (docs/configuration.md,
# "Abseil deadlock detection"): `kvpool bench master --calls-only` run
# alternately with detection on (KVPOOL_ABSL_DEADLOCK_DETECTION=1, Debian's
# default) and off (kvpool's default), ROUNDS times each; prints each call's
# p50 per run and the median over rounds of off/on - 1.
# Usage: scripts/absl_detection_ab.sh [ROUNDS] [SECONDS_PER_CALL]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
SECONDS_PER_CALL="${2:-2}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
for ((i = 0; i < ROUNDS; i++)); do
  echo "[round $((i + 1))/$ROUNDS]" >&2
  KVPOOL_ABSL_DEADLOCK_DETECTION=1 build/bin/kvpool bench master --calls-only \
    --seconds "$SECONDS_PER_CALL" >"$OUT/on.$i" 2>/dev/null
  build/bin/kvpool bench master --calls-only \
    --seconds "$SECONDS_PER_CALL" >"$OUT/off.$i" 2>/dev/null
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def table(path):
    rows = {}
    for line in open(path):
        m = re.match(r"^(.+?)\s{2,}(\d+)\s+([\d.]+)\s+([\d.]+)\s+(-?[\d.]+)$",
                     line.rstrip())
        if m:
            rows[(m.group(1).strip(), int(m.group(2)))] = float(m.group(3))
    return rows
on = [table(f"{out}/on.{i}") for i in range(rounds)]
off = [table(f"{out}/off.{i}") for i in range(rounds)]
print(f"{'call':34} {'batch':>5} {'on p50 us':>10} {'off p50 us':>10} "
      f"{'off/on-1 (median of rounds)':>28}")
for key in on[0]:
    a = statistics.median(r[key] for r in on)
    b = statistics.median(r[key] for r in off)
    ratio = statistics.median(off[i][key] / on[i][key] - 1
                              for i in range(rounds))
    print(f"{key[0]:34} {key[1]:5d} {a:10.1f} {b:10.1f} {ratio * 100:27.1f}%")
PY
