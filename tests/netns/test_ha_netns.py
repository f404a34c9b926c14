"""kvpool's standby masters across simulated hosts, under a steady load.

The loopback test (tests/ha_failover_test.cc) shows failover between
processes of one host. Here every process has its own host (a network
namespace, tests/netns/netns_hosts.py): three etcd members e1..e3, masters
m1 and m2 (--enable_ha, 1 s lease), nodes n1 and n2 (TCP data plane, DRAM
only), and a client host c1 running ha_load.py (20 puts/s of unique keys,
180 gets/s of acknowledged ones, every operation recorded, every value
derived from its key so that wrong bytes are caught). Under that load:

  a. kill -9 the leader, twice: a standby leads under a larger epoch; the
     failover times are printed; no get returns wrong bytes.
  b. cut the leader off from everyone: a new leader serves; once the old
     one's lease has surely ended (it logs the loss), it refuses everything
     (asked from inside its own host while cut, and from c1 once restored).
  c. cut node n1 off: after client_ttl its keys are clean misses while
     n2's stay readable; restored, n1 re-registers and its keys come back.
  d. 100 ms on the client's link: gets stay correct; p50 latency printed.
  e. kill -9 both masters, start both: every acknowledged key comes back.
  f. the load's final verification: every acknowledged key readable with its
     bytes (all nodes are up), none wrong.

The scenarios run in this order on one cluster (module fixture); each first
waits for a steady state, so one failure does not hide the others' results.
Logs: the pytest tmp dir printed at the start (m1.log, n1.log, load.ops.jsonl,
leader-watch-e1.jsonl, etcd/...).

Run (as root): python3 -m pytest -q -s tests/netns/test_ha_netns.py
(KVPOOL_BIN_DIR and PYTHONPATH=<build>/python as ctest sets them; default
build/bin and build/python).
"""

import os
import shutil
import statistics
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if os.geteuid() != 0:
    pytest.skip("netns tests need root (network namespaces); CI runs as root",
                allow_module_level=True)
if shutil.which("ip") is None or shutil.which("tc") is None:
    pytest.skip("netns tests need `ip` and `tc` (Debian package iproute2)",
                allow_module_level=True)
if shutil.which("etcd") is None:
    pytest.skip("the HA tests need an `etcd` binary on PATH (Debian package etcd-server)",
                allow_module_level=True)

from kvpool_hosts import HaCluster, LoadProcess, bin_dir, python_dir, wait_for  # noqa: E402
from netns_hosts import Fabric  # noqa: E402

for _b in ("kvpool-master", "kvpool-node", "kvpool"):
    if not os.access(os.path.join(bin_dir(), _b), os.X_OK):
        pytest.skip(f"{_b} not built in {bin_dir()} (set KVPOOL_BIN_DIR)", allow_module_level=True)
if not os.path.isfile(os.path.join(python_dir(), "kvpool", "__init__.py")):
    pytest.skip(f"the kvpool Python module is not built in {python_dir()} (set PYTHONPATH)",
                allow_module_level=True)

LEASE_S = 1
CLIENT_TTL_S = 3
PUT_RATE = 20.0
LEASE_EXPIRED = -707  # ErrorCode::LEASE_EXPIRED
GET_RATE = 180.0


def say(msg: str) -> None:
    print(f"[ha_netns] {msg}", flush=True)


