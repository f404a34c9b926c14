#!/usr/bin/env python3
"""Steady kvpool load with an exact record of every operation.

Run inside the client's namespace (``c1.spawn([python3, ha_load.py, ...])``)
against an HA cluster (``--address etcd://.../ha``). Two threads share one
kvpool.Store:

  * the putter stores unique keys (``<prefix>-<n>``) at --put-rate per
    second; the value is deterministic bytes derived from the key (16-64 KiB,
    see value_of), so any process can tell right bytes from wrong ones;
  * the getter reads random already-acknowledged keys at --get-rate.

Each is paced on a fixed schedule: a call that overruns its slot makes the
next one start at once, and the slots it overran are dropped (counted in
slots_dropped), so a stall never turns into a burst. Every operation is one
JSON line in --ops:

  {"t": 12.345, "op": "put"|"get", "key": ..., "ok": bool,
   "code": 0 | negative ErrorCode, "error": null | "NAME: message",
   "latency_ms": 3.2, "miss": bool (gets), "wrong": bool (gets),
   "node": "n1" (acknowledged puts: the holder, from get_tier_info)}

t is time.monotonic() - mono0 at the end of the call (so the call began at
t - latency_ms/1000); the first line is {"op": "start", "mono0": ...}.
CLOCK_MONOTONIC is shared by every network namespace, so mono0 + t compares
with a test's own time.monotonic().

The load stops after --duration seconds or when --stop-file appears. Then
a final verification reads EVERY acknowledged key once (first pass), reads
again those that were missing or failed for up to --verify-retry-s, and
writes the summary (also printed on stdout as the last line):

  {"acked": N, "readable": N, "missing": N, "wrong": N, "errors": N,
   "first_pass": {...}, "missing_keys": [...], "wrong_keys": [...], ...}

Progress goes to stderr every --progress-s seconds.

Other modes: ``watch-master`` (ask one master for its stats in a loop, to
see from inside its host when it stops serving) and a one-shot probe:
  ha_load.py probe --address A [--keys-file F] KEY...   -> one JSON line per key:
  {"key", "result": "hit"|"miss"|"wrong"|"error", "error", "latency_ms"}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import threading
import time
from typing import Dict, List

MIN_SIZE = 16 << 10
MAX_SIZE = 64 << 10


def value_of(key: str) -> bytes:
    """The deterministic value of key: 16-64 KiB of seeded pseudo-random bytes."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    rng = random.Random(seed)
    return rng.randbytes(rng.randint(MIN_SIZE, MAX_SIZE))


def _import_kvpool():
    import kvpool  # noqa: WPS433 - imported late so --help works without it
    return kvpool


def _err(e: BaseException):
    code = getattr(e, "code", None)
    name = getattr(e, "name", None) or type(e).__name__
    return (int(code) if code is not None else -1), f"{name}: {e}"


