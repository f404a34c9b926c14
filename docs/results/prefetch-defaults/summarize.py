#!/usr/bin/python3
"""Tables and the plot of docs/results/prefetch-defaults/README.md from the
replay.json of each run directory here (or those given).

    docs/results/prefetch-defaults/summarize.py [DIR ...]

Per trace: the off runs' TTFT p50 (their spread is the noise band), each
feature arm's three runs against the mean off p50, the KV-load part of TTFT
(mean), the holders' disk reads, and the share of SSD-only blocks a get read
from DRAM against the reachable bound. Writes summary.svg beside itself.
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FEATURES = ["exist", "router", "exist+router"]


def base(name):
    return name.split("#")[0]


# The run logs end as replay-truth's do: reuse its reader of "wall_sec=".
sys.path.insert(0, os.path.join(HERE, "..", "replay-truth"))
from summarize import wall_of  # noqa: E402


def load(d):
    r = json.load(open(os.path.join(d, "replay.json")))
    arms = [a for a in r["arms"] if a.get("ok")]
    by = {}
    for a in arms:
        by.setdefault(base(a["name"]), []).append(a)
    return r, by


def fmt(xs, f="{:.1f}"):
    return ", ".join(f.format(x) for x in xs)


def main(dirs):
    if not dirs:
        dirs = sorted(os.path.join(HERE, d) for d in os.listdir(HERE)
                      if os.path.exists(os.path.join(HERE, d, "replay.json")))
    plot_rows = []
    print("| trace | off p50 (ms), runs | off max/min | arm | p50 (ms), runs "
          "| p50 / mean off | verdict | KV-load mean (ms): off / arm | "
          "disk reads: off / arm (mean) | SSD-only at route read from DRAM "
          "(bound) | contended runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        name = os.path.basename(d.rstrip("/"))
        r, by = load(d)
        offs = [a["ttft_ms"]["p50"] for a in by.get("off", [])]
        if not offs:
            continue
        lo, hi, mo = min(offs), max(offs), statistics.mean(offs)
        off_kv = statistics.mean(a["kv_load_ms"]["mean"] for a in by["off"])
        off_rd = statistics.mean(a["reads"]["holder_disk_reads"]
                                 for a in by["off"])
        cont_off = sum(1 for a in by["off"] if a["cpu"].get("contended"))
        first = True
        for f in FEATURES + ["all-dram"]:
            runs = by.get(f, [])
            if not runs:
                continue
            p50 = [a["ttft_ms"]["p50"] for a in runs]
            ratio = [x / mo for x in p50]
            # The replay's verdict rule: the off runs' range, widened by its
            # own width on either side, is noise.
            band = hi - lo
            med = statistics.median(p50)
            if med > hi + band:
                verdict = "worse"
            elif med < lo - band:
                verdict = "better"
            else:
                verdict = "within noise"
            kv = statistics.mean(a["kv_load_ms"]["mean"] for a in runs)
            rd = statistics.mean(a["reads"]["holder_disk_reads"] for a in runs)
            sor = [a["ssd_only_at_route"] for a in runs]
            share = statistics.mean(s.get("dram_share", 0) for s in sor)
            bound = statistics.mean(
                s.get("reachable_bound", {}).get("share", 0) for s in sor)
            cont = sum(1 for a in runs if a["cpu"].get("contended"))
            lead = (f"| {name} | {fmt(offs)} | {hi / lo:.2f} | " if first
                    else "| | | | ")
            print(lead + f"{f} | {fmt(p50)} | {fmt(ratio, '{:.2f}')} | "
                  f"{verdict} | "
                  f"{off_kv:.1f} / {kv:.1f} | {off_rd:.0f} / {rd:.0f} | "
                  f"{share * 100:.1f} % ({bound * 100:.1f} %) | "
                  f"{cont}/{len(runs)} (off {cont_off}/{len(by['off'])}) |")
            first = False
            if f in FEATURES:
                plot_rows.append((name, f, ratio, lo / mo, hi / mo))
        w = wall_of(d)
        if w:
            print(f"| | wall {w} s | | | | | | | | | |")
    plot(plot_rows)


def plot(rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    traces = []
    for t, _, _, _, _ in rows:
        if t not in traces:
            traces.append(t)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    colors = {"exist": "tab:blue", "router": "tab:orange",
              "exist+router": "tab:green"}
    for i, t in enumerate(traces):
        for j, (tt, f, ratio, lo, hi) in enumerate(r for r in rows if r[0] == t):
            if j == 0:
                ax.add_patch(plt.Rectangle((i - 0.4, lo), 0.8, hi - lo,
                                           color="0.85", zorder=0))
            x = i - 0.25 + 0.25 * FEATURES.index(f)
            ax.scatter([x] * len(ratio), ratio, color=colors[f], s=18,
                       label=f if i == 0 else None, zorder=2)
    ax.axhline(1.0, color="0.4", lw=0.8)
    ax.set_xticks(range(len(traces)))
    ax.set_xticklabels(traces)
    ax.set_ylabel("TTFT p50 / mean off p50")
    ax.set_title("Prefetch with the default settings (grey: the off runs)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "summary.svg"))


if __name__ == "__main__":
    main(sys.argv[1:])
