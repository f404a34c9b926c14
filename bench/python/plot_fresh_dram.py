#!/usr/bin/env python3
"""Plots fresh_dram_bench's tables: first / repeated read and never-touched
/ written put, per node setting (4 KiB pages vs huge pages), with the 1.3x
target line.

    /usr/bin/python3 bench/python/plot_fresh_dram.py \\
        docs/results/fresh-dram/fresh_dram_bench_44.txt \\
        docs/results/fresh-dram/first_vs_repeated.svg
"""

import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW = re.compile(r"^\| (put|get) (\d+) KiB, (shm|tcp), ([\w-]+) \| "
                 r"([\d.]+) \([^)]*\) \| ([\d.]+) \(([\d.]+)-([\d.]+)\) \|")
SETTINGS = [("4k", "4 KiB pages (before)", "#c44e52"),
            ("huge", "2 MiB pages (default now)", "#4c72b0")]


def main(src, out):
    rows = {}
    for line in open(src):
        m = ROW.match(line)
        if m:
            op, kib, transport, setting = m.group(1, 2, 3, 4)
            first, again = float(m.group(5)), float(m.group(6))
            rows[(op, int(kib), transport, setting)] = first / again
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, op, title in ((axes[0], "get", "first read / repeated read"),
                          (axes[1], "put",
                           "put into never-touched / written DRAM")):
        labels = ["%s %s" % (t, "64K" if k == 64 else "%dM" % (k // 1024))
                  for t in ("shm", "tcp") for k in (64, 1024, 4096)]
        keys = [(t, k) for t in ("shm", "tcp") for k in (64, 1024, 4096)]
        width = 0.38
        for i, (setting, name, color) in enumerate(SETTINGS):
            xs = [j + (i - 0.5) * width for j in range(len(keys))]
            ys = [rows.get((op, k, t, setting), 0) for t, k in keys]
            ax.bar(xs, ys, width, label=name, color=color)
        ax.axhline(1.3, color="gray", linestyle="--", linewidth=1)
        ax.text(len(keys) - 0.5, 1.32, "target 1.3x", ha="right",
                fontsize=8, color="gray")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 2.2)
    axes[0].set_ylabel("ratio of medians (separate process)")
    axes[0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
