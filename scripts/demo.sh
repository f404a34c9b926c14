#!/usr/bin/env bash
# The main job: set up, build, start a LocalCluster with two nodes, run a
# short demo workload and print what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Only what the demo runs (the kvpool binary: the LocalCluster demo and the
# replay); scripts/test.sh builds the rest, tests included.
scripts/build.sh kvpool
./build/bin/kvpool demo "$@"

# A short trace replay: every arm on the last 100 requests of the first
# 3100 of the synthetic trace (256 KiB blocks and small DRAM so it takes a
# few minutes on 2 cores), with off run three times so each arm gets a
# verdict against off's own run-to-run spread (better, worse or within
# noise). The replay caps its disk and sizes its model from the cap
# (docs/replay.md, "Timing the machine can keep"): it needs root, as the
# setup does; its SSD files go to /var/tmp, which is on a disk (a tmpfs
# /tmp could not be capped). The full runs and their reports are in
# docs/results/.
TRACE="${KVPOOL_TRACE:-../shared/traces/synthetic_trace.jsonl}"
if [[ -f "$TRACE" ]]; then
  echo "== replay: $TRACE (100 requests measured; off x3, on-hit, exist, router, exist+router, all-dram)"
  ./build/bin/kvpool replay --trace "$TRACE" --requests 3100 --measure 100 \
    --block_size 256KiB --dram 256MiB --ssd 2GiB --engines 2 --dir /var/tmp \
    --arms off,on-hit,exist,router,exist+router,all-dram,off,off \
    --out "/tmp/kvpool-demo-replay-$$"
else
  echo "== replay skipped: no trace at $TRACE (set KVPOOL_TRACE)"
fi