class Env:
    def __init__(self, fabric, ha, load, watcher, workdir):
        self.fabric = fabric
        self.ha = ha
        self.load = load
        self.watcher = watcher
        self.workdir = workdir

    def wrong(self, since: float = 0.0):
        return [r for r in self.load.records() if r.get("wrong") and r["mono"] >= since]

    def steady(self, timeout: float = 60.0):
        """Every master runs, a leader is in etcd, every node is mounted at it,
        and the load has had a good put and a good get since now."""
        ha = self.ha
        ha.check_alive()
        self.load.check_running()
        for m in ha.masters:
            if not ha.running(m):
                ha.launch(m)
        t = time.monotonic()
        leader = ha.wait_leader(timeout=timeout)
        ha.wait_nodes(timeout=timeout)
        self.load.wait_good_after("put", t, timeout)
        self.load.wait_good_after("get", t, timeout)
        for m in ha.masters:  # standbys that were just started know the leader
            if m != leader[0]:
                wait_for(lambda m=m: "the leader is" in ha.standby_reason(m)[1], timeout,
                         f"{m} a standby behind the leader")
        return ha.wait_leader(timeout=timeout)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ha_netns"))
    say(f"logs in {workdir}")
    fabric = Fabric()
    try:
        ha = HaCluster(fabric, workdir, etcd_hosts=3, masters=2, nodes=2,
                       lease_ttl_s=LEASE_S, client_ttl_s=CLIENT_TTL_S)
        ha.start(timeout=90)
        watcher = ha.watch_leader()
        load = LoadProcess(ha, put_rate=PUT_RATE, get_rate=GET_RATE)
        load.wait_acked(20, timeout=60)
        e = Env(fabric, ha, load, watcher, workdir)
        yield e
        if load.summary is None and load.proc.poll() is None:
            try:
                load.stop(timeout=60)
            except RuntimeError as err:
                say(f"load did not stop cleanly: {err}")
    finally:
        fabric.close()
        say(f"fabric closed; logs kept in {workdir}")


def _ms(t: float) -> str:
    return f"{t * 1e3:.0f} ms"


def test_a_killed_leader_is_replaced_twice(env):
    ha, load = env.ha, env.load
    t_begin = time.monotonic()
    for round_ in (1, 2):
        name, address, epoch = env.steady()
        assert name is not None, f"etcd names an unknown leader {address}"
        t_kill = time.monotonic()
        assert ha.kill(name) == -9
        new_name, new_address, new_epoch = ha.wait_leader(newer_than=epoch, timeout=30)
        assert new_name is not None and new_name != name, (new_name, new_address)
        assert new_epoch > epoch
        put = load.wait_good_after("put", t_kill, 30)
        get = load.wait_good_after("get", t_kill, 30)
        seen = env.watcher.first_after(t_kill, epoch)
        elected = f"{_ms(seen['mono'] - t_kill)}" if seen else "?"
        failed = [r for r in load.between(t_kill, max(put["mono"], get["mono"])) if not r["ok"]]
        say(f"a{round_}: kill -9 {name} (epoch {epoch}) -> {new_name} leads (epoch {new_epoch}) "
            f"in etcd after {elected}; first put acknowledged after {_ms(put['mono'] - t_kill)}, "
            f"first right get after {_ms(get['mono'] - t_kill)}; {len(failed)} ops failed meanwhile")
        # Back as a standby before the next kill; the leader stays.
        ha.launch(name)
        wait_for(lambda: "standby; the leader is " + new_address in ha.standby_reason(name)[1],
                 30, f"{name} a standby behind {new_address}")
        assert ha.leader()[2] == new_epoch
    assert env.wrong(t_begin) == []


