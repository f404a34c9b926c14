#!/usr/bin/env bash
# Runs test suites in a sanitizer build of their own (docs/sanitizers.md):
#   scripts/sanitize.sh asan   every ctest entry, built with ASan+UBSan
#                              (build-asan/), Python tests included
#   scripts/sanitize.sh tsan   the concurrent suites (common, master,
#                              transport, client, router, cluster, ha,
#                              events) built
#                              with TSan
#                              (build-tsan/)
# Extra arguments go to ctest (e.g. -R master_test). Env: JOBS (ninja -j,
# default nproc), CTEST_JOBS (default 2; 1 for tsan). Any sanitizer report fails the
# test that printed it: halt_on_error / exitcode below.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CCACHE_BASEDIR="$ROOT"
# These builds have debug info (-g1), for which ccache hashes the build
# directory by default: CI's fresh clone in another folder would then miss
# every object. The price: stack traces name the first clone's source paths.
export CCACHE_NOHASHDIR=1
JOBS=${JOBS:-$(nproc)}
# TSan slows the suites 5-15x, and two of them side by side on two cores
# stretched single gets and lookups past their leases and deadlines (CI
# failures of stops 26 and 27): under TSan they run one at a time.
if [[ "${1:-}" == tsan ]]; then
  CTEST_JOBS=${CTEST_JOBS:-1}
else
  CTEST_JOBS=${CTEST_JOBS:-2}
fi

if [[ $# -lt 1 ]]; then
  echo "usage: $0 asan|tsan [ctest args...]" >&2
  exit 2
fi
kind=$1
shift
SUPP=$ROOT/tests/sanitizers

case $kind in
  asan)
    build=$ROOT/build-asan sanitize=address
    # The whole suite: every target the normal build has.
    targets=(all)
    # The leak check stays on for the C++ binaries; Python (interpreter and
    # torch) keeps objects alive until exit by design, so python_*_test set
    # detect_leaks=0 for themselves (python/CMakeLists.txt).
    export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp"
    export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
    ctest_filter=()
    ;;
  tsan)
    build=$ROOT/build-tsan sanitize=thread
    # The suites whose tests run threads against each other, and the
    # binaries they start.
    targets=(common_test master_test transport_test client_test rpc_test
             router_test cluster_test ha_test events_test kvpool-master
             kvpool-node)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp:print_suppressions=0"
    ctest_filter=(-R '^(common|master|transport|client|rpc|router|cluster|ha|events)_test$')
    ;;
  *)
    echo "unknown sanitizer '$kind' (asan or tsan)" >&2
    exit 2
    ;;
esac

if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DKVPOOL_SANITIZE=$sanitize >/dev/null
fi
echo "== $kind: building ${targets[*]} in $build"
log=$build/build.log
if ! ninja -C "$build" -j"$JOBS" "${targets[@]}" >"$log" 2>&1; then
  grep -E -A20 '^FAILED|ninja: error' "$log" | head -80
  exit 1
fi
echo "== $kind: running tests"
cd "$build"
# Sanitized binaries are 2-10x slower: their ctest timeouts are scaled in
# CMakeLists.txt (KVPOOL_TEST_TIMEOUT).
rc=0
ctest --output-on-failure -j "$CTEST_JOBS" "${ctest_filter[@]}" "$@" || rc=$?
if [[ $rc -ne 0 ]]; then
  # The reports again, short and last: a CI log cut in the middle keeps its
  # tail, and the access stacks are what a reader needs first.
  echo "== $kind: sanitizer reports (first 70 lines of each)"
  awk '/^(WARNING|ERROR): .*Sanitizer|^==[0-9]+==ERROR|runtime error:/ {n=70}
       n > 0 {print; n--}' Testing/Temporary/LastTest.log | head -400 || true
fi
exit $rc
