#!/usr/bin/env bash
# The main job: set up, build, start a LocalCluster with two nodes, run a
# short demo workload and print what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/bin/kvpool demo "$@"

# A short trace replay: the six arms on the last 100 requests of the first
# 3100 of the synthetic trace (small blocks and DRAM so it takes a couple of
# minutes on 2 cores), batching engines, load sized by GPU busy; prints the
# per-arm TTFT table. The full runs and their reports are in docs/results/
# (see docs/replay.md).
TRACE="${KVPOOL_TRACE:-../shared/traces/synthetic_trace.jsonl}"
if [[ -f "$TRACE" ]]; then
  echo "== replay: $TRACE (100 requests measured, 6 arms)"
  ./build/bin/kvpool replay --trace "$TRACE" --requests 3100 --measure 100 \
    --block_size 256KiB --dram 256MiB --ssd 2GiB \
    --engines 2 --out "/tmp/kvpool-demo-replay-$$"
else
  echo "== replay skipped: no trace at $TRACE (set KVPOOL_TRACE)"
fi
