#!/usr/bin/env python3
"""Failover times of kvpool's standby masters, measured across simulated hosts.

Builds the cluster of test_ha_netns.py on a netns Fabric (etcd e1..e3,
masters m1 m2 with --enable_ha, nodes n1 n2, client c1 running ha_load.py),
then kills the leader with SIGKILL --kills times. After each kill the killed
master is started again as a standby, and the next kill waits for a steady
state (the standby behind the new leader, both nodes mounted, a good put and
get since, then --settle-s of plain load). Per kill it measures, from the
moment of the kill (CLOCK_MONOTONIC, one clock for every namespace):

  elected  the successor's key seen in etcd (a watcher in e1 polls every 20 ms)
  get      the first get begun after the kill that returned the right bytes
  put      the first put begun after the kill that was acknowledged
  failed   operations that failed (errors, not misses) between the kill and
           the later of those two; missed: gets that returned a miss meanwhile

and writes docs/results/ha/failover.md (table, settings, etcd version),
failover.svg (per-kill times) and failover.json (every number). Needs root.

    sudo PYTHONPATH=build/python python3 tests/netns/ha_bench.py --kills 20
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kvpool_hosts import HaCluster, LoadProcess, bin_dir, wait_for  # noqa: E402
from netns_hosts import Fabric  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg: str) -> None:
    print(f"[ha_bench {datetime.datetime.now():%H:%M:%S}] {msg}", flush=True)


def steady(ha: HaCluster, load: LoadProcess, timeout: float = 60.0):
    """Both masters run (the non-leader a standby behind the leader), both
    nodes are mounted at the leader, and a good put and get happened since."""
    ha.check_alive()
    load.check_running()
    t = time.monotonic()
    name, address, epoch = ha.wait_leader(timeout=timeout)
    for m in ha.masters:
        if m != name:
            wait_for(lambda m=m: ("standby; the leader is " + address) in ha.standby_reason(m)[1],
                     timeout, f"{m} a standby behind {address}")
    ha.wait_nodes(timeout=timeout)
    load.wait_good_after("put", t, timeout)
    load.wait_good_after("get", t, timeout)
    return ha.wait_leader(timeout=timeout)


def one_kill(i: int, ha: HaCluster, load: LoadProcess, watcher, args) -> dict:
    name, address, epoch = steady(ha, load)
    time.sleep(args.settle_s)  # plain load before the kill
    t_kill = time.monotonic()
    wall_kill = time.time()
    status = ha.kill(name)
    assert status == -9, f"kill -9 {name}: exit status {status}"
    new_name, new_address, new_epoch = ha.wait_leader(newer_than=epoch, timeout=60)
    put = load.wait_good_after("put", t_kill, 60)
    get = load.wait_good_after("get", t_kill, 60)
    seen = wait_for(lambda: watcher.first_after(t_kill, epoch), 10, "the watcher to see the change")
    led = ha.led_at(new_name, new_epoch) if new_name else None
    end = max(put["mono"], get["mono"])
    window = load.between(t_kill, end)
    row = {
        "kill": i, "killed": name, "epoch": epoch, "new_leader": new_name, "new_epoch": new_epoch,
        "elected_ms": round((seen["mono"] - t_kill) * 1e3, 1),
        "led_ms_from_log": round((led - wall_kill) * 1e3, 1) if led else None,
        "get_ms": round((get["mono"] - t_kill) * 1e3, 1),
        "put_ms": round((put["mono"] - t_kill) * 1e3, 1),
        "failed": sum(1 for r in window if not r["ok"]),
        "failed_puts": sum(1 for r in window if r["op"] == "put" and not r["ok"]),
        "failed_gets": sum(1 for r in window if r["op"] == "get" and not r["ok"]),
        "missed": sum(1 for r in window if r.get("miss")),
        "wrong": sum(1 for r in window if r.get("wrong")),
        "errors": sorted({(r.get("error") or "").split(":")[0] for r in window if not r["ok"]}),
    }
    # Back as a standby; steady() of the next round waits for it.
    ha.launch(name)
    return row


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(rows):
    out = {}
    for k in ("elected_ms", "get_ms", "put_ms", "failed", "missed"):
        vals = [r[k] for r in rows]
        out[k] = {"p50": round(statistics.median(vals), 1), "p90": round(pct(vals, 0.9), 1),
                  "max": max(vals), "min": min(vals)}
    return out


def table(rows, summ) -> str:
    lines = ["| kill | killed → new (epoch) | elected in etcd (ms) | first right get (ms) "
             "| first acknowledged put (ms) | ops failed | gets missed |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kill']} | {r['killed']} → {r['new_leader']} ({r['new_epoch']}) "
                     f"| {r['elected_ms']:.0f} | {r['get_ms']:.0f} | {r['put_ms']:.0f} "
                     f"| {r['failed']} | {r['missed']} |")
    for stat in ("p50", "max"):
        lines.append(f"| **{stat}** | | **{summ['elected_ms'][stat]:.0f}** | "
                     f"**{summ['get_ms'][stat]:.0f}** | **{summ['put_ms'][stat]:.0f}** | "
                     f"**{summ['failed'][stat]:g}** | **{summ['missed'][stat]:g}** |")
    return "\n".join(lines)


def plot(rows, path: str, lease_s: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # text as text: a small, diffable file
    x = [r["kill"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for key, label, marker in (("elected_ms", "successor in etcd", "o"),
                               ("get_ms", "first right get", "s"),
                               ("put_ms", "first acknowledged put", "^")):
        ax.plot(x, [r[key] for r in rows], marker=marker, linewidth=1, label=label)
    ax.axhline(lease_s * 1000, color="grey", linestyle=":", linewidth=1,
               label=f"leader lease ({lease_s} s)")
    ax.set_xlabel("kill -9 of the leader (#)")
    ax.set_ylabel("time after the kill (ms)")
    ax.set_xticks(x)
    ax.set_ylim(bottom=0)
    ax.set_title("kvpool HA failover under load (3 etcd, 2 masters, 2 nodes, netns hosts)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def etcd_version() -> str:
    try:
        out = subprocess.run(["etcd", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return " ".join(l.strip() for l in out.splitlines() if l.startswith(("etcd Version", "Go Version")))


def observed(rows, s) -> str:
    """What the numbers show, computed from them (no claims beyond them)."""
    lines = ["Observed:", ""]
    fast = [r for r in rows if r["get_ms"] < 1500]
    get_gap = [r["get_ms"] - r["elected_ms"] for r in rows]
    text = (f"- Gets came back {min(r['get_ms'] for r in rows):.0f}-{max(r['get_ms'] for r in rows):.0f} ms "
            f"after the kill, {min(get_gap):.0f}-{max(get_gap):.0f} ms after the successor was in etcd")
    if fast and len(fast) < len(rows):
        slow = [r for r in rows if r["get_ms"] >= 1500]
        text += (f"; under 1.5 s in {len(fast)} kills, {min(r['get_ms'] for r in slow):.0f}-"
                 f"{max(r['get_ms'] for r in slow):.0f} ms in the {len(slow)} others")
    text += "."
    # Every get back within 100 ms of a whole second: the client's 1 s retry.
    if all(abs(r["get_ms"] - round(r["get_ms"] / 1000) * 1000) < 100 for r in rows):
        text += (" They come back at whole seconds after the kill: a call to the dead leader waits "
                 "up to 1 s for a new connection to it and then fails unless etcd named the "
                 "successor before that wait began; the load's next get is the one that reaches "
                 "the successor.")
    lines.append(text)
    gaps = [r["put_ms"] - r["elected_ms"] for r in rows]
    lines.append(
        f"- The first acknowledged put came {min(gaps):.0f}-{max(gaps):.0f} ms after the successor was "
        f"in etcd: a segment mounted again takes no new puts for `default_kv_lease_ttl` "
        f"({s['default_kv_lease_ttl_ms']} ms); puts meanwhile fail with NO_AVAILABLE_HANDLE.")
    missed = [r["missed"] for r in rows]
    if max(missed) > 0:
        lines.append(
            f"- {sum(missed)} gets over the {len(rows)} kills were clean misses (0-{max(missed)} per "
            f"kill): gets that reached the successor before the node holding their key had "
            f"re-registered it. No get returned wrong bytes.")
    return "\n".join(lines)


def write_md(path, rows, summ, settings, load_summary, etcd_ver, git_rev, elapsed_s):
    s = settings
    md = f"""# kvpool HA: failover after kill -9 of the leader