def test_b_partitioned_leader_serves_nothing_once_its_lease_is_over(env):
    ha, load, fabric = env.ha, env.load, env.fabric
    t_begin = time.monotonic()
    name, address, epoch = env.steady()
    host = ha.host(name)
    # Asked from inside its own host, which still reaches it once cut off.
    watch = ha.watch_master(name)
    wait_for(lambda: any(r["ok"] for r in watch.records()), 20, f"{name} answering its own host")
    fabric.cut(host)
    t_cut = time.monotonic()  # the link is down from here on
    try:
        new_name, new_address, new_epoch = ha.wait_leader(newer_than=epoch, timeout=30)
        t_new = time.monotonic()
        assert new_name is not None and new_name != name and new_epoch > epoch
        # The old leader finds out on its own that its lease is gone ...
        lost = f"leadership of epoch {epoch} lost"
        wait_for(lambda: ha.log_lines(name, lost), 30, f"{name} to log '{lost}'")
        # ... and, still cut off, refuses calls even from its own host (it
        # first takes its term's server down: calls meanwhile time out).
        wait_for(lambda: any("not serving" in (r["error"] or "") for r in watch.records()), 20,
                 f"{name} refusing calls from its own host")
        rc, msg = wait_for(lambda: (lambda r: r if "not serving" in r[1] else None)(
            ha.standby_reason(name, via=host)), 20, f"the CLI in {name} to be refused")
        assert rc != 0
        put = load.wait_good_after("put", t_cut, 30)
        get = load.wait_good_after("get", t_cut, 30)
        # Surely over: etcd's own lease (TTL) has run out as well by now.
        time.sleep(max(0.0, t_cut + 2 * LEASE_S + 0.5 - time.monotonic()))
        calls = watch.stop()
    finally:
        fabric.restore(host)
    t_restore = time.monotonic()
    # It stopped serving before its successor began: never two leaders.
    last_ok = max(r["wall"] for r in calls if r["ok"])
    first_fail = min(r["mono"] for r in calls if not r["ok"])
    first_refusal = min(r["mono"] for r in calls if "not serving" in (r["error"] or ""))
    # Once it refused, it never answered again.
    assert not [r for r in calls if r["ok"] and r["mono"] > first_refusal], "served again"
    new_led = ha.led_at(new_name, new_epoch)
    assert new_led is not None, f"{new_name} did not log its leadership of epoch {new_epoch}"
    win = load.between(t_cut, max(put["mono"], get["mono"]))
    gap = new_led - last_ok
    say(f"b: cut {name} (epoch {epoch}) -> {new_name} leads (epoch {new_epoch}) in etcd by "
        f"{_ms(t_new - t_cut)}; {name}'s last answer (asked from its own host) came "
        f"{_ms(gap) + ' before' if gap >= 0 else _ms(-gap) + ' after (a reply in flight)'} "
        f"{new_name} began leading; its calls failed from {_ms(first_fail - t_cut)} after the cut, "
        f"were refused as 'not serving' from {_ms(first_refusal - t_cut)}; "
        f"it logged the loss; first put after {_ms(put['mono'] - t_cut)}, first right get after "
        f"{_ms(get['mono'] - t_cut)} (meanwhile {sum(1 for r in win if r['op'] == 'put' and not r['ok'])} "
        f"puts failed, {sum(1 for r in win if r.get('miss'))} gets missed, "
        f"{sum(1 for r in win if r['op'] == 'get' and not r['ok'])} gets failed)")
    say(f"b: while cut, `kvpool --master {address} stat` in {name}'s own host: exit {rc}: {msg}")
    # A call begun after the successor led and answered all the same would
    # be two leaders at once (ends are reported; a slow reply may end later).
    late = [r for r in calls if r["ok"] and r["start_wall"] > new_led]
    assert not late, (f"{name} answered calls begun after {new_name} began leading at "
                      f"{new_led:.3f} (wall clock): {late[:3]}")
    rc, msg = ha.standby_reason(name)
    say(f"b: restored {name}; `kvpool --master {address} stat` from c1: exit {rc}: {msg}")
    assert rc != 0 and "not serving" in msg, msg
    # It follows the new leader as a standby, which keeps leading.
    wait_for(lambda: ("standby; the leader is " + new_address) in ha.standby_reason(name)[1],
             30, f"{name} a standby behind {new_address}")
    assert ha.leader()[2] == new_epoch
    load.wait_good_after("put", t_restore, 30)
    assert env.wrong(t_begin) == []


