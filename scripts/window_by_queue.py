#!/usr/bin/env python3
"""Route->get windows of a replay's router arms, grouped by the queue the
router was told about at the route (docs/results/README.md, "Tasks that
cannot land").

For each arm whose name contains "router", groups the requests by the
chosen engine's reported waiting count (`waiting_at_route`, 6 and more
together) and by that count less the admitted requests still loading
(`loading_at_route`), and prints per group the requests, the window's
p10/p50/p90 and the router's deadline p50; then the rank correlation of the
window with each count. Which count orders the windows is what a deadline
estimate built on it can get right.

Usage: scripts/window_by_queue.py DIR/replay.json
Standard library only.
"""

import json
import statistics
import sys


def rank(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def groups_table(rows, col, key):
    groups = {}
    for x in rows:
        groups.setdefault(min(key(x), 6), []).append(x)
    for k in sorted(groups):
        g = groups[k]
        w = sorted(x[col["window_ms"]] for x in g)
        d = sorted(x[col["deadline_ms"]] for x in g)
        n = len(g)
        print(f"    {k}{'+' if k == 6 else ''}: {n:4d} requests, window "
              f"p10/p50/p90 {w[n // 10]:.1f}/{w[n // 2]:.1f}/"
              f"{w[min(n - 1, 9 * n // 10)]:.1f} ms, deadline p50 "
              f"{d[n // 2]} ms")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        report = json.load(f)
    for arm in report["arms"]:
        if "router" not in arm["name"]:
            continue
        col = {c: i for i, c in enumerate(arm["request_columns"])}
        if "waiting_at_route" not in col:
            print(f"{arm['name']}: no waiting_at_route (an older report)")
            continue
        rows = [x for x in arm["request_rows"]
                if x[col["waiting_at_route"]] >= 0]
        waiting = [x[col["waiting_at_route"]] for x in rows]
        unadmitted = [x[col["waiting_at_route"]] - x[col["loading_at_route"]]
                      for x in rows]
        windows = [x[col["window_ms"]] for x in rows]
        print(f"{arm['name']}: {len(rows)} routed requests")
        print("  by reported waiting:")
        groups_table(rows, col, lambda x: x[col["waiting_at_route"]])
        print("  by waiting less loading (not yet admitted):")
        groups_table(rows, col, lambda x: x[col["waiting_at_route"]] -
                     x[col["loading_at_route"]])
        if len(rows) > 2:
            print("  rank correlation with the window: waiting %.3f, "
                  "not yet admitted %.3f" % (
                      statistics.correlation(rank(waiting), rank(windows)),
                      statistics.correlation(rank(unadmitted),
                                             rank(windows))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
