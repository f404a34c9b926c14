"""Self-test of netns_hosts: the fault controls really do what they claim.

Multi-host kvpool tests will trust cut/degrade/etcd from this harness; if a
"partition" silently let traffic through, those tests would pass for the
wrong reason. Every check here therefore measures from inside the
namespaces, exactly as the system under test would experience it.

Run (as root): cd tests/netns && python3 -m pytest -q test_netns_hosts.py
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if os.geteuid() != 0:
    pytest.skip("netns tests need root (network namespaces); CI runs as root",
                allow_module_level=True)
if shutil.which("ip") is None or shutil.which("tc") is None:
    pytest.skip("netns tests need `ip` and `tc` (Debian package iproute2)",
                allow_module_level=True)

import netns_hosts  # noqa: E402
from netns_hosts import EtcdCluster, Fabric  # noqa: E402

PORT = 7000

# Echo server: one thread per connection; READY tells the test it listens.
ECHO_SERVER = textwrap.dedent("""
    import socket, sys, threading
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(64)
    print("READY", flush=True)
    def serve(c):
        with c:
            while True:
                d = c.recv(1 << 16)
                if not d:
                    return
                c.sendall(d)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
""")

# Client: connect, then echo `size` random bytes `rounds` times; prints JSON.
# connect_ms is one round trip (SYN/SYN-ACK); each echo_ms another.
ECHO_CLIENT = textwrap.dedent("""
    import json, os, socket, sys, time
    ip, port, timeout, size, rounds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    t0 = time.monotonic()
    out = {"ok": False}
    try:
        s = socket.create_connection((ip, port), timeout=timeout)
        out["connect_ms"] = (time.monotonic() - t0) * 1e3
        out["echo_ms"] = []
        for _ in range(rounds):
            data = os.urandom(size)
            t1 = time.monotonic()
            s.sendall(data)
            got = b""
            while len(got) < size:
                d = s.recv(1 << 16)
                if not d:
                    break
                got += d
            out["echo_ms"].append((time.monotonic() - t1) * 1e3)
            if got != data:
                raise RuntimeError("echo mismatch")
        out["ok"] = True
    except Exception as e:
        out["error"] = repr(e)
    out["total_ms"] = (time.monotonic() - t0) * 1e3
    print(json.dumps(out))
""")


def wait_for(cond, timeout, what, interval=0.05):
    """Polls cond() until truthy; the harness never sleeps to synchronise."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def gone(pid):
    """Whether pid has exited (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def start_echo(fabric, host, tmp_path, port=PORT):
    """Starts the echo server on host's fabric address; returns once it listens."""
    log = tmp_path / f"echo-{host.name}-{port}.log"
    proc = host.spawn([sys.executable, "-u", "-c", ECHO_SERVER, host.ip, str(port)], str(log))
    wait_for(lambda: "READY" in log.read_text() or proc.poll() is not None, 10, f"echo server on {host.name}")
    assert proc.poll() is None, log.read_text()
    return proc


def echo(src, dst_ip, timeout=1.5, size=64, rounds=1, port=PORT):
    """Connects from src to dst_ip and echoes; returns the client's JSON result."""
    proc = src.python(ECHO_CLIENT, dst_ip, str(port), str(timeout), str(size), str(rounds),
                      timeout=timeout * (rounds + 2) + 30)
    return json.loads(proc.stdout)


@pytest.fixture
def fabric():
    fab = Fabric()
    try:
        yield fab
    finally:
        fab.close()
        assert fab.leftovers() == []


def test_two_hosts_echo(fabric, tmp_path):
    a, b = fabric.add_host("a"), fabric.add_host("b")
    assert (a.ip, b.ip) == ("10.213.0.1", "10.213.0.2")
    start_echo(fabric, a, tmp_path)
    # 256 KiB exercises large (GSO) segments, not just one small packet.
    res = echo(b, a.ip, size=256 * 1024)
    assert res["ok"], res
    assert fabric.host("a") is a


def test_cut_and_restore(fabric, tmp_path):
    a, b = fabric.add_host("a"), fabric.add_host("b")
    start_echo(fabric, a, tmp_path)
    assert echo(b, a.ip)["ok"]

    fabric.cut(a)
    res = echo(b, a.ip, timeout=1.5)
    assert not res["ok"], res
    assert res["total_ms"] <= 2000, res
    # A cut host still reaches itself, even on its fabric address.
    assert echo(a, a.ip)["ok"]

    fabric.restore(a)
    res = wait_for(lambda: (r := echo(b, a.ip)) and r["ok"] and r, 10, "reconnect after restore")
    assert res["ok"]


