#!/usr/bin/env bash
# Every test: set up, build, run the whole suite through ctest in parallel.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
