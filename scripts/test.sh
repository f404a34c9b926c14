#!/usr/bin/env bash
# Every test: set up, check formatting (scripts/check_format.sh), build
# (-Werror), run the whole suite through ctest in parallel, then clang's
# thread-safety analysis over master, node and client (build-tsa/;
# docs/thread_safety.md), then every fuzz
# target for FUZZ_SECONDS (default 10) in its sanitized clang build
# (build-fuzz/; docs/fuzzing.md), then the whole suite again built with
# ASan+UBSan and the concurrent suites built with TSan (build-asan/,
# build-tsan/; docs/sanitizers.md). KVPOOL_SKIP_FUZZ=1 and
# KVPOOL_SKIP_SANITIZERS=1 skip those for a quicker local run.
#
# The time budget (KVPOOL_TEST_BUDGET_S, default 2700 s from this script's
# start): the build and the suite always run to the end; each later stage
# (thread safety, fuzz, ASan, TSan) runs only in what is left of the budget,
# and one that would outlast it is stopped there. A stage skipped or stopped
# so says it in a line beginning "== BUDGET" (and the summary at the end);
# a stopped stage does not fail the run (what it printed before the stop is
# in the log), a stage that ends with a failure does.
# Why: CI stops a run at 90 minutes and then lands nothing; with an empty
# ccache, the four extra builds alone take about an hour on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${KVPOOL_TEST_BUDGET_S:-2700}
budget_notes=()

# shellcheck source=budget.sh
source scripts/budget.sh

scripts/setup.sh
scripts/check_format.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "${CTEST_JOBS:-2}" "$@")
JOBS=2 in_budget thread_safety scripts/thread_safety.sh
if [[ "${KVPOOL_SKIP_FUZZ:-0}" != 1 ]]; then
  JOBS=2 in_budget fuzz scripts/fuzz.sh all "${FUZZ_SECONDS:-10}"
fi
if [[ "${KVPOOL_SKIP_SANITIZERS:-0}" != 1 ]]; then
  in_budget asan scripts/sanitize.sh asan
  in_budget tsan scripts/sanitize.sh tsan
fi
if ((${#budget_notes[@]} > 0)); then
  echo "== BUDGET: stages cut by the ${BUDGET} s budget (all else passed):"
  printf '   %s\n' "${budget_notes[@]}"
else
  echo "== every stage ran to the end in ${SECONDS} s"
fi