def test_c_partitioned_node_keys_are_clean_misses_then_come_back(env):
    ha, load, fabric = env.ha, env.load, env.fabric
    t_begin = time.monotonic()
    env.steady()
    acked = [r for r in load.records() if r["op"] == "put" and r["ok"] and r.get("node")]
    n1_keys = [r["key"] for r in acked if r["node"] == "n1"][-8:]
    n2_keys = [r["key"] for r in acked if r["node"] == "n2"][-8:]
    assert len(n1_keys) >= 3 and len(n2_keys) >= 3, "the load placed too few keys on a node"
    before = ha.probe(n1_keys + n2_keys)
    assert all(v["result"] == "hit" for v in before.values()), before

    t_cut = time.monotonic()
    fabric.cut(ha.host("n1"))
    try:
        def n1_missing():
            got = ha.probe(n1_keys + n2_keys)
            assert all(got[k]["result"] != "wrong" for k in got), got
            return got if all(got[k]["result"] == "miss" for k in n1_keys) else None
        got = wait_for(n1_missing, CLIENT_TTL_S + 30, "n1's keys to become misses", 0.2)
        t_miss = time.monotonic()
        assert ha.mounted_nodes() == {"n2"}
        # n2's keys were readable all along (the probe that saw n1's misses
        # read them too), and stay so.
        assert all(got[k]["result"] == "hit" for k in n2_keys), got
        t_sample = time.monotonic()
        time.sleep(2.0)  # let the load read for a while with n1 gone
        # Gets begun once n1 was declared dead (earlier ones may have been
        # waiting on n1's socket and failed: errors, never wrong bytes).
        win = [r for r in load.between(t_sample, time.monotonic()) if r["start"] >= t_sample]
        n2_set = {r["key"] for r in acked if r["node"] == "n2"}
        n1_acked = {r["key"] for r in acked if r["node"] == "n1"}
        gets = [r for r in win if r["op"] == "get"]
        n1_gets = [r for r in gets if r["key"] in n1_acked]
        n2_gets = [r for r in gets if r["key"] in n2_set]
        say(f"c: cut n1: its keys misses after {_ms(t_miss - t_cut)} (client_ttl "
            f"{CLIENT_TTL_S} s); load meanwhile: gets of n1 keys {len(n1_gets)} "
            f"({sum(1 for r in n1_gets if r.get('miss'))} misses, "
            f"{sum(1 for r in n1_gets if not r['ok'])} errors), of n2 keys {len(n2_gets)} "
            f"({sum(1 for r in n2_gets if LoadProcess.good(r))} right)")
        assert all(r.get("miss") for r in n1_gets), [r for r in n1_gets if not r.get("miss")][:3]
        assert all(LoadProcess.good(r) for r in n2_gets), \
            [r for r in n2_gets if not LoadProcess.good(r)][:3]
    finally:
        fabric.restore(ha.host("n1"))
    t_restore = time.monotonic()
    ha.wait_nodes(timeout=30)
    wait_for(lambda: all(v["result"] == "hit" for v in ha.probe(n1_keys + n2_keys).values()),
             30, "n1's keys readable again", 0.2)
    say(f"c: restored n1: its keys readable again after {_ms(time.monotonic() - t_restore)}")
    assert env.wrong(t_begin) == []


def _p50(recs):
    lat = [r["latency_ms"] for r in recs if r["op"] == "get" and LoadProcess.good(r)]
    return statistics.median(lat) if lat else float("nan"), len(lat)


