#!/usr/bin/env bash
# Every test: set up, check formatting (scripts/check_format.sh), build
# (-Werror), run the whole suite through ctest in parallel, then clang's
# thread-safety analysis over master, node and client (build-tsa/;
# docs/thread_safety.md), then every fuzz
# target for FUZZ_SECONDS (default 10) in its sanitized clang build
# (build-fuzz/; docs/fuzzing.md), then the whole suite again built with
# ASan+UBSan and the concurrent suites built with TSan (build-asan/,
# build-tsan/; docs/sanitizers.md). KVPOOL_SKIP_FUZZ=1 and
# KVPOOL_SKIP_SANITIZERS=1 skip those for a quicker local run; CI runs all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check_format.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@")
JOBS=2 scripts/thread_safety.sh
if [[ "${KVPOOL_SKIP_FUZZ:-0}" != 1 ]]; then
  JOBS=2 scripts/fuzz.sh all "${FUZZ_SECONDS:-10}"
fi
if [[ "${KVPOOL_SKIP_SANITIZERS:-0}" != 1 ]]; then
  scripts/sanitize.sh asan
  scripts/sanitize.sh tsan
fi
