#!/usr/bin/python3
"""Plots of a `kvpool replay` report (its JSON): TTFT CDF per arm, DRAM
watermark over time per arm, the route->get window histogram of blocks
that were SSD-only when routed (read from DRAM vs from SSD), the mean TTFT
per arm split into waiting / KV load / prefill, and the measured GPU busy
fraction and CPU seconds by component per arm.

Usage: /usr/bin/python3 scripts/plot_replay.py REPORT.json OUT_DIR
Needs python3-matplotlib (Debian's /usr/bin/python3 has it; a pyenv python
earlier in PATH may not). Writes ttft_cdf.svg, watermark.svg, window_hist.svg,
and, only when the report has their fields (newer reports), ttft_breakdown.svg
(arms' "ttft_parts_ms") and gpu_busy_cpu.svg (arms' "gpu_busy" / "cpu").
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


# (key in arm["ttft_parts_ms"], legend label, colour), in stacking order.
TTFT_PARTS = (("wait", "waiting (before admission)", "tab:gray"),
              ("kv_load", "KV load (not overlapped)", "tab:orange"),
              ("prefill", "prefill steps", "tab:blue"))


def _ok(arm):
    """False for an arm whose (optional) "status" says it did not finish."""
    return arm.get("status", "ok") == "ok"


def _num(v):
    """v if it is a number (JSON null, strings, bools -> None)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def _arm_label(arm, sep=" "):
    name = str(arm.get("name", "?"))
    if (arm.get("cpu") or {}).get("contended"):
        name += sep + "(CPU contended)"
    return name


def ttft_breakdown(report, out):
    arms = [a for a in report["arms"] if _ok(a) and a.get("ttft_parts_ms")]
    if not arms:
        return
    n = len(arms)
    fig, ax = plt.subplots(figsize=(7.5, 1.9 + 0.5 * n))
    ys = list(range(n))
    ends = [0.0] * n
    for key, label, color in TTFT_PARTS:
        w = [_num((a["ttft_parts_ms"].get(key) or {}).get("mean")) or 0.0
             for a in arms]
        ax.barh(ys, w, left=ends, height=0.6, color=color, label=label)
        ends = [e + x for e, x in zip(ends, w)]
    for y, a, x in zip(ys, arms, ends):
        t = a.get("ttft_ms") or {}
        parts = ["%s %.0f" % (k, _num(t.get(k))) for k in ("p50", "mean")
                 if _num(t.get(k)) is not None]
        if parts:
            ax.text(x, y, "  " + " / ".join(parts) + " ms", va="center",
                    fontsize=8)
    ax.set_yticks(ys)
    ax.set_yticklabels([_arm_label(a) for a in arms], fontsize=8)
    ax.invert_yaxis()
    # Room right of the longest bar for its annotation.
    ax.set_xlim(0, (max(ends) or 1.0) * 1.5)
    ax.set_xlabel("mean TTFT (ms)")
    setup = report.get("setup") or {}
    extra = ", ".join("%s %s" % (k, setup[f]) for f, k in
                      (("engine", "engine"), ("load_start", "load start"))
                      if setup.get(f) is not None)
    ax.set_title("TTFT breakdown per arm (means)" +
                 ("\n" + extra if extra else ""), fontsize=10, pad=22)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    # Legend above the bars, under the title, so it never covers a bar.
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3,
              fontsize=8, frameon=False, borderaxespad=0.1)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ttft_breakdown.svg"))
    plt.close(fig)


def gpu_busy_cpu(report, out):
    arms = [a for a in report["arms"]
            if _ok(a) and (a.get("gpu_busy") or a.get("cpu"))]
    if not arms:
        return
    xs = list(range(len(arms)))
    labels = [_arm_label(a, "\n") for a in arms]
    fig, (gx, cx) = plt.subplots(1, 2, figsize=(10.5, 4.6))

    # Left: measured GPU busy fraction.
    for x, a in zip(xs, arms):
        v = _num((a.get("gpu_busy") or {}).get("mean"))
        if v is None:
            gx.text(x, 0.02, "n/a", ha="center", fontsize=8)
            continue
        gx.bar(x, v, width=0.6, color="tab:purple")
        gx.text(x, v + 0.01, "%.2f" % v, ha="center", va="bottom", fontsize=8)
    target = _num((report.get("engine_model") or {}).get("gpu_busy_target"))
    if target is not None:
        gx.axhline(target, color="red", ls="--", lw=1,
                   label="target %.2f" % target)
        gx.legend(loc="upper right", fontsize=8)
    gx.set_ylim(0, 1.15)
    gx.set_ylabel("GPU busy fraction (measured)")
    gx.set_title("GPU busy per arm", fontsize=10)

    # Right: CPU seconds by component (stacked) against the capacity.
    def comp_of(a):
        return (a.get("cpu") or {}).get("components_sec") or {}

    comps = []
    for a in arms:
        comps += [c for c in comp_of(a) if c not in comps]
    bottom = [0.0] * len(arms)
    colors = plt.get_cmap("tab20").colors
    for k, c in enumerate(comps):
        h = [_num(comp_of(a).get(c)) or 0.0 for a in arms]
        cx.bar(xs, h, bottom=bottom, width=0.6, label=c,
               color=colors[k % len(colors)])
        bottom = [b + v for b, v in zip(bottom, h)]
    cap_label = "capacity (wall s x cores)"
    for x, a in zip(xs, arms):
        cap = _num((a.get("cpu") or {}).get("capacity_sec"))
        if cap is not None:
            cx.hlines(cap, x - 0.4, x + 0.4, colors="black", linestyles="--",
                      lw=1.5, label=cap_label)
            cap_label = None
        if not comp_of(a):
            cx.text(x, 0, "n/a", ha="center", va="bottom", fontsize=8)
    cx.set_ylabel("CPU seconds during the measurement")
    cx.set_title("CPU seconds by component per arm", fontsize=10)
    if comps or cap_label is None:
        cx.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    cx.margins(y=0.1)
    cx.set_ylim(bottom=0)

    for ax in (gx, cx):
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlim(-0.6, len(arms) - 0.4)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gpu_busy_cpu.svg"))
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
    ttft_breakdown(report, sys.argv[2])
    gpu_busy_cpu(report, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