@pytest.mark.parametrize("mode,error", [("drop", "timed out"), ("reject", "Permission denied")])
def test_cut_between(fabric, tmp_path, mode, error):
    a, b, c = (fabric.add_host(n) for n in "abc")
    for h in (a, b, c):
        start_echo(fabric, h, tmp_path)
    for src, dst in ((a, b), (b, a), (a, c), (c, a), (b, c), (c, b)):
        assert echo(src, dst.ip)["ok"], (src, dst)

    fabric.cut_between(a, b, mode=mode)
    for src, dst in ((a, b), (b, a)):
        res = echo(src, dst.ip, timeout=1.0)
        assert not res["ok"], (src, dst, res)
        # drop must look like a real partition (a timeout); reject fails fast.
        assert error in res["error"], res
        assert res["total_ms"] < 1500, res
    for src, dst in ((a, c), (c, a), (b, c), (c, b)):
        assert echo(src, dst.ip)["ok"], (src, dst)

    fabric.restore_between(a, b)
    for src, dst in ((a, b), (b, a)):
        res = wait_for(lambda: (r := echo(src, dst.ip)) and r["ok"] and r, 10, "a<->b after restore")
        assert res["ok"]


@pytest.mark.parametrize("backend", ["relay", "netem"])
def test_degrade(tmp_path, backend):
    with Fabric(degrade_backend=backend) as fabric:
        if backend == "netem" and not fabric.netem_available():
            pytest.skip("kernel lacks sch_netem (CONFIG_NET_SCH_NETEM); the relay backend covers degrade")
        a, b = fabric.add_host("a"), fabric.add_host("b")
        assert fabric.degrade_backend == backend
        start_echo(fabric, a, tmp_path)
        base = echo(b, a.ip, rounds=3)
        assert base["ok"] and min(base["echo_ms"]) < 50, base

        fabric.degrade(a, delay_ms=100)
        # 100 ms each way: one round trip (connect, or one echo) >= 200 ms.
        res = echo(b, a.ip, timeout=3, rounds=3)
        assert res["ok"], res
        assert res["connect_ms"] >= 180 and min(res["echo_ms"]) >= 180, res
        assert res["connect_ms"] + max(res["echo_ms"]) < 2000, res

        fabric.degrade(a, delay_ms=20)  # replaces, does not add up
        res = echo(b, a.ip, timeout=3, rounds=3)
        assert res["ok"] and 36 <= min(res["echo_ms"]) < 150, res

        # Jitter: each direction 30..70 ms, so a round trip 60..140 ms.
        fabric.degrade(a, delay_ms=50, jitter_ms=20)
        res = echo(b, a.ip, timeout=3, rounds=5)
        assert res["ok"] and all(55 <= ms < 300 for ms in res["echo_ms"]), res

        # A cut on top of a degraded link still cuts, and restores to degraded.
        fabric.cut(a)
        res = echo(b, a.ip, timeout=1.0)
        assert not res["ok"], res
        fabric.restore(a)
        res = wait_for(lambda: (r := echo(b, a.ip, timeout=3)) and r["ok"] and r, 10, "degraded link after restore")
        assert min(res["echo_ms"]) >= 55, res

        fabric.degrade(a, loss_pct=100)
        res = echo(b, a.ip, timeout=1.0)
        assert not res["ok"] and "timed out" in res["error"], res

        fabric.clear_degrade(a)
        res = wait_for(lambda: (r := echo(b, a.ip, rounds=3)) and r["ok"] and r, 10, "link after clear")
        assert res["connect_ms"] < 50 and min(res["echo_ms"]) < 50, res
        fabric.clear_degrade(a)  # no-op when not degraded
    assert fabric.leftovers() == []


@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed")
def test_etcd_one_member(fabric, tmp_path):
    a, b = fabric.add_host("a"), fabric.add_host("b")
    etcd = EtcdCluster(fabric, [a], str(tmp_path / "etcd"))
    assert etcd.endpoints == ["10.213.0.1:2379"]
    etcd.wait_healthy(timeout=20)
    etcd.put("/kvpool/test", "hello")  # from a itself
    assert etcd.get("/kvpool/test", via=b) == "hello"  # read from another host
    assert etcd.get("/kvpool/absent", via=b) is None
    etcd.stop()
    assert etcd.alive() == []


