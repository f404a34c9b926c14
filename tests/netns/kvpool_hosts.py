"""A kvpool cluster with standby masters (HA) on a netns Fabric.

Builds, on a ``netns_hosts.Fabric``, the hosts of a small HA deployment and
runs kvpool's processes in them, each in its own host's namespace:

    e1..eN  one etcd member each            10.213.0.1 ..
    m1..mM  one kvpool-master --enable_ha each
    n1..nK  one kvpool-node each (DRAM segment, TCP data plane)
    c1      the client host (load generators, CLI probes)

Addresses follow creation order on the fabric (e1 gets .1), so with the
default subnet and three etcd hosts the endpoints are
``10.213.0.1:2379;10.213.0.2:2379;10.213.0.3:2379``.

Every process is started through ``Host.spawn`` (the fabric tracks it) and
stopped by its PID (``Fabric.kill``), never by name. Logs go under the
cluster's workdir: ``m1.log``, ``m1.r1.log`` (first restart), ...

Example::

    with Fabric() as fab:
        ha = HaCluster(fab, "/tmp/ha")
        ha.start()                       # etcd, masters, nodes; waits
        name, address, epoch = ha.wait_leader()
        ha.kill(name)                    # kill -9 the leader
        ha.wait_leader(newer_than=epoch)
        ha.restart(name)                 # back as a standby
        ha.close()

Helpers around it: LoadProcess (ha_load.py in c1, with its per-operation
record), LeaderWatcher (leader changes in etcd, timestamped), MasterWatch
(one master asked in a loop from inside a host), HaCluster.probe (get keys
once with a fresh client and check their bytes).

The module also runs as a program inside a namespace:
``kvpool_hosts.py --watch-leader ENDPOINTS KEY INTERVAL_MS`` prints one JSON
line per leader change seen in etcd (see LeaderWatcher).
"""

from __future__ import annotations

import base64
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from netns_hosts import EtcdCluster, Fabric, Host  # noqa: E402