def test_d_slow_client_link_keeps_gets_correct(env):
    ha, load, fabric = env.ha, env.load, env.fabric
    env.steady()
    t0 = time.monotonic()
    time.sleep(4.0)
    base, n_base = _p50(load.between(t0, time.monotonic()))
    fabric.degrade(ha.client, delay_ms=100)
    try:
        t_deg = time.monotonic()
        # Let calls in flight at the change finish, then sample.
        time.sleep(2.0)
        t_sample = time.monotonic()
        time.sleep(6.0)
        win = load.between(t_sample, time.monotonic())
    finally:
        fabric.clear_degrade(ha.client)
    slow, n_slow = _p50(win)
    gets = [r for r in win if r["op"] == "get"]
    say(f"d: get p50 {base:.1f} ms ({n_base} gets) without delay, {slow:.1f} ms ({n_slow} gets) "
        f"with 100 ms on c1's link; {sum(1 for r in gets if not r['ok'])} failed, "
        f"{sum(1 for r in gets if r.get('miss'))} missed, "
        f"{sum(1 for r in gets if r.get('wrong'))} wrong (backend {fabric.degrade_backend})")
    assert not [r for r in gets if r.get("wrong")]
    assert n_slow >= 3, "hardly any get completed over the slow link"
    # The cluster's read lease is 1 s (default_kv_lease_ttl, short so that
    # remounts are quick) and the path now has a 200 ms round trip: a get
    # whose copy ends after its lease must be refused (LEASE_EXPIRED), since
    # the master may have reused the range. That refusal is the correct
    # outcome, not a fault; anything else that is not a good get is.
    ttl_ms = ha.default_kv_lease_ttl_ms
    bad = [r for r in gets if not LoadProcess.good(r)]
    refused = [r for r in bad if not r["ok"] and r["code"] == LEASE_EXPIRED
               and r["latency_ms"] >= ttl_ms]
    assert len(bad) == len(refused), [r for r in bad if r not in refused][:3]
    assert 2 * len(refused) <= len(gets), (len(refused), len(gets), refused[:3])
    # Each get crosses the link at least twice each way (a master RPC, a
    # data read): the delay was really there.
    assert slow >= 2 * 2 * 100 * 0.9, (base, slow)
    assert env.wrong(t_deg) == []


def test_e_every_master_killed_and_restarted(env):
    ha, load = env.ha, env.load
    t_begin = time.monotonic()
    _, _, epoch = env.steady()
    t_kill = time.monotonic()
    for m in ha.masters:
        assert ha.kill(m) == -9
    t_killed = time.monotonic()
    for m in ha.masters:
        ha.launch(m)
    name, address, new_epoch = ha.wait_leader(newer_than=epoch, timeout=30)
    assert name is not None and new_epoch > epoch
    ha.wait_nodes(timeout=30)
    put = load.wait_good_after("put", t_killed, 30)
    get = load.wait_good_after("get", t_killed, 30)
    # Every value the nodes hold is served again: read every key the load
    # has had acknowledged so far, with a fresh client.
    acked = [r["key"] for r in load.records() if r["op"] == "put" and r["ok"] and r["mono"] < t_kill]
    got = ha.probe(acked)
    bad = {k: v for k, v in got.items() if v["result"] != "hit"}
    say(f"e: both masters killed and restarted -> {name} leads (epoch {new_epoch}); first put "
        f"after {_ms(put['mono'] - t_kill)}, first get after {_ms(get['mono'] - t_kill)}; "
        f"{len(acked) - len(bad)} of {len(acked)} acknowledged keys read back right")
    assert not bad, dict(list(bad.items())[:5])
    assert env.wrong(t_begin) == []


def test_f_final_verification(env):
    ha, load = env.ha, env.load
    env.steady()
    for n in ha.nodes:
        assert ha.running(n)
    s = load.stop(timeout=120)
    c = s["counts"]
    say(f"f: load: {c['put_ok']} puts acknowledged, {c['put_fail']} failed; gets "
        f"{c['get_hit']} right, {c['get_miss']} missed, {c['get_fail']} failed, "
        f"{c['get_wrong']} wrong; final verification: {s['readable']} of {s['acked']} "
        f"readable, {s['missing']} missing, {s['wrong']} wrong, {s['errors']} errors "
        f"(first pass: {s['first_pass']})")
    assert s["wrong"] == 0 and c["get_wrong"] == 0, s
    assert s["missing"] == 0 and s["errors"] == 0, s
    assert s["readable"] == s["acked"] > 0
    # Steady before the stop: nothing needed a second read.
    assert s["first_pass"]["missing"] == 0 and s["first_pass"]["errors"] == 0, s
    ha.check_alive()
