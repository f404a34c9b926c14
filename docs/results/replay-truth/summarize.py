#!/usr/bin/python3
"""Tables of docs/results/replay-truth/README.md from the replay.json of each
run directory given (default: every subdirectory here with one).

    docs/results/replay-truth/summarize.py [DIR ...]
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def wall_of(d):
    log = d.rstrip("/") + ".log"
    if os.path.exists(log):
        m = re.search(r"wall_sec=(\d+)", open(log).read())
        if m:
            return int(m.group(1))
    return None


def main(dirs):
    if not dirs:
        dirs = sorted(os.path.join(HERE, d) for d in os.listdir(HERE)
                      if os.path.exists(os.path.join(HERE, d, "replay.json")))
    print("| trace | load bound | GPU busy target / simulated per engine | "
          "measured GPU busy (arms) | off p50 x3 (ms) | max/min | all-dram p50 "
          "| lagged steps, worst arm | machine CPU, worst arm | contended arms "
          "| wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for d in dirs:
        r = json.load(open(os.path.join(d, "replay.json")))
        em, arms = r["engine_model"], r["arms"]
        name = os.path.basename(d.rstrip("/"))
        ok = [a for a in arms if a.get("ok")]
        offs = [a["ttft_ms"]["p50"] for a in ok if a["name"].split("#")[0] == "off"]
        alld = [a["ttft_ms"]["p50"] for a in ok if a["name"] == "all-dram"]
        busy = [a["gpu_busy"]["mean"] for a in ok]
        lag = max((a["engine_steps"].get("lagged_share", 0), a["name"]) for a in ok)
        mach = max((a["cpu"].get("machine_utilisation", 0), a["name"]) for a in ok)
        cont = [a["name"] for a in ok if a["cpu"].get("contended")]
        failed = [a["name"] + ": " + a.get("status", "") for a in arms if not a.get("ok")]
        per = "/".join(f"{v:.2f}" for v in em.get("estimated_gpu_busy_off_per_engine", []))
        w = wall_of(d)
        print(f"| {name} | {em.get('load_bound')} | {em['gpu_busy_target']:.2f} / {per} "
              f"| {min(busy):.2f}-{max(busy):.2f} | {', '.join(f'{v:.1f}' for v in offs)} "
              f"| {max(offs)/min(offs):.2f} | {alld[0] if alld else 'failed'} "
              f"| {100*lag[0]:.2f}% ({lag[1]}) | {100*mach[0]:.0f}% ({mach[1]}) "
              f"| {', '.join(cont) or 'none'} | {w if w else '-'} s |")
        rows.append((name, r, failed))
    for name, r, failed in rows:
        print(f"\n**{name}** (time scale {r['setup']['time_scale']:.3f}, scale "
              f"{r['engine_model']['scale']:.4f} from {r['engine_model'].get('scale_source')})\n")
        print("| arm | TTFT p50 | p90 | mean | KV-load part mean | gap closed (mean) | GPU busy "
              "| lagged | machine CPU | verdict |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for a in r["arms"]:
            if not a.get("ok"):
                print(f"| {a['name']} | failed: {a.get('status','')} |||||||||")
                continue
            t = a["ttft_ms"]
            g = a.get("gap_closed", {}).get("mean")
            v = a.get("verdict", {}).get("verdict", "(off)")
            print(f"| {a['name']} | {t['p50']:.1f} | {t['p90']:.1f} | {t['mean']:.1f} "
                  f"| {a['ttft_parts_ms']['kv_load']['mean']:.1f} "
                  f"| {'-' if g is None else f'{100*g:.0f}%'} | {a['gpu_busy']['mean']:.2f} "
                  f"| {a['engine_steps']['lagged_steps']}/{a['engine_steps']['steps']} "
                  f"| {100*a['cpu'].get('machine_utilisation',0):.0f}% | {v} |")


if __name__ == "__main__":
    main(sys.argv[1:])