__all__ = ["HaCluster", "LeaderWatcher", "LoadProcess", "MasterWatch", "bin_dir", "python_dir", "wait_for"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def bin_dir() -> str:
    """kvpool's binaries: $KVPOOL_BIN_DIR, else <repo>/build/bin."""
    return os.environ.get("KVPOOL_BIN_DIR") or os.path.join(_REPO, "build", "bin")


def python_dir() -> str:
    """The directory holding the kvpool Python package.

    $KVPOOL_PYTHON_DIR, else the first PYTHONPATH entry that has kvpool/,
    else <repo>/build/python.
    """
    if os.environ.get("KVPOOL_PYTHON_DIR"):
        return os.environ["KVPOOL_PYTHON_DIR"]
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and os.path.isdir(os.path.join(p, "kvpool")):
            return p
    return os.path.join(_REPO, "build", "python")


def wait_for(cond, timeout: float, what: str, interval: float = 0.05):
    """Polls cond() until it returns something truthy, which is returned.

    Raises:
        TimeoutError: not truthy within timeout seconds (names `what`).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class _Proc:
    """One kvpool process slot (a master or a node) and its current process."""

    def __init__(self, name: str, kind: str, host: Host):
        self.name = name
        self.kind = kind          # "master" or "node"
        self.host = host
        self.popen: Optional[subprocess.Popen] = None
        self.starts = 0           # how many times it was started
        self.log_path = ""
        self.pids: List[int] = []  # every pid it ever had (for /dev/shm cleanup)

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class HaCluster:
    """etcd + HA masters + nodes + a client host on a Fabric.

    Attributes:
        fabric: the Fabric the hosts live on.
        workdir: where logs, port files and etcd data go.
        etcd: the EtcdCluster (None before start()).
        etcd_endpoints: "ip:2379;ip:2379;..." as kvpool's flags take it.
        address: the clients' master address, "etcd://<endpoints>/<cluster_id>".
        client: the client host c1.
        masters / nodes: names, in order ("m1", ... / "n1", ...).
    """

    def __init__(self, fabric: Fabric, workdir: str, etcd_hosts: int = 3, masters: int = 2,
                 nodes: int = 2, lease_ttl_s: int = 1, client_ttl_s: int = 3,
                 cluster_id: str = "ha", rpc_port: int = 50051,
                 segment_size: str = "128MiB", heartbeat_interval_ms: int = 100,
                 default_kv_lease_ttl_ms: int = 1000, rpc_timeout_ms: int = 2000,
                 master_args: Sequence[str] = (), node_args: Sequence[str] = (),
                 kvpool_bin_dir: Optional[str] = None):
        """Creates the hosts (no process is started; see start()).

        The fabric must have no hosts yet, so that e1.. get .1.. of the subnet.
        """
        if fabric.hosts:
            raise ValueError("HaCluster needs a fabric without hosts")
        self.fabric = fabric
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.bin_dir = kvpool_bin_dir or bin_dir()
        for b in ("kvpool-master", "kvpool-node", "kvpool"):
            if not os.access(os.path.join(self.bin_dir, b), os.X_OK):
                raise FileNotFoundError(f"{b} not found in {self.bin_dir} (set KVPOOL_BIN_DIR)")
        self.cluster_id = cluster_id
        self.lease_ttl_s = lease_ttl_s
        self.client_ttl_s = client_ttl_s
        self.rpc_port = rpc_port
        self.segment_size = segment_size
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.default_kv_lease_ttl_ms = default_kv_lease_ttl_ms
        self.rpc_timeout_ms = rpc_timeout_ms
        self.master_args = list(master_args)
        self.node_args = list(node_args)

        self.etcd_hosts = [fabric.add_host(f"e{i + 1}") for i in range(etcd_hosts)]
        self._procs: Dict[str, _Proc] = {}
        for i in range(masters):
            name = f"m{i + 1}"
            self._procs[name] = _Proc(name, "master", fabric.add_host(name))
        for i in range(nodes):
            name = f"n{i + 1}"
            self._procs[name] = _Proc(name, "node", fabric.add_host(name))
        self.client = fabric.add_host("c1")
        self.masters = [n for n, p in self._procs.items() if p.kind == "master"]
        self.nodes = [n for n, p in self._procs.items() if p.kind == "node"]
        self.etcd_endpoints = ";".join(f"{h.ip}:2379" for h in self.etcd_hosts)
        self.address = f"etcd://{self.etcd_endpoints}/{cluster_id}"
        self.leader_key = f"/kvpool/{cluster_id}/master"
        self.etcd: Optional[EtcdCluster] = None
        self._watchers: List["LeaderWatcher"] = []
        self._closed = False
        fabric.on_close(self.close)

    def __repr__(self) -> str:
        return f"HaCluster({self.fabric.tag}, {list(self._procs)})"

    # --- hosts and processes ------------------------------------------------

    def host(self, name: str) -> Host:
        """The host called name (e1, m1, n1, c1, ...)."""
        return self.fabric.host(name)

    def master_address(self, name: str) -> str:
        """The address master `name` serves (and advertises) on."""
        return f"{self.host(name).ip}:{self.rpc_port}"

    def name_of(self, address: str) -> Optional[str]:
        """The master whose address this is, or None."""
        for n in self.masters:
            if self.master_address(n) == address:
                return n
        return None

    def pid(self, name: str) -> Optional[int]:
        p = self._procs[name]
        return p.popen.pid if p.running() else None

    def running(self, name: str) -> bool:
        return self._procs[name].running()

    def log_path(self, name: str) -> str:
        """The log of name's current (or last) process."""
        return self._procs[name].log_path

    def logs(self, name: str) -> List[str]:
        """Every log name's processes wrote, oldest first."""
        p = self._procs[name]
        return [self._log_name(name, i) for i in range(p.starts)]

    def _log_name(self, name: str, start: int) -> str:
        return os.path.join(self.workdir, f"{name}.log" if start == 0 else f"{name}.r{start}.log")

    def _master_argv(self, name: str) -> List[str]:
        h = self.host(name)
        return [os.path.join(self.bin_dir, "kvpool-master"), "--enable_ha",
                f"--etcd_endpoints={self.etcd_endpoints}", f"--cluster_id={self.cluster_id}",
                f"--ha_lease_ttl_sec={self.lease_ttl_s}", f"--rpc_address={h.ip}",
                f"--rpc_port={self.rpc_port}", "--metrics_port=-1",
                f"--default_kv_lease_ttl={self.default_kv_lease_ttl_ms}",
                "--put_waits_for_holders", f"--client_ttl={self.client_ttl_s}",
                f"--port_file={os.path.join(self.workdir, name + '.port')}",
                *self.master_args]

    def _node_argv(self, name: str) -> List[str]:
        h = self.host(name)
        return [os.path.join(self.bin_dir, "kvpool-node"),
                f"--etcd_endpoints={self.etcd_endpoints}", f"--cluster_id={self.cluster_id}",
                f"--local_hostname={h.ip}", f"--data_bind_address={h.ip}", "--data_port=0",
                f"--global_segment_size={self.segment_size}",
                f"--heartbeat_interval_ms={self.heartbeat_interval_ms}",
                f"--node_id={name}", "--metrics_port=-1", *self.node_args]

    def launch(self, name: str) -> subprocess.Popen:
        """Starts master or node `name` (returns at once).

        Raises:
            RuntimeError: it is already running.
        """
        p = self._procs[name]
        if p.running():
            raise RuntimeError(f"{name} is already running (pid {p.popen.pid})")
        argv = self._master_argv(name) if p.kind == "master" else self._node_argv(name)
        p.log_path = self._log_name(name, p.starts)
        p.starts += 1
        p.popen = p.host.spawn(argv, p.log_path)
        p.pids.append(p.popen.pid)
        return p.popen

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 5.0) -> Optional[int]:
        """Signals name's process (kill -9 by default) and waits for it.

        Returns its exit status (-9 for SIGKILL), or None when it was not
        running or still runs after timeout seconds.
        """
        p = self._procs[name]
        if p.popen is None:
            return None
        status = self.fabric.kill(p.popen, sig, timeout=timeout)
        if status is not None:
            p.popen = None
        return status

    def stop(self, name: str, timeout: float = 10.0) -> Optional[int]:
        """Stops name cleanly (SIGTERM; a master resigns), SIGKILL if it hangs."""
        status = self.kill(name, signal.SIGTERM, timeout=timeout)
        if status is None and self._procs[name].popen is not None:
            status = self.kill(name, signal.SIGKILL)
        return status

    def restart(self, name: str, hard: bool = False) -> subprocess.Popen:
        """Stops name (SIGKILL when hard, else SIGTERM) if running; starts it."""
        if self.running(name):
            if hard:
                self.kill(name)
            else:
                self.stop(name)
        return self.launch(name)

    def check_alive(self, names: Optional[Sequence[str]] = None) -> None:
        """Raises RuntimeError (with its log tail) for a process that exited
        although nobody stopped it."""
        for n in names if names is not None else list(self._procs):
            p = self._procs[n]
            if p.popen is not None and p.popen.poll() is not None:
                raise RuntimeError(f"{n} exited on its own with {p.popen.returncode}:\n"
                                   f"{_tail(p.log_path)}")

    # --- start ----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Starts etcd, every master, every node; returns once a leader is in
        etcd and every node's segment is mounted at it."""
        deadline = time.monotonic() + timeout
        self.etcd = EtcdCluster(self.fabric, self.etcd_hosts, os.path.join(self.workdir, "etcd"))
        # Fabric.close runs hooks latest first: registered again here, the
        # kvpool processes stop before etcd does (close is idempotent).
        self.fabric.on_close(self.close)
        self.etcd.wait_healthy(timeout=max(5.0, deadline - time.monotonic()))
        for m in self.masters:
            self.launch(m)
        self.wait_leader(timeout=max(5.0, deadline - time.monotonic()))
        for n in self.nodes:
            self.launch(n)
        self.wait_nodes(timeout=max(5.0, deadline - time.monotonic()))

    # --- etcd and the leader ------------------------------------------------

    def leader(self, via: Optional[Host] = None,
               timeout: float = 1.5) -> Optional[Tuple[Optional[str], str, int]]:
        """The leader etcd names: (master name, "ip:port", epoch), or None.

        Read with a linearizable range on etcd's v3 JSON gateway, from inside
        `via` (default: the first etcd host, whose member is local), trying
        each member in turn. The epoch is the key's create_revision.

        Raises:
            RuntimeError: no member answered.
        """
        key = base64.b64encode(self.leader_key.encode()).decode()
        errors = []
        members = list(range(len(self.etcd_hosts)))
        for i in members:
            h = via or self.etcd_hosts[i]
            status, body = h.http_request(
                "POST", f"http://{self.etcd_hosts[i].ip}:2379/v3/kv/range",
                json.dumps({"key": key}).encode(), {"Content-Type": "application/json"},
                timeout=timeout)
            if status != 200:
                errors.append(f"e{i + 1}: {status} {body[:200]}")
                continue
            kvs = json.loads(body).get("kvs") or []
            if not kvs:
                return None
            address = base64.b64decode(kvs[0]["value"]).decode()
            return self.name_of(address), address, int(kvs[0]["create_revision"])
        raise RuntimeError("no etcd member answered: " + "; ".join(errors))

    def wait_leader(self, timeout: float = 20.0, newer_than: int = 0,
                    via: Optional[Host] = None) -> Tuple[Optional[str], str, int]:
        """Waits until etcd names a leader of epoch > newer_than; returns it."""
        def probe():
            try:
                l = self.leader(via=via)
            except RuntimeError:
                return None
            return l if l and l[2] > newer_than else None
        return wait_for(probe, timeout, f"a leader newer than epoch {newer_than}", 0.05)

    def watch_leader(self, via: Optional[Host] = None, interval_ms: int = 20) -> "LeaderWatcher":
        """Starts a LeaderWatcher in `via` (default: e1); closed by close()."""
        w = LeaderWatcher(self, via or self.etcd_hosts[0], interval_ms)
        self._watchers.append(w)
        return w

    # --- the client's view ------------------------------------------------------

    def cli(self, args: Sequence[str], master: Optional[str] = None,
            via: Optional[Host] = None, timeout: float = 20.0) -> subprocess.CompletedProcess:
        """Runs the kvpool CLI in `via` (default c1) against the leader
        (through etcd), or against one master's address when `master` is
        given. Never raises for a non-zero exit: callers read returncode."""
        target = ([f"--master={master}"] if master else
                  [f"--etcd_endpoints={self.etcd_endpoints}", f"--cluster_id={self.cluster_id}"])
        argv = [os.path.join(self.bin_dir, "kvpool"), *target,
                f"--rpc_timeout_ms={self.rpc_timeout_ms}", *args]
        return (via or self.client).run(argv, check=False, timeout=timeout)

    def stat(self, via: Optional[Host] = None, master: Optional[str] = None) -> Optional[dict]:
        """`kvpool stat --json` through etcd (or at `master`), or None on failure."""
        proc = self.cli(["stat", "--json"], master=master, via=via)
        if proc.returncode != 0:
            return None
        try:
            return json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None

    def mounted_nodes(self, via: Optional[Host] = None) -> Optional[set]:
        """Node ids with a segment at the leader (None when stat failed)."""
        s = self.stat(via=via)
        if s is None:
            return None
        return {seg["node"] for seg in s.get("segments", [])}

    def wait_nodes(self, names: Optional[Sequence[str]] = None, timeout: float = 30.0) -> None:
        """Waits until the leader has a segment of every node in names (all)."""
        want = set(names if names is not None else self.nodes)

        def probe():
            self.check_alive(list(want))
            got = self.mounted_nodes()
            return got is not None and want <= got
        wait_for(probe, timeout, f"segments of {sorted(want)} at the leader", 0.1)

    def standby_reason(self, name: str, via: Optional[Host] = None) -> Tuple[int, str]:
        """`kvpool --master <name's address> stat` from via (c1): (exit, output).

        A standby answers nothing; the CLI exits non-zero with the master's
        reason ("kvpool-master not serving: standby; the leader is ...").
        """
        proc = self.cli(["stat"], master=self.master_address(name), via=via)
        return proc.returncode, (proc.stdout + proc.stderr).strip()

    def probe(self, keys: Sequence[str], via: Optional[Host] = None,
              timeout: float = 120.0) -> Dict[str, dict]:
        """Gets each key once from `via` (c1) with a fresh client
        (``ha_load.py probe``) and checks its bytes against ha_load's value
        for the key. Returns {key: {"result": "hit"|"miss"|"wrong"|"error",
        "error", "latency_ms"}}."""
        keys = list(keys)
        path = os.path.join(self.workdir, f"probe-{os.getpid()}-{time.monotonic_ns()}.keys")
        with open(path, "w") as f:
            f.write("\n".join(keys) + "\n")
        try:
            proc = (via or self.client).run(
                ["env", f"PYTHONPATH={python_dir()}", sys.executable,
                 os.path.join(_HERE, "ha_load.py"), "probe", "--address", self.address,
                 "--rpc-timeout-ms", str(self.rpc_timeout_ms), "--keys-file", path],
                check=False, timeout=timeout)
        finally:
            os.unlink(path)
        out = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                out[rec.pop("key")] = rec
        if len(out) != len(set(keys)):
            raise RuntimeError(f"probe answered {len(out)} of {len(keys)} keys "
                               f"(exit {proc.returncode}): {proc.stderr[-2000:]}")
        return out

    def log_lines(self, name: str, pattern: str) -> List[Tuple[float, str]]:
        """Lines of every log of `name` matching the regex, with their spdlog
        time ("[2026-12-02 16:47:25.754]", local wall clock) as time.time()
        seconds: [(wall, line)], oldest first."""
        rx = re.compile(pattern)
        out = []
        for path in self.logs(name):
            try:
                text = open(path, errors="replace").read()
            except OSError:
                continue
            for line in text.splitlines():
                m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\]", line)
                if m and rx.search(line):
                    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
                    out.append((t, line))
        return out

    def led_at(self, name: str, epoch: int) -> Optional[float]:
        """When (wall clock, ms resolution) master `name` began leading under
        `epoch`, from its log; None if it did not."""
        lines = self.log_lines(name, rf"leading cluster \S+ as epoch {epoch} ")
        return lines[0][0] if lines else None

    def watch_master(self, name: str, via: Optional[Host] = None,
                     interval_ms: int = 20) -> "MasterWatch":
        """Asks master `name` for stats in a loop from `via` (default: its
        own host, which still reaches it when cut off); see MasterWatch."""
        return MasterWatch(self, name, via or self.host(name), interval_ms)

    # --- teardown ------------------------------------------------------------

    def close(self) -> None:
        """Stops every kvpool process (by PID; masters and nodes SIGKILLed
        if SIGTERM takes over 5 s) and etcd, and removes etcd's data and the
        /dev/shm segment files of processes this cluster started (logs
        stay). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for w in self._watchers:
            w.close()
        # Nodes first: a node outliving its masters only logs retries.
        for name in self.nodes + self.masters:
            p = self._procs[name]
            if p.popen is not None and p.popen.poll() is None:
                if self.fabric.kill(p.popen, signal.SIGTERM, timeout=5.0) is None:
                    self.fabric.kill(p.popen, signal.SIGKILL)
        if self.etcd is not None:
            self.etcd.stop()
            # The members' data (WALs preallocate 64 MiB each); logs stay.
            for d in glob.glob(os.path.join(self.workdir, "etcd", "h*.etcd")):
                shutil.rmtree(d, ignore_errors=True)
        for p in self._procs.values():
            for pid in p.pids:
                for f in glob.glob(f"/dev/shm/kvpool-{pid}-*"):
                    try:
                        os.unlink(f)
                    except OSError:
                        pass
                # The huge tmpfs a node mounted for its segments.
                for d in glob.glob(f"/dev/shm/kvpool-huge-{pid}-*"):
                    subprocess.run(["umount", "-l", d], check=False,
                                   stderr=subprocess.DEVNULL)
                    try:
                        os.rmdir(d)
                    except OSError:
                        pass


class MasterWatch:
    """ha_load.py watch-master in a host: one master asked for its stats
    every interval_ms, each call recorded with its end time (monotonic and
    wall clock). stop() ends it and returns the records."""

    def __init__(self, cluster: HaCluster, name: str, host: Host, interval_ms: int):
        self.cluster = cluster
        base = os.path.join(cluster.workdir, f"watch-{name}-from-{host.name}-{time.monotonic_ns()}")
        self.out_path, self.stop_path = base + ".jsonl", base + ".stop"
        self.proc = host.spawn(
            [sys.executable, "-u", os.path.join(_HERE, "ha_load.py"), "watch-master",
             "--address", cluster.master_address(name), "--out", self.out_path,
             "--stop-file", self.stop_path, "--interval-ms", str(interval_ms)],
            base + ".log", env={"PYTHONPATH": python_dir(), "PYTHONDONTWRITEBYTECODE": "1"})

    def records(self) -> List[dict]:
        try:
            with open(self.out_path) as f:
                return [json.loads(l) for l in f if l.endswith("\n")]
        except OSError:
            return []

    def stop(self, timeout: float = 10.0) -> List[dict]:
        with open(self.stop_path, "w"):
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cluster.fabric.kill(self.proc, signal.SIGKILL)
        return self.records()


class LeaderWatcher:
    """Records every leader change in etcd, timestamped on CLOCK_MONOTONIC.

    A small process in a host polls the leader key through the JSON gateway
    every interval_ms (linearizable reads, each member in turn when one does
    not answer) and prints a JSON line when the (address, epoch) changes:
    {"mono": <time.monotonic()>, "address": "ip:port" or null, "epoch": N}.
    CLOCK_MONOTONIC is one clock for all network namespaces, so the times
    compare with the test's and the load's.
    """

    def __init__(self, cluster: HaCluster, host: Host, interval_ms: int = 20):
        self.cluster = cluster
        self.log_path = os.path.join(cluster.workdir, f"leader-watch-{host.name}.jsonl")
        self.proc = host.spawn([sys.executable, "-u", os.path.abspath(__file__), "--watch-leader",
                                ";".join(f"{h.ip}:2379" for h in cluster.etcd_hosts),
                                cluster.leader_key, str(interval_ms)], self.log_path)

    def events(self) -> List[dict]:
        out = []
        try:
            with open(self.log_path) as f:
                for line in f:
                    if line.startswith("{") and line.endswith("\n"):
                        out.append(json.loads(line))
        except OSError:
            pass
        return out

    def first_after(self, t: float, newer_than: int) -> Optional[dict]:
        """The first change seen after monotonic time t to an epoch > newer_than."""
        for e in self.events():
            if e["mono"] >= t and e.get("epoch") and e["epoch"] > newer_than:
                return e
        return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.cluster.fabric.kill(self.proc, signal.SIGKILL)


class LoadProcess:
    """ha_load.py running in the client host, and its record.

    Attributes:
        ops_path: its JSON lines (one per operation; see ha_load.py).
        summary: the final verification, once stop() returned.
    """

    def __init__(self, cluster: HaCluster, name: str = "load", put_rate: float = 20.0,
                 get_rate: float = 180.0, host: Optional[Host] = None,
                 extra_args: Sequence[str] = ()):
        self.cluster = cluster
        self.name = name
        w = cluster.workdir
        self.ops_path = os.path.join(w, f"{name}.ops.jsonl")
        self.summary_path = os.path.join(w, f"{name}.summary.json")
        self.stop_path = os.path.join(w, f"{name}.stop")
        self.log_path = os.path.join(w, f"{name}.log")
        # An old record would be read before the new load truncates it.
        for p in (self.stop_path, self.summary_path, self.ops_path):
            if os.path.exists(p):
                os.unlink(p)
        self.summary: Optional[dict] = None
        self.mono0: Optional[float] = None
        self._records: List[dict] = []
        self._offset = 0
        self.proc = (host or cluster.client).spawn(
            [sys.executable, "-u", os.path.join(_HERE, "ha_load.py"),
             "--address", cluster.address, "--ops", self.ops_path,
             "--summary", self.summary_path, "--stop-file", self.stop_path,
             "--put-rate", str(put_rate), "--get-rate", str(get_rate),
             "--prefix", f"{name}-{os.getpid()}-{int(time.time())}",
             "--rpc-timeout-ms", str(cluster.rpc_timeout_ms), *extra_args],
            self.log_path, env={"PYTHONPATH": python_dir(), "PYTHONDONTWRITEBYTECODE": "1"})

    def records(self) -> List[dict]:
        """Every operation record so far (read incrementally), each with
        "mono": its end on the test's time.monotonic() clock."""
        try:
            with open(self.ops_path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self._records
        end = data.rfind(b"\n")
        if end < 0:
            return self._records
        self._offset += end + 1
        for line in data[:end].decode().splitlines():
            rec = json.loads(line)
            if rec["op"] == "start":
                self.mono0 = rec["mono0"]
                continue
            if rec["op"] in ("put", "get"):
                rec["mono"] = self.mono0 + rec["t"]
                rec["start"] = rec["mono"] - rec["latency_ms"] / 1e3
                self._records.append(rec)
        return self._records

    @staticmethod
    def good(rec: dict) -> bool:
        """An acknowledged put, or a get that returned the right bytes."""
        return rec["ok"] and not rec.get("miss") and not rec.get("wrong")

    def first_good_after(self, op: str, t: float) -> Optional[dict]:
        """The first good op (see good) that began at or after monotonic t."""
        for rec in self.records():
            if rec["op"] == op and rec["start"] >= t and self.good(rec):
                return rec
        return None

    def wait_good_after(self, op: str, t: float, timeout: float) -> dict:
        self.check_running()
        return wait_for(lambda: self.check_running() or self.first_good_after(op, t),
                        timeout, f"a good {op} after t={t:.3f}", 0.05)

    def between(self, t0: float, t1: float = float("inf")) -> List[dict]:
        """Ops that ended within [t0, t1] (monotonic)."""
        return [r for r in self.records() if t0 <= r["mono"] <= t1]

    def check_running(self) -> None:
        if self.proc.poll() is not None and self.summary is None:
            raise RuntimeError(f"load {self.name} exited with {self.proc.returncode}:\n"
                               f"{_tail(self.log_path)}")

    def wait_acked(self, n: int, timeout: float = 30.0) -> None:
        """Waits until the load has n acknowledged puts."""
        wait_for(lambda: self.check_running() or
                 sum(1 for r in self.records() if r["op"] == "put" and r["ok"]) >= n,
                 timeout, f"{n} acknowledged puts", 0.1)

    def stop(self, timeout: float = 180.0) -> dict:
        """Asks the load to stop (stop file), waits for its final
        verification and returns its summary."""
        with open(self.stop_path, "w"):
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cluster.fabric.kill(self.proc, signal.SIGKILL)
            raise RuntimeError(f"load {self.name} did not finish within {timeout}s:\n"
                               f"{_tail(self.log_path)}")
        try:
            with open(self.summary_path) as f:
                self.summary = json.load(f)
        except (OSError, ValueError):
            raise RuntimeError(f"load {self.name} exited with {self.proc.returncode} "
                               f"and no summary:\n{_tail(self.log_path)}")
        self.records()
        return self.summary


def _watch_leader_main(endpoints: str, key: str, interval_ms: int) -> None:
    import urllib.request
    members = endpoints.split(";")
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    last = None
    i = 0
    while True:
        t_sent = time.monotonic()
        seen = None
        for _ in range(len(members)):
            url = f"http://{members[i]}/v3/kv/range"
            try:
                req = urllib.request.Request(url, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=0.5) as f:
                    kvs = json.loads(f.read()).get("kvs") or []
                seen = ((base64.b64decode(kvs[0]["value"]).decode(),
                         int(kvs[0]["create_revision"])) if kvs else (None, 0))
                break
            except Exception:  # noqa: BLE001 - next member
                i = (i + 1) % len(members)
        if seen is not None and seen != last:
            last = seen
            # The read happened between sending and now: report the send
            # time plus half the round trip.
            now = time.monotonic()
            print(json.dumps({"mono": (t_sent + now) / 2, "address": seen[0],
                              "epoch": seen[1]}), flush=True)
        time.sleep(max(0.0, interval_ms / 1000.0 - (time.monotonic() - t_sent)))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--watch-leader":
        try:
            _watch_leader_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        except KeyboardInterrupt:
            pass
    else:
        print("usage: kvpool_hosts.py --watch-leader ENDPOINTS KEY INTERVAL_MS", file=sys.stderr)
        sys.exit(2)
