#!/usr/bin/env bash
# The main job: set up, build, start a LocalCluster with two nodes, run a
# short demo workload and print what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/bin/kvpool demo "$@"