`tests/netns/ha_bench.py --kills {s['kills']}` on {s['date']} (git {git_rev}, binaries built
{s['kvpool_master_built']}, {s['machine']}):
{s['kills']} times, the leading kvpool-master was killed with SIGKILL under a steady
load and the killed master started again as a standby before the next kill
(each kill after a steady state plus {s['settle_s']:g} s of plain load). Times are from
the kill, on CLOCK_MONOTONIC (one clock for every network namespace).

{table(rows, summ)}

- **elected in etcd**: the successor's key first seen by a watcher polling etcd
  every 20 ms from e1 (so up to ~20 ms late).
- **first right get / acknowledged put**: the first get (put) *begun* after
  the kill that returned the key's right bytes (was acknowledged), measured at
  its end by the load in c1.
- **ops failed**: puts and gets that raised between the kill and the later of
  those two; **gets missed**: gets that returned no value meanwhile (a clean
  miss; no get ever returned wrong bytes: {sum(r['wrong'] for r in rows)} wrong in the windows,
  {load_summary['counts']['get_wrong']} in the whole run).

{observed(rows, s)}

Final verification of the load (every acknowledged key read once more at the
end): {load_summary['readable']} of {load_summary['acked']} readable with their bytes,
{load_summary['missing']} missing, {load_summary['wrong']} wrong, {load_summary['errors']} errors.

