#!/usr/bin/env bash
# clang's thread-safety analysis over the locked code (docs/thread_safety.md):
#  1. checks the check: tests/thread_safety/guarded_ok.cc must compile and
#     unguarded_write.cc must fail with thread-safety errors;
#  2. builds the master, node and client libraries (and what they link) with
#     clang-14 and -Werror=thread-safety in build-tsa/.
# Env: JOBS (ninja -j, default nproc). Used by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD_DIR:-$ROOT/build-tsa}
JOBS=${JOBS:-$(nproc)}
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
if ! command -v clang++-14 >/dev/null; then
  echo "clang-14 missing: apt-get install -y clang-14" >&2
  exit 1
fi

probe() {
  clang++-14 -std=c++20 -I"$ROOT/src" -Wthread-safety -Werror=thread-safety \
    -fsyntax-only "$ROOT/tests/thread_safety/$1" 2>&1
}
probe guarded_ok.cc || { echo "thread_safety: guarded_ok.cc must compile" >&2; exit 1; }
if out=$(probe unguarded_write.cc); then
  echo "thread_safety: unguarded_write.cc compiled; the analysis is not on" >&2
  exit 1
fi
if ! grep -q "requires holding mutex" <<<"$out"; then
  echo "thread_safety: unguarded_write.cc failed for another reason:" >&2
  echo "$out" >&2
  exit 1
fi
echo "thread_safety: probes ok (a violation is an error)"

if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DKVPOOL_THREAD_SAFETY=ON >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target kvpool_master kvpool_ha_master kvpool_node \
  kvpool_client kvpool_compat
echo "thread_safety: master, node, client and compat build clean under -Wthread-safety"
