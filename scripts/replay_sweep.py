#!/usr/bin/python3
"""The operating-point map of `kvpool replay` (issue #42, item 5).

Runs `kvpool replay` over a grid of load (--gpu_busy) x DRAM pressure
(--ssd_only_share), every cell with the arms off, <arms...>, all-dram and
off again (the repeated off gives the cell's run-to-run spread), and draws
per arm a heatmap of TTFT p50 against off and against the all-dram bound.
The axes are the *measured* values (the off arm's GPU busy fraction and the
share of the fill blocks SSD-only at measure start), not the asked ones.

    scripts/replay_sweep.py --out sweep-out \\
        --gpu_busy 0.3,0.5,0.7,0.9 --ssd_only_share 0.25,0.5,1.0 \\
        --arms on-hit,exist,router,exist+router \\
        -- --trace ../shared/traces/synthetic_trace.jsonl --requests 3400 \\
           --measure 400 --engines 2 --dram 2GiB --ssd 12GiB

Every argument this script does not know (or everything after `--`) goes to
each replay. Each cell writes <out>/cells/b<busy>_s<share>/ (replay.json,
replay.log, cell.json); a cell whose replay.json exists is not run again, so
an interrupted sweep resumes. `--from_dir DIR` only re-renders sweep.json and
the maps from the cells already in DIR. See docs/replay.md, "Operating-point
map".
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

# Flags the sweep sets per cell: passing them through would silently turn a
# grid into one point (or move the report away from where the sweep reads it).
OWNED_FLAGS = ("--gpu_busy", "--ssd_only_share", "--arms", "--out", "--json",
               "--time_scale")


def floats(text):
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}")
    if not vals:
        raise argparse.ArgumentTypeError("empty list")
    return vals


def names(text):
    return [v.strip() for v in text.split(",") if v.strip()]


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Other arguments (or all after --) are passed to every "
        "`kvpool replay`, e.g. --trace, --requests, --measure, --engines, "
        "--dram, --ssd, --block_size, --engine, --load_start.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    p.add_argument("--kvpool", default="build/bin/kvpool",
                   help="the kvpool binary (default %(default)s)")
    p.add_argument("--out", default="sweep-out",
                   help="sweep directory: cells/, sweep.json, map_<arm>.* "
                   "(default %(default)s)")
    p.add_argument("--gpu_busy", type=floats, default=[0.3, 0.5, 0.7, 0.9],
                   help="load axis: --gpu_busy of each column "
                   "(default 0.3,0.5,0.7,0.9)")
    p.add_argument("--ssd_only_share", type=floats, default=[0.25, 0.5, 1.0],
                   help="DRAM-pressure axis: --ssd_only_share of each row "
                   "(default 0.25,0.5,1.0)")
    p.add_argument("--arms", type=names,
                   default=["on-hit", "exist", "router", "exist+router"],
                   help="arms mapped besides off and all-dram "
                   "(default on-hit,exist,router,exist+router; may be empty)")
    p.add_argument("--off_runs", type=int, default=2,
                   help="off runs per cell, >= 2: the first before the arms, "
                   "the others after all-dram (default %(default)s)")
    p.add_argument("--from_dir", default=None,
                   help="run nothing: re-render sweep.json and the maps from "
                   "the cells in this sweep directory")
    p.add_argument("--no_progress", action="store_true",
                   help="no progress lines on stderr")
    args, rest = p.parse_known_args(argv)
    # argparse keeps "--" among the extras in some versions; a replay
    # would take it as the end of its options.
    rest = [r for r in rest if r != "--"]
    for r in rest:
        if r.split("=")[0] in OWNED_FLAGS:
            p.error(f"{r.split('=')[0]} is set by the sweep per cell")
    if args.off_runs < 2:
        p.error("--off_runs must be >= 2 (the off spread needs two runs)")
    for a in args.arms:
        if a == "off" or a == "all-dram":
            p.error(f"--arms: {a} is always run; list only the other arms")
    for s in args.ssd_only_share:
        if not 0 <= s <= 1:
            p.error("--ssd_only_share values must be in [0, 1]")
    args.replay_args = rest
    return args


def cell_name(busy, share):
    return f"b{busy:.3f}_s{share:.3f}"


def replay_arms(arms, off_runs):
    return ["off"] + arms + ["all-dram"] + ["off"] * (off_runs - 1)


def fmt_eta(sec):
    sec = int(sec)
    return f"{sec // 3600}h{sec % 3600 // 60:02d}m" if sec >= 3600 else \
        f"{sec // 60}m{sec % 60:02d}s"


def run_cells(args):
    cells_dir = os.path.join(args.out, "cells")
    os.makedirs(cells_dir, exist_ok=True)
    grid = [(b, s) for s in args.ssd_only_share for b in args.gpu_busy]
    arms = replay_arms(args.arms, args.off_runs)
    ran_sec = []
    for i, (busy, share) in enumerate(grid, 1):
        d = os.path.join(cells_dir, cell_name(busy, share))
        os.makedirs(d, exist_ok=True)
        if os.path.exists(os.path.join(d, "replay.json")):
            if not args.no_progress:
                print(f"sweep: cell {i}/{len(grid)} gpu_busy={busy} "
                      f"ssd_only_share={share}: done before, kept",
                      file=sys.stderr)
            continue
        cmd = [args.kvpool, "replay", "--gpu_busy", str(busy),
               "--ssd_only_share", str(share), "--arms", ",".join(arms),
               "--out", d] + args.replay_args
        with open(os.path.join(d, "cell.json"), "w") as f:
            json.dump({"gpu_busy": busy, "ssd_only_share": share,
                       "arms": arms, "command": cmd}, f, indent=1)
        if not args.no_progress:
            left = len(grid) - i + 1
            eta = (f", ETA {fmt_eta(left * sum(ran_sec) / len(ran_sec))}"
                   if ran_sec else "")
            print(f"sweep: cell {i}/{len(grid)} gpu_busy={busy} "
                  f"ssd_only_share={share}{eta}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        with open(os.path.join(d, "replay.log"), "w") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        ran_sec.append(time.monotonic() - t0)
        if rc != 0:
            # The cell stays without replay.json: a later run retries it.
            print(f"sweep: cell {i} failed (exit {rc}), see "
                  f"{os.path.join(d, 'replay.log')}", file=sys.stderr)
    if not args.no_progress and ran_sec:
        print(f"sweep: {len(ran_sec)} cells run in {fmt_eta(sum(ran_sec))}",
              file=sys.stderr)


def ssd_only_share_of(arm):
    c = arm.get("fill_blocks_at_measure_start") or {}
    total = sum(v for v in c.values() if isinstance(v, (int, float)))
    return c.get("ssd_only", 0) / total if total else None


def summarise_cell(rep, asked):
    """One cell of sweep.json from a replay.json."""
    arms = [a for a in rep.get("arms", [])]
    by_name = {a["name"]: a for a in arms}
    ok = {n: a for n, a in by_name.items()
          if a.get("ok") and (a.get("ttft_ms") or {}).get("p50") is not None}
    offs = [a for n, a in ok.items() if n == "off" or n.startswith("off#")]
    off = ok.get("off")
    bound = ok.get("all-dram")
    off_p50 = [a["ttft_ms"]["p50"] for a in offs]
    spread = (max(off_p50) - min(off_p50)) if len(off_p50) >= 2 else None
    cell = {
        "asked": asked,
        "gpu_busy": {"asked": asked.get("gpu_busy"),
                     "measured": off["gpu_busy"]["mean"] if off else None,
                     "measured_off_runs": [a["gpu_busy"]["mean"]
                                           for a in offs]},
        "ssd_only_share": {"asked": asked.get("ssd_only_share"),
                           "measured": ssd_only_share_of(off) if off
                           else None,
                           "measured_off_runs": [ssd_only_share_of(a)
                                                 for a in offs]},
        "off_p50_ms": off_p50,
        "off_spread_ms": spread,
        "arms": {},
    }
    for a in arms:
        name = a["name"]
        entry = {"ok": bool(a.get("ok")), "p50_ms": None,
                 "ratio_to_off": None, "ratio_to_all_dram": None,
                 "within_spread": None,
                 "contended": bool((a.get("cpu") or {}).get("contended")),
                 "gpu_busy": (a.get("gpu_busy") or {}).get("mean"),
                 "ssd_only_share": ssd_only_share_of(a)}
        if name in ok:
            p50 = a["ttft_ms"]["p50"]
            entry["p50_ms"] = p50
            if off and off["ttft_ms"]["p50"] > 0:
                entry["ratio_to_off"] = p50 / off["ttft_ms"]["p50"]
            if bound and bound["ttft_ms"]["p50"] > 0:
                entry["ratio_to_all_dram"] = p50 / bound["ttft_ms"]["p50"]
            if "verdict" in a:
                # The replay's own judgement: the off runs' noise band
                # (docs/replay.md, "verdict"), the same as its report's.
                entry["within_spread"] = \
                    a["verdict"].get("verdict") == "within noise"
            elif off and spread is not None:
                entry["within_spread"] = \
                    abs(p50 - off["ttft_ms"]["p50"]) <= spread
        else:
            entry["error"] = a.get("error") or a.get("status")
        cell["arms"][name] = entry
    # Any arm CPU-starved: the whole cell is suspect (the arms share a
    # machine whose load drifts between them).
    cell["contended"] = any(e["contended"] for e in cell["arms"].values())
    return cell


def collect(out_dir):
    cells = []
    cells_dir = os.path.join(out_dir, "cells")
    for name in sorted(os.listdir(cells_dir)) if os.path.isdir(cells_dir) \
            else []:
        d = os.path.join(cells_dir, name)
        rj = os.path.join(d, "replay.json")
        if not os.path.exists(rj):
            continue
        asked = {}
        if os.path.exists(os.path.join(d, "cell.json")):
            with open(os.path.join(d, "cell.json")) as f:
                asked = json.load(f)
        with open(rj) as f:
            rep = json.load(f)
        c = summarise_cell(rep, {"gpu_busy": asked.get("gpu_busy"),
                                 "ssd_only_share":
                                     asked.get("ssd_only_share")})
        c["dir"] = os.path.relpath(d, out_dir)
        cells.append(c)
    return cells


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def render(out_dir, cells):
    """Per arm (not off) a heatmap; returns the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter

    busies = sorted({c["gpu_busy"]["asked"] for c in cells
                     if c["gpu_busy"]["asked"] is not None})
    shares = sorted({c["ssd_only_share"]["asked"] for c in cells
                     if c["ssd_only_share"]["asked"] is not None})
    at = {(c["gpu_busy"]["asked"], c["ssd_only_share"]["asked"]): c
          for c in cells}
    arm_names = []
    for c in cells:
        for n in c["arms"]:
            if n != "off" and not n.startswith("off#") and n not in arm_names:
                arm_names.append(n)

    def axis_label(vals, key):
        labels = []
        for v in vals:
            m = [at[k][key]["measured"] for k in at
                 if (k[0] if key == "gpu_busy" else k[1]) == v]
            m = [x for x in m if x is not None]
            if not m:
                labels.append(f"? (asked {v:g})")
            elif max(m) - min(m) < 0.005:
                labels.append(f"{mean(m):.2f}\n(asked {v:g})")
            else:
                labels.append(f"{min(m):.2f}-{max(m):.2f}\n(asked {v:g})")
        return labels

    written = []
    for arm in arm_names:
        ratios = [[None] * len(busies) for _ in shares]
        for yi, s in enumerate(shares):
            for xi, b in enumerate(busies):
                c = at.get((b, s))
                e = c["arms"].get(arm) if c else None
                if e and e["ratio_to_off"]:
                    ratios[yi][xi] = e["ratio_to_off"]
        vals = [r for row in ratios for r in row if r]
        fig, ax = plt.subplots(figsize=(1.9 * len(busies) + 2.5,
                                        1.3 * len(shares) + 2))
        span = max([abs(math.log(v)) for v in vals] + [math.log(1.1)])
        norm = LogNorm(vmin=math.exp(-span), vmax=math.exp(span))
        grid = [[r if r else float("nan") for r in row] for row in ratios]
        cmap = plt.get_cmap("RdBu_r").copy()
        cmap.set_bad("#dddddd")
        im = ax.imshow(grid, origin="lower", cmap=cmap, norm=norm,
                       aspect="auto")
        for yi, s in enumerate(shares):
            for xi, b in enumerate(busies):
                c = at.get((b, s))
                e = c["arms"].get(arm) if c else None
                if not e or e["p50_ms"] is None:
                    ax.text(xi, yi, "no run" if not c else "failed",
                            ha="center", va="center", fontsize=8)
                    continue
                ro, rb = e["ratio_to_off"], e["ratio_to_all_dram"]
                lines = [("~" if e["within_spread"] else "") +
                         (f"{ro:.2f}x off" if ro else "? off"),
                         f"{rb:.2f}x dram" if rb else "? dram",
                         f"{e['p50_ms']:.3g} ms"]
                if e["contended"]:
                    lines.append("CPU!")
                # Dark cells (far from 1) get white text.
                dark = ro and abs(math.log(ro)) > 0.6 * span
                ax.text(xi, yi, "\n".join(lines), ha="center", va="center",
                        fontsize=8, color="white" if dark else "black")
                if e["within_spread"]:
                    ax.add_patch(Rectangle((xi - 0.5, yi - 0.5), 1, 1,
                                           fill=False, hatch="//",
                                           edgecolor="#555555", lw=0))
        ax.set_xticks(range(len(busies)))
        ax.set_xticklabels(axis_label(busies, "gpu_busy"), fontsize=8)
        ax.set_yticks(range(len(shares)))
        ax.set_yticklabels(axis_label(shares, "ssd_only_share"), fontsize=8)
        ax.set_xlabel("GPU busy, off arm (measured)")
        ax.set_ylabel("fill blocks SSD-only at measure start (measured)")
        ax.set_title(f"{arm}: TTFT p50 / off  (~, hatched: within the off "
                     f"spread; CPU!: contended)", fontsize=9)
        cb = fig.colorbar(im, ax=ax, label="TTFT p50 / off")
        cb.set_ticks([t for t in (0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 1, 1.25,
                                  1.5, 2, 3, 5, 10)
                      if norm.vmin <= t <= norm.vmax])
        cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        cb.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        fig.tight_layout()
        safe = arm.replace("/", "_")
        for ext in ("svg", "png"):
            path = os.path.join(out_dir, f"map_{safe}.{ext}")
            fig.savefig(path, dpi=110)
            written.append(path)
        plt.close(fig)
    return written


def main(argv):
    args = parse_args(argv)
    out = args.from_dir or args.out
    if args.from_dir is None:
        run_cells(args)
    elif not os.path.isdir(os.path.join(out, "cells")):
        print(f"sweep: no cells in {out}", file=sys.stderr)
        return 1
    cells = collect(out)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump({"cells": cells}, f, indent=1)
    files = render(out, cells) if cells else []
    print(f"sweep: {len(cells)} cells -> {os.path.join(out, 'sweep.json')}")
    for p in files:
        print(f"map: {p}")
    expected = None if args.from_dir else \
        len(args.gpu_busy) * len(args.ssd_only_share)
    return 0 if cells and (expected is None or len(cells) >= expected) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
