# in_budget NAME CMD...: runs CMD as stage NAME within what is left of
# $BUDGET seconds (counted by bash's $SECONDS from the caller's start).
# Sourced by scripts/test.sh; tests/budget_test.sh checks it.
#  - no time left (under 60 s): the stage is not run;
#  - the stage outlasts the budget: it is stopped there, with everything it
#    started (timeout gives it a process group of its own);
#  - either way a line "== BUDGET: ..." says so, the stage is added to
#    budget_notes (the caller prints them at the end), and 0 is returned;
#  - otherwise the stage's own status is returned, so a failure fails.
in_budget() {
  local name=$1
  shift
  local left=$((BUDGET - SECONDS))
  if ((left < ${BUDGET_MIN_STAGE_S:-60})); then
    budget_notes+=("$name: not run (${SECONDS} s of ${BUDGET} s used)")
    echo "== BUDGET: $name not run: ${SECONDS} s of the ${BUDGET} s budget used"
    return 0
  fi
  local rc=0
  timeout -k 30 "$left" "$@" || rc=$?
  if ((rc == 124 || rc == 137)); then
    budget_notes+=("$name: stopped at the budget after ${left} s")
    echo "== BUDGET: $name stopped at the ${BUDGET} s budget (ran ${left} s)"
    return 0
  fi
  return $rc
}
