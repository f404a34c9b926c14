#!/usr/bin/env bash
# Configures and builds kvpool (Release) into build/. Used by demo.sh and
# test.sh; safe to run repeatedly (incremental, ccache when available).
# Arguments are targets to build (demo.sh builds only what it runs);
# none = everything, tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
# Paths relative to the checkout, so ccache hits across clones (CI builds a
# fresh clone in another folder).
export CCACHE_BASEDIR="$PWD"
# -Werror: the supported compiler is Debian 12's GCC, and a warning there is
# a failed build (sanitizer and fuzz builds keep warnings as warnings).
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPOOL_WERROR=ON >/dev/null
else
  cmake -S . -B build -DKVPOOL_WERROR=ON >/dev/null  # a tree from before
fi
if [ $# -gt 0 ]; then
  cmake --build build -j "$JOBS" --target "$@"
else
  cmake --build build -j "$JOBS"
fi
