#!/usr/bin/env bash
# scripts/budget.sh: a stage that outlasts the budget is stopped (with its
# children) and reported, one with no time left is not run, a failing stage
# still fails, a passing one passes.
set -uo pipefail
source "$(dirname "$0")/../scripts/budget.sh"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

BUDGET=$((SECONDS + 2)) BUDGET_MIN_STAGE_S=1
budget_notes=()
# A stage and a child of it that would both run 60 s.
out=$(in_budget slow bash -c "sleep 60 & echo \$! > $tmp/child; wait"; echo "rc=$?")
grep -q "rc=0" <<<"$out" || fail "a stage stopped by the budget must not fail the run: $out"
grep -q "== BUDGET: slow stopped" <<<"$out" || fail "no BUDGET line: $out"
child=$(cat "$tmp/child")
for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
kill -0 "$child" 2>/dev/null && fail "the stage's child $child outlived the budget"

BUDGET=$((SECONDS)) BUDGET_MIN_STAGE_S=60
budget_notes=()
in_budget late touch "$tmp/ran" >"$tmp/out"
[[ -e $tmp/ran ]] && fail "a stage with no time left ran"
grep -q "== BUDGET: late not run" "$tmp/out" || fail "no 'not run' line"
((${#budget_notes[@]} == 1)) || fail "the skipped stage is not in budget_notes"

BUDGET=$((SECONDS + 600))
in_budget failing bash -c "exit 3"
rc=$?
((rc == 3)) || fail "a failing stage returned $rc, not its status 3"
in_budget passing true || fail "a passing stage failed"
echo "budget_test: ok"
