#!/usr/bin/env bash
# Every test: set up, build, run the whole suite through ctest in parallel,
# then every fuzz target for FUZZ_SECONDS (default 10) in its sanitized
# clang build (build-fuzz/; docs/fuzzing.md). KVPOOL_SKIP_FUZZ=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@")
if [[ "${KVPOOL_SKIP_FUZZ:-0}" != 1 ]]; then
  JOBS=2 scripts/fuzz.sh all "${FUZZ_SECONDS:-10}"
fi
