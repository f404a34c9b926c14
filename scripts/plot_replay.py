#!/usr/bin/python3
"""Plots of a `kvpool replay` report (its JSON): TTFT CDF per arm, DRAM
watermark over time per arm, and the route->get window histogram of blocks
that were SSD-only when routed (read from DRAM vs from SSD).

Usage: /usr/bin/python3 scripts/plot_replay.py REPORT.json OUT_DIR
Needs python3-matplotlib (Debian's /usr/bin/python3 has it; a pyenv python
earlier in PATH may not). Writes ttft_cdf.svg, watermark.svg, window_hist.svg.
"""
import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.stderr.write("plot_replay.py: matplotlib missing "
                     "(apt-get install python3-matplotlib)\n")
    sys.exit(3)

# SVG text stays text, and the files do not change from run to run.
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["svg.hashsalt"] = "kvpool-replay"


def ttft_cdf(report, out):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    cols = None
    for arm in report["arms"]:
        cols = cols or arm["request_columns"]
        i = arm["request_columns"].index("ttft_ms")
        v = sorted(r[i] for r in arm["request_rows"])
        if not v:
            continue
        y = [(k + 1) / len(v) for k in range(len(v))]
        ax.step(v, y, where="post",
                label="%s (p50 %.0f ms)" % (arm["name"], arm["ttft_ms"]["p50"]))
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFT per arm")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ttft_cdf.svg"))
    plt.close(fig)


def watermark(report, out):
    hw = report["setup"]["high_watermark"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in report["arms"]:
        s = arm["series"]
        # The measure phase and what follows it; t = 0 is its start.
        pts = [(t, r) for t, r, p in zip(s["t"], s["main_ratio"], s["phase"])
               if p in ("measure", "drain")]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1,
                    label=arm["name"])
        buf = [(t, r) for t, r, p in zip(s["t"], s["buffer_ratio"], s["phase"])
               if p in ("measure", "drain") and r > 0]
        if buf:
            ax.plot([p[0] for p in buf], [p[1] for p in buf], lw=1, ls=":",
                    label=arm["name"] + " (prefetch buffer)")
    ax.axhline(hw, color="red", ls="--", lw=1, label="high watermark")
    ax.set_xlabel("seconds since the measurement started")
    ax.set_ylabel("MAIN DRAM used / capacity")
    ax.set_title("DRAM watermark over time (measure phase)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "watermark.svg"))
    plt.close(fig)


def window_hist(report, out):
    arms = [a for a in report["arms"] if a["windows"]]
    if not arms:
        return
    fig, axes = plt.subplots(len(arms), 1, figsize=(7, 1.9 * len(arms) + 0.8),
                             sharex=True, squeeze=False)
    allw = [w[0] for a in arms for w in a["windows"] if w[0] > 0]
    lo, hi = (min(allw), max(allw)) if allw else (0.1, 1000)
    lo, hi = max(lo, 0.05), max(hi, lo * 10)
    bins = [lo * (hi / lo) ** (k / 30) for k in range(31)]
    for ax, arm in zip(axes[:, 0], arms):
        dram, ssd = [], []
        for w, n, d in arm["windows"]:
            dram += [max(w, lo)] * d
            ssd += [max(w, lo)] * (n - d)
        ax.hist([dram, ssd], bins=bins, stacked=True,
                label=["read from DRAM", "read from SSD / not read"],
                color=["tab:green", "tab:red"])
        ax.set_xscale("log")
        ax.set_ylabel("blocks")
        ax.set_title("%s: window of blocks SSD-only when routed" % arm["name"],
                     fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("route -> get window (ms, log scale)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "window_hist.svg"))
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        report = json.load(f)
    os.makedirs(sys.argv[2], exist_ok=True)
    ttft_cdf(report, sys.argv[2])
    watermark(report, sys.argv[2])
    window_hist(report, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