![per-kill failover times](failover.svg)

## Settings

| | |
|---|---|
| hosts | network namespaces on one bridge (tests/netns/netns_hosts.py): e1..e3 etcd, m1 m2 masters, n1 n2 nodes, c1 client |
| etcd | {etcd_ver}; 3 members, `--heartbeat-interval {s['etcd_heartbeat_ms']} --election-timeout {s['etcd_election_ms']}` |
| kvpool-master | `--enable_ha --ha_lease_ttl_sec={s['lease_ttl_s']} --client_ttl={s['client_ttl_s']} --default_kv_lease_ttl={s['default_kv_lease_ttl_ms']} --put_waits_for_holders` |
| kvpool-node | `--global_segment_size={s['segment_size']} --heartbeat_interval_ms={s['heartbeat_interval_ms']}`, TCP data plane |
| load (ha_load.py in c1) | {s['put_rate']:g} puts/s of unique keys + {s['get_rate']:g} gets/s of acknowledged keys, values 16-64 KiB, one kvpool.Store, `rpc_timeout_ms={s['rpc_timeout_ms']}` |
| machine | {s['machine']}; run took {elapsed_s:.0f} s |

Raw numbers: [failover.json](failover.json).
"""
    with open(path, "w") as f:
        f.write(md)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--out-dir", default=os.path.join(_REPO, "docs", "results", "ha"))
    p.add_argument("--workdir", default=None, help="logs (default: a new /tmp/kvpool-ha-bench-*)")
    p.add_argument("--put-rate", type=float, default=20.0)
    p.add_argument("--get-rate", type=float, default=180.0)
    p.add_argument("--lease-ttl-s", type=int, default=1)
    p.add_argument("--client-ttl-s", type=int, default=3)
    p.add_argument("--settle-s", type=float, default=2.0)
    p.add_argument("--segment-size", default="512MiB")
    p.add_argument("--from-json", help="only write the .md and .svg again from this failover.json")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            d = json.load(f)
        os.makedirs(args.out_dir, exist_ok=True)
        plot(d["kills"], os.path.join(args.out_dir, "failover.svg"), d["settings"]["lease_ttl_s"])
        write_md(os.path.join(args.out_dir, "failover.md"), d["kills"], d["summary"], d["settings"],
                 d["load"], d["etcd"], d["git"], d["elapsed_s"])
        log(f"wrote {args.out_dir}/failover.md and failover.svg from {args.from_json}")
        return 0
    if os.geteuid() != 0:
        print("ha_bench.py needs root (network namespaces)", file=sys.stderr)
        return 2
    workdir = args.workdir or f"/tmp/kvpool-ha-bench-{os.getpid()}"
    os.makedirs(workdir, exist_ok=True)
    os.makedirs(args.out_dir, exist_ok=True)
    t_start = time.monotonic()
    rows = []
    with Fabric() as fab:
        ha = HaCluster(fab, workdir, lease_ttl_s=args.lease_ttl_s, client_ttl_s=args.client_ttl_s,
                       segment_size=args.segment_size)
        log(f"starting etcd, 2 masters, 2 nodes (logs in {workdir})")
        ha.start(timeout=90)
        watcher = ha.watch_leader()
        load = LoadProcess(ha, put_rate=args.put_rate, get_rate=args.get_rate)
        load.wait_acked(20, timeout=60)
        log(f"load running ({args.put_rate:g} puts/s, {args.get_rate:g} gets/s); {args.kills} kills")
        for i in range(1, args.kills + 1):
            row = one_kill(i, ha, load, watcher, args)
            rows.append(row)
            log(f"kill {i:2}/{args.kills}: {row['killed']} -> {row['new_leader']} (epoch "
                f"{row['new_epoch']}): elected {row['elected_ms']:.0f} ms, get {row['get_ms']:.0f} ms, "
                f"put {row['put_ms']:.0f} ms, {row['failed']} ops failed, {row['missed']} missed"
                + (f", {row['wrong']} WRONG" if row["wrong"] else ""))
        steady(ha, load)
        log("stopping the load; final verification of every acknowledged key")
        load_summary = load.stop(timeout=300)
        log(f"final verification: {load_summary['readable']} of {load_summary['acked']} readable, "
            f"{load_summary['missing']} missing, {load_summary['wrong']} wrong")
        ha.check_alive()
    elapsed = time.monotonic() - t_start
    summ = summarize(rows)
    print()
    print(table(rows, summ))
    print()
    try:
        git_rev = subprocess.run(["git", "-C", _REPO, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        git_rev = "?"
    settings = {
        "kills": args.kills, "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "settle_s": args.settle_s, "lease_ttl_s": args.lease_ttl_s,
        "client_ttl_s": args.client_ttl_s, "default_kv_lease_ttl_ms": ha.default_kv_lease_ttl_ms,
        "segment_size": args.segment_size, "heartbeat_interval_ms": ha.heartbeat_interval_ms,
        "put_rate": args.put_rate, "get_rate": args.get_rate, "rpc_timeout_ms": ha.rpc_timeout_ms,
        "etcd_heartbeat_ms": 50, "etcd_election_ms": 500, "kvpool_bin_dir": bin_dir(),
        "kvpool_master_built": datetime.datetime.fromtimestamp(
            os.path.getmtime(os.path.join(bin_dir(), "kvpool-master"))).isoformat(timespec="seconds"),
    }
    ver = etcd_version()
    with open(os.path.join(args.out_dir, "failover.json"), "w") as f:
        json.dump({"settings": settings, "etcd": ver, "git": git_rev, "summary": summ,
                   "kills": rows, "load": load_summary, "elapsed_s": round(elapsed, 1)}, f, indent=1)
    plot(rows, os.path.join(args.out_dir, "failover.svg"), args.lease_ttl_s)
    write_md(os.path.join(args.out_dir, "failover.md"), rows, summ, settings, load_summary, ver,
             git_rev, elapsed)
    log(f"wrote {args.out_dir}/failover.md, failover.svg, failover.json ({elapsed:.0f} s)")
    bad = load_summary["wrong"] or load_summary["missing"] or any(r["wrong"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