class Load:
    def __init__(self, args):
        self.args = args
        kvpool = _import_kvpool()
        self.kvpool = kvpool
        self.store = kvpool.Store(args.address, rpc_timeout_ms=args.rpc_timeout_ms,
                                  data_connect_timeout_ms=args.data_connect_timeout_ms,
                                  data_io_timeout_ms=args.data_io_timeout_ms)
        self.mono0 = time.monotonic()
        self.out = open(args.ops, "w", buffering=1)
        self.out_lock = threading.Lock()
        self.acked: List[str] = []
        self.acked_lock = threading.Lock()
        self.stop = threading.Event()
        self.counts: Dict[str, int] = {k: 0 for k in (
            "put_ok", "put_fail", "get_hit", "get_miss", "get_fail", "get_wrong",
            "slots_dropped")}
        self.counts_lock = threading.Lock()
        self.rng = random.Random(args.seed)
        self._write({"op": "start", "mono0": self.mono0, "pid": os.getpid(),
                     "address": args.address, "put_rate": args.put_rate,
                     "get_rate": args.get_rate, "prefix": args.prefix})

    def _write(self, rec: dict) -> None:
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        with self.out_lock:
            self.out.write(line)

    def _count(self, k: str) -> None:
        with self.counts_lock:
            self.counts[k] += 1

    def _paced(self, rate: float, one) -> None:
        if rate <= 0:
            return
        period = 1.0 / rate
        nxt = time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            if nxt > now:
                if self.stop.wait(nxt - now):
                    return
            else:
                # A call overran: go on at once with the current slot and
                # drop the ones missed, so a stall never turns into a burst.
                dropped = int((now - nxt) / period)
                if dropped:
                    with self.counts_lock:
                        self.counts["slots_dropped"] += dropped
                    nxt += dropped * period
            one()
            nxt += period

    def put_one(self, n=[0]) -> None:  # noqa: B006 - a counter local to the putter
        key = f"{self.args.prefix}-{n[0]}"
        n[0] += 1
        value = value_of(key)
        t0 = time.monotonic()
        rec = {"op": "put", "key": key, "size": len(value)}
        try:
            self.store.put(key, value)
            rec.update(ok=True, code=0, error=None)
        except Exception as e:  # noqa: BLE001 - StoreError, or anything else
            code, msg = _err(e)
            rec.update(ok=False, code=code, error=msg)
        t1 = time.monotonic()
        rec["t"] = round(t1 - self.mono0, 6)
        rec["latency_ms"] = round((t1 - t0) * 1e3, 3)
        if rec["ok"]:
            # The holder, for tests that cut one node off (off the clock).
            try:
                info = self.store.get_tier_info(key)
                if info is not None and info.replicas:
                    rec["node"] = info.replicas[0].node_id
            except Exception:  # noqa: BLE001
                pass
            with self.acked_lock:
                self.acked.append(key)
            self._count("put_ok")
        else:
            self._count("put_fail")
        self._write(rec)

    def get_one(self) -> None:
        with self.acked_lock:
            if not self.acked:
                return
            key = self.acked[self.rng.randrange(len(self.acked))]
        rec = {"op": "get", "key": key}
        t0 = time.monotonic()
        try:
            got = self.store.get(key)
            t1 = time.monotonic()
            if got is None:
                rec.update(ok=True, code=0, error=None, miss=True, wrong=False)
                self._count("get_miss")
            else:
                wrong = got != value_of(key)
                rec.update(ok=True, code=0, error=None, miss=False, wrong=wrong)
                if wrong:
                    rec["got_size"] = len(got)
                self._count("get_wrong" if wrong else "get_hit")
        except Exception as e:  # noqa: BLE001
            t1 = time.monotonic()
            code, msg = _err(e)
            rec.update(ok=False, code=code, error=msg, miss=False, wrong=False)
            self._count("get_fail")
        rec["t"] = round(t1 - self.mono0, 6)
        rec["latency_ms"] = round((t1 - t0) * 1e3, 3)
        self._write(rec)

    def progress(self) -> None:
        last = dict(self.counts)
        while not self.stop.wait(self.args.progress_s):
            with self.counts_lock:
                c = dict(self.counts)
            d = {k: c[k] - last[k] for k in c}
            last = c
            print(f"[ha_load t={time.monotonic() - self.mono0:6.1f}s] acked {c['put_ok']} | "
                  f"last {self.args.progress_s:.0f}s: puts {d['put_ok']} ok {d['put_fail']} failed, "
                  f"gets {d['get_hit']} hit {d['get_miss']} miss {d['get_fail']} failed "
                  f"{d['get_wrong']} WRONG", file=sys.stderr, flush=True)

    def run(self) -> dict:
        threads = [threading.Thread(target=self._paced, args=(self.args.put_rate, self.put_one),
                                    name="putter", daemon=True),
                   threading.Thread(target=self._paced, args=(self.args.get_rate, self.get_one),
                                    name="getter", daemon=True),
                   threading.Thread(target=self.progress, name="progress", daemon=True)]
        for t in threads:
            t.start()
        end = self.mono0 + self.args.duration if self.args.duration > 0 else float("inf")
        while time.monotonic() < end:
            if self.args.stop_file and os.path.exists(self.args.stop_file):
                break
            time.sleep(0.05)
        self.stop.set()
        for t in threads:
            t.join()
        t_stop = time.monotonic() - self.mono0
        print(f"[ha_load] stopped at t={t_stop:.1f}s; verifying {len(self.acked)} acknowledged keys",
              file=sys.stderr, flush=True)
        summary = self.verify()
        summary.update(counts=self.counts, t_stop=round(t_stop, 3),
                       t_end=round(time.monotonic() - self.mono0, 3), mono0=self.mono0)
        self._write({"op": "summary", **summary})
        self.out.close()
        if self.args.summary:
            with open(self.args.summary + ".tmp", "w") as f:
                json.dump(summary, f)
            os.replace(self.args.summary + ".tmp", self.args.summary)
        print(json.dumps(summary), flush=True)
        return summary

    def _check(self, key: str) -> str:
        try:
            got = self.store.get(key)
        except Exception as e:  # noqa: BLE001
            self._last_error = _err(e)[1]
            return "error"
        if got is None:
            return "miss"
        return "hit" if got == value_of(key) else "wrong"

    def verify(self) -> dict:
        self._last_error = None
        result = {k: self._check(k) for k in self.acked}
        first = {r: sum(1 for v in result.values() if v == r)
                 for r in ("hit", "miss", "wrong", "error")}
        deadline = time.monotonic() + self.args.verify_retry_s
        while time.monotonic() < deadline:
            todo = [k for k, v in result.items() if v in ("miss", "error")]
            if not todo:
                break
            time.sleep(0.2)
            for k in todo:
                r = self._check(k)
                # Wrong bytes on a retry count as wrong; a hit ends the key.
                if r in ("hit", "wrong"):
                    result[k] = r
        final = {r: [k for k, v in result.items() if v == r] for r in ("hit", "miss", "wrong", "error")}
        return {
            "acked": len(self.acked), "readable": len(final["hit"]),
            "missing": len(final["miss"]), "wrong": len(final["wrong"]),
            "errors": len(final["error"]),
            "first_pass": {"readable": first["hit"], "missing": first["miss"],
                           "wrong": first["wrong"], "errors": first["error"]},
            "missing_keys": final["miss"][:50], "wrong_keys": final["wrong"][:50],
            "error_keys": final["error"][:50], "last_error": self._last_error,
        }


