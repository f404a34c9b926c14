#!/usr/bin/python3
"""One Markdown table per `kvpool replay` report: TTFT p50/p90/p99, the mean
TTFT breakdown, KV-load share, SSD-only-at-route blocks read from DRAM, GPU
busy, CPU share, the p50 against the adjacent off runs and the gap closed,
then the off arm's spread. For results pages that compare several reports
(for example the two load-start policies).

Usage: scripts/replay_summary.py REPORT.json [REPORT.json ...]
"""
import json
import sys


def pct(v):
    return "-" if v is None else "%.0f%%" % (100 * v)


def summary(path):
    r = json.load(open(path))
    s = r["setup"]
    out = ["### %s, load start `%s` (%s)" % (s.get("engine", "?"),
                                            s.get("load_start", "?"), path),
           "",
           "| arm | TTFT p50 / p90 / p99 ms | mean = waiting + KV load + "
           "prefill ms | KV-load share | SSD-only at route read from DRAM "
           "| GPU busy | CPU share | p50 / adjacent off | gap closed p50 |",
           "|---|---|---|---|---|---|---|---|---|"]
    for a in r["arms"]:
        if not a.get("ok", False):
            out.append("| %s | failed: %s |||||||" % (a["name"],
                                                     a.get("error", "")))
            continue
        t = a["ttft_ms"]
        p = a.get("ttft_parts_ms", {})
        ro = a["ssd_only_at_route"]
        adj = a.get("vs_adjacent_off", {}).get("p50_ratio")
        out.append(
            "| %s | %.1f / %.1f / %.1f | %.1f = %.1f + %.1f + %.1f | %s | "
            "%d / %d | %s | %s%s | %s | %s |" %
            (a["name"], t["p50"], t["p90"], t["p99"], t["mean"],
             p.get("wait", {}).get("mean", 0), p.get("kv_load", {}).get(
                 "mean", 0), p.get("prefill", {}).get("mean", 0),
             pct(a.get("kv_load_share")), ro["read_from_dram"], ro["blocks"],
             pct(a.get("gpu_busy", {}).get("mean")),
             pct(a.get("cpu", {}).get("utilisation")),
             " (contended)" if a.get("cpu", {}).get("contended") else "",
             "-" if adj is None else "%.2f" % adj,
             pct(a.get("gap_closed", {}).get("p50"))))
    sp = r.get("off_spread")
    if sp and sp["runs"] > 1:
        out.append("")
        out.append("off TTFT p50 over %d runs: %s ms (min %.1f, max %.1f)." %
                   (sp["runs"], ", ".join("%.1f" % v for v in sp["p50_ms"]),
                    sp["min"], sp["max"]))
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    print("\n\n".join(summary(p) for p in sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