@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed")
def test_etcd_three_members_survive_one_kill(fabric, tmp_path):
    hosts = [fabric.add_host(f"e{i}") for i in range(3)]
    client = fabric.add_host("client")
    etcd = EtcdCluster(fabric, hosts, str(tmp_path / "etcd"))
    etcd.wait_healthy(timeout=20)
    etcd.put("k1", "v1", via=client, member=2)
    assert etcd.get("k1", via=client, member=0) == "v1"

    etcd.kill(0)
    assert etcd.alive() == [1, 2]
    etcd.wait_healthy(timeout=20)  # a leader among the remaining two (quorum 2/3)

    def put_ok():
        try:
            etcd.put("k2", "v2", via=client, member=1)
            return True
        except RuntimeError:
            return False  # election still in progress

    wait_for(put_ok, 10, "put with one member down")
    assert etcd.get("k2", via=client, member=2) == "v2"
    assert etcd.get("k1", via=client, member=2) == "v1"


def test_close_leaves_nothing(tmp_path):
    fab = Fabric()
    a, b = fab.add_host("a"), fab.add_host("b")
    server = start_echo(fab, a, tmp_path)
    # Ignores SIGTERM, so close() has to escalate to SIGKILL.
    stubborn = b.spawn([sys.executable, "-c",
                        "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "print('READY', flush=True); time.sleep(600)"], str(tmp_path / "stubborn.log"))
    wait_for(lambda: "READY" in (tmp_path / "stubborn.log").read_text(), 10, "stubborn process")
    # Leaves its process group, so only the per-namespace sweep catches it.
    b.spawn(["setsid", "-f", "sleep", "600"], str(tmp_path / "escaped.log"))
    wait_for(lambda: len(subprocess.run(["ip", "netns", "pids", b.ns], capture_output=True,
                                        text=True).stdout.split()) >= 2, 10, "escaped sleep")
    fab.degrade(a, delay_ms=5)
    ns_pids = {ns: subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
               for ns in (a.ns, b.ns, fab.switch_ns)}
    all_pids = [int(p) for pids in ns_pids.values() for p in pids]
    assert len(all_pids) >= 4, ns_pids  # server, stubborn, sleep, relay (if relay backend)
    assert sorted(fab.leftovers()) == sorted([fab.switch_ns, a.ns, b.ns])

    t0 = time.monotonic()
    fab.close()
    assert time.monotonic() - t0 < 12
    fab.close()  # idempotent
    assert fab.leftovers() == []
    assert server.poll() is not None and stubborn.poll() is not None
    for pid in all_pids:
        assert gone(pid), pid
    assert not os.path.exists(fab.workdir)
    with pytest.raises(RuntimeError):
        fab.add_host("c")


# The owner of the fabric in the subprocess tests below: prints its tag and
# the pid of a process it started, then waits to be signalled or killed.
OWNER = textwrap.dedent("""
    import signal, sys, time
    # A shell's background job inherits SIGINT ignored, and the harness
    # (rightly) leaves an ignored signal alone; make the test independent of that.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, sys.argv[1])
    from netns_hosts import Fabric
    fab = Fabric()
    a = fab.add_host("a")
    p = a.spawn(["sleep", "600"], sys.argv[2])
    print(fab.tag, p.pid, flush=True)
    time.sleep(600)
""")


def _start_owner(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, os.path.dirname(netns_hosts.__file__),
                              str(tmp_path / "sleep.log")], stdout=subprocess.PIPE, text=True)
    tag, pid = owner.stdout.readline().split()
    return owner, tag, int(pid)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_closes_fabric(tmp_path, sig):
    owner, tag, pid = _start_owner(tmp_path)
    try:
        assert any(ns.startswith(tag) for ns in netns_hosts._list_netns())
        owner.send_signal(sig)
        owner.wait(timeout=15)
        assert not [ns for ns in netns_hosts._list_netns() if ns.startswith(tag)]
        wait_for(lambda: gone(pid), 5, "spawned sleep to die")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        netns_hosts.reap_orphans()


def test_sigkilled_owner_is_reaped(tmp_path):
    owner, tag, pid = _start_owner(tmp_path)
    owner.kill()  # no chance to clean up
    owner.wait()
    assert any(ns.startswith(tag) for ns in netns_hosts._list_netns())
    with Fabric() as fab:  # a new fabric reaps what dead owners left
        assert fab.tag != tag
    assert not [ns for ns in netns_hosts._list_netns() if ns.startswith(tag)]
    wait_for(lambda: gone(pid), 5, "orphaned sleep to die")


def test_errors_are_readable(fabric):
    a = fabric.add_host("a")
    with pytest.raises(ValueError):
        fabric.add_host("a")
    with pytest.raises(netns_hosts.CommandError) as info:
        netns_hosts._ip("link", "set", "nosuchdev", "up", ns=a.ns)
    msg = str(info.value)
    assert "ip -n" in msg and "nosuchdev" in msg and "stderr:" in msg, msg
    status, body = a.http_get(f"http://{a.ip}:1/", timeout=1)
    assert status == 0 and "refused" in body