def probe_main(args) -> int:
    kvpool = _import_kvpool()
    store = kvpool.Store(args.address, rpc_timeout_ms=args.rpc_timeout_ms,
                         data_connect_timeout_ms=args.data_connect_timeout_ms,
                         data_io_timeout_ms=args.data_io_timeout_ms)
    keys = list(args.keys)
    if args.keys_file:
        with open(args.keys_file) as f:
            keys += [k.strip() for k in f if k.strip()]
    for key in keys:
        t0 = time.monotonic()
        rec = {"key": key, "error": None}
        try:
            got = store.get(key)
            rec["result"] = "miss" if got is None else ("hit" if got == value_of(key) else "wrong")
        except Exception as e:  # noqa: BLE001
            rec["result"] = "error"
            rec["error"] = _err(e)[1]
        rec["latency_ms"] = round((time.monotonic() - t0) * 1e3, 3)
        print(json.dumps(rec), flush=True)
    store.close()
    return 0


def watch_master_main(args) -> int:
    """Asks one master (a fixed address, no etcd) for its stats every
    --interval-ms until --stop-file appears; one JSON line per call:
    {"mono", "wall" (time.time() at the call's end), "start_wall", "ok",
    "latency_ms", "error"}. Shows from inside a host when a master stops answering."""
    kvpool = _import_kvpool()
    store = kvpool.Store(args.address, rpc_timeout_ms=args.rpc_timeout_ms)
    with open(args.out, "w", buffering=1) as out:
        while not os.path.exists(args.stop_file):
            t0 = time.monotonic()
            rec = {"ok": True, "error": None, "start_wall": time.time()}
            try:
                store.stat()
            except Exception as e:  # noqa: BLE001
                rec.update(ok=False, error=_err(e)[1][:200])
            t1 = time.monotonic()
            rec.update(mono=t1, wall=time.time(), latency_ms=round((t1 - t0) * 1e3, 3))
            out.write(json.dumps(rec) + "\n")
            time.sleep(max(0.0, args.interval_ms / 1e3 - (time.monotonic() - t0)))
    store.close()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode")
    pr = sub.add_parser("probe", help="get KEYs once and print what came back")
    pr.add_argument("--address", required=True)
    pr.add_argument("--rpc-timeout-ms", type=int, default=2000)
    for q in (p, pr):
        # A node cut off mid-read would stall a thread for the defaults
        # (5 s to connect, 30 s without progress); a test wants to see the
        # cut within a few seconds.
        q.add_argument("--data-connect-timeout-ms", type=int, default=2000)
        q.add_argument("--data-io-timeout-ms", type=int, default=5000)
    wm = sub.add_parser("watch-master", help="ask one master for stats in a loop")
    wm.add_argument("--address", required=True, help="ip:port of one master")
    wm.add_argument("--out", required=True)
    wm.add_argument("--stop-file", required=True)
    wm.add_argument("--interval-ms", type=float, default=20.0)
    wm.add_argument("--rpc-timeout-ms", type=int, default=300)
    pr.add_argument("--keys-file", help="more keys, one a line")
    pr.add_argument("keys", nargs="*")
    p.add_argument("--address", help="kvpool master address (etcd://.../cluster)")
    p.add_argument("--ops", help="JSON lines, one per operation")
    p.add_argument("--summary", help="final verification summary (JSON)")
    p.add_argument("--put-rate", type=float, default=20.0, help="puts per second")
    p.add_argument("--get-rate", type=float, default=180.0, help="gets per second")
    p.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until --stop-file")
    p.add_argument("--stop-file", help="stop when this file exists")
    p.add_argument("--prefix", default=f"ha{os.getpid()}", help="key prefix (unique per run)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rpc-timeout-ms", type=int, default=2000)
    p.add_argument("--progress-s", type=float, default=5.0)
    p.add_argument("--verify-retry-s", type=float, default=10.0,
                   help="re-read keys missing or failing in the first pass for this long")
    args = p.parse_args(argv)
    if args.mode == "probe":
        return probe_main(args)
    if args.mode == "watch-master":
        return watch_master_main(args)
    if not args.address or not args.ops:
        p.error("--address and --ops are required")
    if args.duration <= 0 and not args.stop_file:
        p.error("give --duration or --stop-file")
    summary = Load(args).run()
    return 0 if summary["wrong"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
