#!/usr/bin/env bash
# Runs a libFuzzer target of fuzz/ for SECONDS (docs/fuzzing.md):
#   scripts/fuzz.sh TARGET SECONDS   e.g. scripts/fuzz.sh fuzz_trace 60
#   scripts/fuzz.sh all SECONDS      every target, one after the other
# Configures and builds build-fuzz/ (clang-14, KVPOOL_FUZZ=ON) when needed,
# fuzzes a copy of fuzz/corpus/TARGET (the checked-in seeds stay as they
# are), and prints the executions and coverage of the run. Crash inputs land
# in build-fuzz/fuzz-artifacts/TARGET/. Env: JOBS (ninja -j, default 1),
# FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD_DIR:-$ROOT/build-fuzz}
JOBS=${JOBS:-1}
# ccache across clones (CI builds a fresh clone in another folder): paths
# relative to the checkout, and no build-directory hash despite -g.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
TARGETS=(fuzz_size_parse fuzz_trace fuzz_config fuzz_ssd_record
         fuzz_wire_frame fuzz_wire_client fuzz_master_rpc fuzz_router_http)

if [[ $# -ne 2 ]]; then
  echo "usage: $0 TARGET|all SECONDS   (targets: ${TARGETS[*]})" >&2
  exit 2
fi
what=$1 secs=$2

if ! command -v clang++-14 >/dev/null; then
  echo "clang-14 missing: apt-get install -y clang-14 libfuzzer-14-dev libclang-rt-14-dev" >&2
  exit 1
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DKVPOOL_FUZZ=ON >/dev/null
fi

# Per-target libFuzzer flags: inputs big enough for a few SSD records.
extra_args() {
  case $1 in
    fuzz_ssd_record) echo "-max_len=65536" ;;
    *) echo "-max_len=4096" ;;
  esac
}

run_one() {
  local t=$1
  ninja -C "$BUILD" -j"$JOBS" "$t" >/dev/null
  local work=$BUILD/fuzz-work/$t art=$BUILD/fuzz-artifacts/$t
  rm -rf "$work" && mkdir -p "$work" "$art"
  cp "$ROOT/fuzz/corpus/$t"/* "$work"/ 2>/dev/null || true
  local log=$BUILD/fuzz-logs/$t.log
  mkdir -p "$(dirname "$log")"
  echo "== $t: ${secs}s (log $log)"
  local rc=0
  # shellcheck disable=SC2046
  "$BUILD/bin/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$art/" $(extra_args "$t") ${FUZZ_ARGS:-} "$work" \
    >"$log" 2>&1 || rc=$?
  local last
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  local execs
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  echo "   final: ${last:-?}"
  echo "   executions: ${execs:-?}  exit: $rc"
  if [[ $rc -ne 0 ]]; then
    grep -E 'ERROR|INVARIANT|SUMMARY|Test unit written' "$log" | head -5 || true
  fi
  return $rc
}

if [[ $what == all ]]; then
  status=0
  for t in "${TARGETS[@]}"; do run_one "$t" || status=1; done
  exit $status
fi
run_one "$what"
