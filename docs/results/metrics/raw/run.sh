#!/bin/bash
# alternate before/after, 5 rounds
cd /work/main
for r in 1 2 3 4; do
  for v in before after; do
    if [ $v = before ]; then B=/tmp/before/kvpool; else B=build/bin/kvpool; fi
    echo "== round $r $v master"
    $B bench master --objects 200000 --json /tmp/mbench2/master_${v}_$r.json > /tmp/mbench2/master_${v}_$r.txt 2>&1
    echo "== round $r $v transfer"
    $B bench transfer --json /tmp/mbench2/transfer_${v}_$r.json > /tmp/mbench2/transfer_${v}_$r.txt 2>&1
  done
done
echo ALLDONE
