"""Simulated hosts on one machine, built from Linux network namespaces.

Multi-host failure tests (partitions, slow links, a dying etcd member) need
separate IP addresses whose links can be cut or slowed independently, yet CI
is one machine with no network at all. Each ``Fabric`` builds a private
layer-2 segment: a "switch" namespace holding a Linux bridge, and one
namespace per host joined to it by a veth pair. Nothing is created in, or
routed through, the root namespace, so several fabrics can reuse the same
subnet at once and the machine's own network is never touched.

Only the standard library is used, so the harness runs wherever ``ip`` and
``tc`` (iproute2) exist and the caller is root.

Slow links: ``tc netem`` is used when the kernel has it. Kernels built
without ``sch_netem`` (the CI VM's is one) get the same semantics from a
small user-space "delay wire" (``_relay_main`` below) that the fabric splices
between the host's veth and the bridge; ``Fabric.degrade_backend`` says
which one is in use.

Example::

    with Fabric() as fab:
        a, b = fab.add_host("a"), fab.add_host("b")
        srv = a.spawn(["my-server", "--listen", a.ip], "/tmp/a.log")
        fab.cut(a)          # a is alone; its loopback still works
        fab.restore(a)
        fab.degrade(b, delay_ms=50)
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import ipaddress
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = [
    "CommandError",
    "EtcdCluster",
    "Fabric",
    "Host",
    "reap_orphans",
]

_SUBNET = "10.213.0.0/24"
_TAG_PREFIX = "kvp"
_BRIDGE = "br0"
# Owners of live fabrics are recorded here so that a later run can remove
# what a SIGKILLed run (e.g. a ctest timeout) left behind; see reap_orphans.
_REGISTRY_DIR = "/run/kvpool-netns"
_BOGUS_MAC = "02:00:00:6b:76:70"  # locally administered, never assigned


class CommandError(subprocess.CalledProcessError):
    """A command failed; the message carries the command line and stderr.

    A plain CalledProcessError prints neither stderr nor a readable command,
    and a failed ``ip``/``tc`` call is useless to debug without both.
    """

    def __str__(self) -> str:
        cmd = " ".join(self.cmd) if isinstance(self.cmd, (list, tuple)) else str(self.cmd)
        err = self.stderr
        if isinstance(err, bytes):
            err = err.decode("utf-8", "replace")
        err = (err or "").strip()
        return f"command failed (exit {self.returncode}): {cmd}" + (f"\nstderr: {err}" if err else "")


def _run(argv: Sequence[str], check: bool = True, timeout: float = 30.0,
         input: Optional[str] = None) -> subprocess.CompletedProcess:
    """Runs argv with text output captured, raising CommandError on failure."""
    argv = [str(a) for a in argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise CommandError(proc.returncode, argv, proc.stdout, proc.stderr)
    return proc


def _ip(*args: str, ns: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip"] + (["-n", ns] if ns else []) + list(args), check=check)


def _tc(*args: str, ns: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["tc", "-n", ns] + list(args), check=check)


def _list_netns() -> List[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _netns_pids(ns: str) -> List[int]:
    proc = _run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def _proc_start_time(pid: int) -> Optional[str]:
    """Start time of pid in clock ticks, to tell a live owner from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "r") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _kill_netns_processes(namespaces: Sequence[str], timeout: float = 5.0) -> None:
    """SIGKILLs every process living in the namespaces and waits for them.

    Process groups miss daemons that called setsid(), and a namespace is only
    really gone once no process holds it; sweeping by namespace catches both.
    """
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for ns in namespaces for p in _netns_pids(ns) if p != os.getpid()]
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def reap_orphans() -> List[str]:
    """Deletes namespaces (and their processes) of fabrics whose owner died.

    close() cannot run when the owning Python is SIGKILLed, so each Fabric
    records its owner in _REGISTRY_DIR and every new Fabric calls this first.
    Only fabrics whose recorded owner is gone are touched, so concurrent
    test runs on one machine are safe. Returns the namespaces removed.
    """
    removed: List[str] = []
    try:
        entries = os.listdir(_REGISTRY_DIR)
    except FileNotFoundError:
        return removed
    live = None
    for tag in entries:
        path = os.path.join(_REGISTRY_DIR, tag)
        try:
            with open(path) as f:
                pid_s, start = f.read().split()
            pid = int(pid_s)
        except (OSError, ValueError):
            continue
        if _proc_start_time(pid) == start:
            continue  # owner alive
        if live is None:
            live = _list_netns()
        mine = [ns for ns in live if ns.startswith(tag)]
        _kill_netns_processes(mine)
        for ns in mine:
            _run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return removed


# --- process-exit cleanup ------------------------------------------------------

_live_fabrics: "set[Fabric]" = set()
_hooks_lock = threading.Lock()
_hooks_installed = False
_prev_handlers: Dict[int, object] = {}


def _close_all() -> None:
    for fab in list(_live_fabrics):
        try:
            fab.close()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            print(f"netns_hosts: cleanup of {fab.tag} failed: {e}", file=sys.stderr)


def _on_signal(signum, frame):
    _close_all()
    prev = _prev_handlers.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_exit_hooks() -> None:
    """Closes fabrics at interpreter exit and on SIGTERM/SIGINT.

    Namespaces outlive the process that made them, and so would every etcd
    started inside them; a Ctrl-C or a CI timeout must not leave them behind.
    Previous handlers are chained so pytest's own Ctrl-C handling still runs.
    """
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
        atexit.register(_close_all)
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal only works there; atexit still covers us
        for signum in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(signum)
            if prev == signal.SIG_IGN:
                continue
            _prev_handlers[signum] = prev
            signal.signal(signum, _on_signal)


# --- hosts and the fabric --------------------------------------------------------

class Host:
    """One simulated machine: a namespace with ``eth0`` on the fabric.

    Attributes:
        name: the short name given to Fabric.add_host.
        ns: the namespace name (``<tag>-<name>``).
        ip: the host's address on the fabric, as a string.
    """

    def __init__(self, fabric: "Fabric", name: str, ns: str, ip: str, index: int):
        self.fabric = fabric
        self.name = name
        self.ns = ns
        self.ip = ip
        self.index = index
        self.switch_port = f"vh{index}"  # its veth end inside the switch namespace

    def __repr__(self) -> str:
        return f"Host({self.name!r}, ns={self.ns!r}, ip={self.ip!r})"

    def _wrap(self, argv: Sequence[str]) -> List[str]:
        return ["ip", "netns", "exec", self.ns] + [str(a) for a in argv]

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 30.0,
            input: Optional[str] = None) -> subprocess.CompletedProcess:
        """Runs argv to completion inside the host (text output captured).

        Raises:
            CommandError: check is true and the command exited non-zero.
            subprocess.TimeoutExpired: it ran longer than timeout seconds.
        """
        return _run(self._wrap(argv), check=check, timeout=timeout, input=input)

    def python(self, code: str, *args: str, check: bool = True,
               timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Runs a Python snippet inside the host.

        The test process lives in the root namespace and cannot reach fabric
        addresses, so every probe of the fabric has to run in here. The
        interpreter running the harness is reused (curl may be absent).
        """
        return self.run([sys.executable, "-c", code, *args], check=check, timeout=timeout)

    def spawn(self, argv: Sequence[str], log_path: str,
              env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        """Starts a long-running process inside the host.

        The process gets its own process group so that it (and its children)
        can be signalled together, and the fabric tracks it so that close()
        never leaves it running. stdout and stderr both go to log_path.

        Args:
            argv: the command.
            log_path: file receiving stdout and stderr (truncated).
            env: variables added to (overriding) the current environment.
        """
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update({k: str(v) for k, v in env.items()})
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(self._wrap(argv), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=full_env,
                                    start_new_session=True)
        self.fabric.processes.append(proc)
        return proc

    def http_request(self, method: str, url: str, body: Optional[bytes] = None,
                     headers: Optional[Dict[str, str]] = None,
                     timeout: float = 2.0) -> Tuple[int, str]:
        """Makes one HTTP request from inside the host.

        Returns:
            (status, body). HTTP error statuses are returned, not raised.
            status is 0 when no HTTP response arrived at all (refused,
            unreachable, timed out), with the error text as body, so that
            callers can poll without try/except.
        """
        code = (
            "import base64,json,sys,urllib.request,urllib.error\n"
            "a=json.loads(sys.argv[1])\n"
            "d=base64.b64decode(a['body']) if a['body'] is not None else None\n"
            "r=urllib.request.Request(a['url'],data=d,method=a['method'],headers=a['headers'])\n"
            "try:\n"
            "  with urllib.request.urlopen(r,timeout=a['timeout']) as f: s,b=f.status,f.read()\n"
            "except urllib.error.HTTPError as e: s,b=e.code,e.read()\n"
            "except Exception as e: s,b=0,repr(e).encode()\n"
            "print(json.dumps([s,base64.b64encode(b).decode()]))\n"
        )
        arg = json.dumps({
            "method": method, "url": url, "timeout": timeout, "headers": headers or {},
            "body": base64.b64encode(body).decode() if body is not None else None,
        })
        proc = self.python(code, arg, timeout=timeout + 10)
        status, b64 = json.loads(proc.stdout)
        return status, base64.b64decode(b64).decode("utf-8", "replace")

    def http_get(self, url: str, timeout: float = 2.0) -> Tuple[int, str]:
        """GETs url from inside the host; see http_request for the result."""
        return self.http_request("GET", url, timeout=timeout)


class Fabric:
    """A private switched network of simulated hosts, and its fault controls.

    Use as a context manager (or call close()). Everything it creates is
    named with a per-fabric tag so leftovers are attributable and several
    fabrics (even in concurrent test runs) never collide.

    Attributes:
        tag: unique short name prefix, ``kvp`` + 5 hex digits.
        switch_ns: the namespace holding the bridge.
        hosts: hosts in creation order.
        processes: every Popen started by Host.spawn.
        degrade_backend: "netem" or "relay" (see module docstring).
    """

    def __init__(self, subnet: str = _SUBNET, degrade_backend: str = "auto"):
        """Creates the switch namespace and bridge.

        Args:
            subnet: IPv4 subnet for the hosts; the first host gets .1.
            degrade_backend: "auto" (netem if the kernel has it, else relay),
                "netem" or "relay".

        Raises:
            PermissionError: not root (namespaces need CAP_SYS_ADMIN).
            FileNotFoundError: ``ip`` or ``tc`` is not installed.
        """
        if os.geteuid() != 0:
            raise PermissionError(
                "netns_hosts.Fabric needs root: it creates network namespaces, veth pairs "
                "and qdiscs (run the test as root, as CI does)")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                raise FileNotFoundError(f"netns_hosts.Fabric needs `{tool}` (Debian package iproute2)")
        if degrade_backend not in ("auto", "netem", "relay"):
            raise ValueError(f"degrade_backend must be auto, netem or relay, not {degrade_backend!r}")
        self._closed = False
        self._lock = threading.RLock()
        self._namespaces: List[str] = []
        self.hosts: List[Host] = []
        self.processes: List[subprocess.Popen] = []
        self._relays: Dict[str, subprocess.Popen] = {}   # host name -> relay process
        self._close_hooks: List = []
        self._degraded: Dict[str, str] = {}              # host name -> backend used
        self._partitions: Dict[Tuple[str, str], str] = {}  # (a, b) sorted -> mode
        self._requested_backend = degrade_backend
        self._backend: Optional[str] = None
        self._net = ipaddress.ip_network(subnet)
        self._prefixlen = self._net.prefixlen

        reap_orphans()
        _install_exit_hooks()
        existing = set(_list_netns())
        while True:
            seed = f"{os.getpid()}:{time.time_ns()}:{os.urandom(8).hex()}".encode()
            self.tag = _TAG_PREFIX + hashlib.sha1(seed).hexdigest()[:5]
            if not any(ns.startswith(self.tag) for ns in existing):
                break
        self.workdir = tempfile.mkdtemp(prefix=f"{self.tag}-")
        os.makedirs(_REGISTRY_DIR, exist_ok=True)
        self._registry_file = os.path.join(_REGISTRY_DIR, self.tag)
        with open(self._registry_file, "w") as f:
            f.write(f"{os.getpid()} {_proc_start_time(os.getpid())}\n")
        _live_fabrics.add(self)

        self.switch_ns = f"{self.tag}_switch"
        try:
            self._add_netns(self.switch_ns)
            _ip("link", "set", "lo", "up", ns=self.switch_ns)
            _ip("link", "add", _BRIDGE, "type", "bridge", ns=self.switch_ns)
            _ip("link", "set", _BRIDGE, "up", ns=self.switch_ns)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Fabric":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Fabric({self.tag}, hosts={[h.name for h in self.hosts]})"

    def _add_netns(self, ns: str) -> None:
        self._namespaces.append(ns)  # before creation: a half-made one is still ours to delete
        _run(["ip", "netns", "add", ns])

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"fabric {self.tag} is closed")

    def add_host(self, name: str) -> Host:
        """Creates a host namespace wired to the switch; returns it.

        The host gets the next free address of the subnet (creation order),
        ``lo`` and ``eth0`` up, and a /N route for the subnet only: there is
        no default route, so nothing from a host can ever leave the fabric.
        """
        with self._lock:
            self._check_open()
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,19}", name):
                raise ValueError(f"host name {name!r}: use 1-20 of [a-z0-9-]")
            if any(h.name == name for h in self.hosts):
                raise ValueError(f"host {name!r} already exists in fabric {self.tag}")
            index = len(self.hosts) + 1
            if index >= self._net.num_addresses - 1:
                raise ValueError(f"subnet {self._net} is full")
            ip = str(self._net.network_address + index)
            host = Host(self, name, f"{self.tag}-{name}", ip, index)
            self._add_netns(host.ns)
            # Both ends are created directly in their namespaces, so no
            # interface ever appears in the root namespace.
            _ip("link", "add", host.switch_port, "type", "veth",
                "peer", "name", "eth0", "netns", host.ns, ns=self.switch_ns)
            _ip("link", "set", "lo", "up", ns=host.ns)
            _ip("addr", "add", f"{ip}/{self._prefixlen}", "dev", "eth0", ns=host.ns)
            _ip("link", "set", "eth0", "up", ns=host.ns)
            _ip("link", "set", host.switch_port, "master", _BRIDGE, "up", ns=self.switch_ns)
            self.hosts.append(host)
            return host

    def host(self, name: str) -> Host:
        """Returns the host called name."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    # --- faults -------------------------------------------------------------

    def cut(self, host: Host) -> None:
        """Partitions host from every other host.

        The switch-side veth goes down, so the host's eth0 loses carrier: it
        is like pulling the cable. Peers see timeouts (not refusals), and the
        host can still talk to itself, even on its fabric address.
        """
        with self._lock:
            self._check_open()
            _ip("link", "set", host.switch_port, "down", ns=self.switch_ns)

    def restore(self, host: Host) -> None:
        """Undoes cut(host)."""
        with self._lock:
            self._check_open()
            _ip("link", "set", host.switch_port, "up", ns=self.switch_ns)

    def cut_between(self, a: Host, b: Host, mode: str = "drop") -> None:
        """Partitions a and b from each other only; both still reach others.

        Args:
            mode: "drop" (default): packets between the two are silently
                lost, like a real partition: connects and calls time out.
                Done by pinning, in each host, the other's address to a MAC
                nobody has (a permanent neighbour entry).
                "reject": each side gets an immediate local error instead
                (``ip route add prohibit``: connect() fails with EACCES),
                for testing fast-failure paths. (A ``blackhole`` route would
                fail connect() with EINVAL, which no real network produces.)
        """
        if mode not in ("drop", "reject"):
            raise ValueError(f"mode must be drop or reject, not {mode!r}")
        with self._lock:
            self._check_open()
            key = tuple(sorted((a.name, b.name)))
            if a is b:
                raise ValueError("cut_between needs two different hosts")
            if key in self._partitions:
                self.restore_between(a, b)
            for src, dst in ((a, b), (b, a)):
                if mode == "drop":
                    _ip("neigh", "replace", dst.ip, "lladdr", _BOGUS_MAC, "nud", "permanent",
                        "dev", "eth0", ns=src.ns)
                else:
                    _ip("route", "replace", "prohibit", f"{dst.ip}/32", ns=src.ns)
            self._partitions[key] = mode

    def restore_between(self, a: Host, b: Host) -> None:
        """Undoes cut_between(a, b); a no-op if they were not partitioned."""
        with self._lock:
            self._check_open()
            mode = self._partitions.pop(tuple(sorted((a.name, b.name))), None)
            if mode is None:
                return
            for src, dst in ((a, b), (b, a)):
                if mode == "drop":
                    # Deleting makes the kernel ARP afresh for the real MAC.
                    _ip("neigh", "del", dst.ip, "dev", "eth0", ns=src.ns)
                else:
                    _ip("route", "del", "prohibit", f"{dst.ip}/32", ns=src.ns)

    @property
    def degrade_backend(self) -> str:
        """"netem" or "relay": how degrade() delays and drops packets."""
        if self._backend is None:
            if self._requested_backend != "auto":
                self._backend = self._requested_backend
            else:
                self._backend = "netem" if self.netem_available() else "relay"
        return self._backend

    def netem_available(self) -> bool:
        """Whether the kernel has sch_netem (probed inside the switch namespace)."""
        probe = _tc("qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                    ns=self.switch_ns, check=False)
        if probe.returncode == 0:
            _tc("qdisc", "del", "dev", "lo", "root", ns=self.switch_ns, check=False)
        return probe.returncode == 0

    def degrade(self, host: Host, delay_ms: float = 0, loss_pct: float = 0.0,
                jitter_ms: float = 0) -> None:
        """Makes host's link slow and/or lossy, in both directions.

        Every packet to or from the host is delayed by delay_ms (+- a uniform
        jitter_ms; jitter reorders packets, as netem's does) and dropped with
        probability loss_pct/100, once per direction. So a request/response
        between host and a healthy peer takes at least 2 * delay_ms longer,
        and a TCP connect + one echo (two round trips) 4 * delay_ms.

        Calling it again replaces the previous settings.
        """
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
            raise ValueError("need delay_ms >= 0, jitter_ms >= 0, 0 <= loss_pct <= 100")
        with self._lock:
            self._check_open()
            backend = self.degrade_backend
            if backend == "netem":
                args = ["netem", "delay", f"{delay_ms}ms"]
                if jitter_ms:
                    args.append(f"{jitter_ms}ms")
                if loss_pct:
                    args += ["loss", f"{loss_pct}%"]
                # Egress of each end: eth0 delays host->switch, the switch
                # port delays switch->host.
                _tc("qdisc", "replace", "dev", "eth0", "root", *args, ns=host.ns)
                _tc("qdisc", "replace", "dev", host.switch_port, "root", *args, ns=self.switch_ns)
            else:
                self._relay_set(host, delay_ms, loss_pct, jitter_ms)
            self._degraded[host.name] = backend

    def clear_degrade(self, host: Host) -> None:
        """Undoes degrade(host); a no-op if host is not degraded."""
        with self._lock:
            self._check_open()
            backend = self._degraded.pop(host.name, None)
            if backend == "netem":
                _tc("qdisc", "del", "dev", "eth0", "root", ns=host.ns)
                _tc("qdisc", "del", "dev", host.switch_port, "root", ns=self.switch_ns)
            elif backend == "relay":
                self._relay_remove(host)

    # The relay splices itself between the host's switch port and the bridge:
    #   host eth0 <-> vhN  [relay]  vdN <-> vbN (bridge port)
    def _relay_set(self, host: Host, delay_ms: float, loss_pct: float, jitter_ms: float) -> None:
        params = json.dumps({"delay_ms": delay_ms, "loss_pct": loss_pct, "jitter_ms": jitter_ms})
        relay = self._relays.get(host.name)
        if relay is not None and relay.poll() is None:
            try:
                relay.stdin.write(params + "\n")
                relay.stdin.flush()
                self._await_line(relay, "OK", host)
                return
            except (OSError, RuntimeError):
                pass  # died or hung meanwhile: rewired below
        if relay is not None:  # unwire a dead relay before wiring a new one
            self._relay_remove(host)
        try:
            self._relay_start(host, params)
        except BaseException:
            # Never leave the host detached from the bridge by a failed start.
            self._relay_remove(host, check=False)
            raise

    def _relay_start(self, host: Host, params: str) -> None:
        inner, outer = f"vd{host.index}", f"vb{host.index}"
        sw = self.switch_ns
        _ip("link", "add", inner, "type", "veth", "peer", "name", outer, ns=sw)
        _ip("link", "set", inner, "up", ns=sw)
        _ip("link", "set", outer, "master", _BRIDGE, "up", ns=sw)
        _ip("link", "set", host.switch_port, "nomaster", ns=sw)
        _ip("link", "set", host.switch_port, "promisc", "on", ns=sw)
        log = open(os.path.join(self.workdir, f"relay-{host.name}.log"), "wb")
        with log:
            relay = subprocess.Popen(
                ["ip", "netns", "exec", sw, sys.executable, "-u", os.path.abspath(__file__),
                 "--relay", host.switch_port, inner, params],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True)
        self._relays[host.name] = relay
        self._await_line(relay, "READY", host)

    def _await_line(self, relay: subprocess.Popen, want: str, host: Host, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([relay.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = relay.stdout.readline()
            if not line:
                break
            if line.strip() == want:
                return
        log_path = os.path.join(self.workdir, f"relay-{host.name}.log")
        try:
            with open(log_path) as f:
                tail = f.read()[-2000:]
        except OSError:
            tail = ""
        raise RuntimeError(f"delay relay for {host.name} did not answer {want}: {tail}")

    def _relay_remove(self, host: Host, check: bool = True) -> None:
        relay = self._relays.pop(host.name, None)
        if relay is not None:
            self._stop_process(relay, signal.SIGKILL, 5.0)
            for stream in (relay.stdin, relay.stdout):
                stream.close()
        sw = self.switch_ns
        _ip("link", "set", host.switch_port, "promisc", "off", ns=sw, check=check)
        _ip("link", "set", host.switch_port, "master", _BRIDGE, ns=sw, check=check)
        _ip("link", "del", f"vd{host.index}", ns=sw, check=check)  # takes its peer vbN along

    # --- processes and teardown --------------------------------------------

    @staticmethod
    def _stop_process(proc: subprocess.Popen, sig: int, timeout: float) -> Optional[int]:
        # Signal the group only while the leader is unreaped: once reaped its
        # pid (= pgid) may belong to an unrelated process. Members that
        # outlive the leader are caught by the per-namespace sweep in close().
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self, popen: subprocess.Popen, sig: int = signal.SIGKILL,
             timeout: float = 5.0) -> Optional[int]:
        """Signals popen's whole process group and waits for the leader.

        Returns:
            The exit status (negative signal number if killed by one), or
            None if it still runs after timeout seconds.
        """
        return self._stop_process(popen, sig, timeout)

    def on_close(self, hook) -> None:
        """Registers a callable that close() runs first (latest first).

        For services whose graceful stop needs an order that a blanket
        SIGTERM to every process cannot give (see EtcdCluster.stop).
        Exceptions from hooks are reported after the rest of close() ran.
        """
        self._close_hooks.append(hook)

    def leftovers(self) -> List[str]:
        """Namespaces carrying this fabric's tag that still exist."""
        return [ns for ns in _list_netns() if ns.startswith(self.tag)]

    def close(self) -> None:
        """Stops every process and deletes every namespace; idempotent.

        on_close hooks run first (e.g. EtcdCluster.stop). Remaining
        processes get SIGTERM and up to 5 s to exit (so etcd and servers can
        flush logs), then SIGKILL. Anything else still inside a namespace
        (e.g. a daemon that left its process group) is then SIGKILLed too,
        because a namespace with a live process in it is never freed.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            errors = []
            for hook in reversed(self._close_hooks):
                try:
                    hook()
                except Exception as e:  # noqa: BLE001 - cleanup must go on
                    errors.append(f"close hook {hook!r}: {e}")
            procs = list(self.processes) + list(self._relays.values())
            for proc in procs:
                if proc.returncode is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + 5.0
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            for proc in procs:
                self._stop_process(proc, signal.SIGKILL, 5.0)
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        try:
                            stream.close()
                        except OSError:
                            pass
            _kill_netns_processes(self._namespaces)
            for ns in reversed(self._namespaces):
                proc = _run(["ip", "netns", "del", ns], check=False)
                if proc.returncode != 0 and ns in _list_netns():
                    errors.append(f"ip netns del {ns}: {proc.stderr.strip()}")
            shutil.rmtree(self.workdir, ignore_errors=True)
            try:
                os.unlink(self._registry_file)
            except (FileNotFoundError, AttributeError):
                pass
            _live_fabrics.discard(self)
            if errors:
                raise RuntimeError("; ".join(errors))


# --- etcd ------------------------------------------------------------------------

class EtcdCluster:
    """A static etcd cluster with one member per host.

    Attributes:
        hosts: the member hosts; member i is named ``h<i>``.
        endpoints: ``ip:client_port`` of every member, in member order.
        procs: the member processes (None once a member is killed/stopped).
    """

    def __init__(self, fabric: Fabric, hosts: Sequence[Host], workdir: str,
                 client_port: int = 2379, peer_port: int = 2380,
                 heartbeat_ms: int = 50, election_ms: int = 500,
                 etcd_binary: str = "etcd"):
        """Starts all members (returns at once; see wait_healthy).

        The short heartbeat/election defaults make leader loss recover in
        about a second instead of etcd's default several seconds.
        """
        self.fabric = fabric
        self.hosts = list(hosts)
        self.workdir = workdir
        self.client_port = client_port
        self.peer_port = peer_port
        self.endpoints = [f"{h.ip}:{client_port}" for h in self.hosts]
        self.log_paths = [os.path.join(workdir, f"etcd-h{i}.log") for i in range(len(self.hosts))]
        os.makedirs(workdir, exist_ok=True)
        initial = ",".join(f"h{i}=http://{h.ip}:{peer_port}" for i, h in enumerate(self.hosts))
        self.procs: List[Optional[subprocess.Popen]] = []
        for i, h in enumerate(self.hosts):
            client = f"http://{h.ip}:{client_port}"
            peer = f"http://{h.ip}:{peer_port}"
            argv = [etcd_binary, "--name", f"h{i}",
                    "--data-dir", os.path.join(workdir, f"h{i}.etcd"),
                    "--listen-client-urls", client, "--advertise-client-urls", client,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", fabric.tag,
                    "--heartbeat-interval", str(heartbeat_ms),
                    "--election-timeout", str(election_ms)]
            self.procs.append(h.spawn(argv, self.log_paths[i]))
        fabric.on_close(self.stop)

    def alive(self) -> List[int]:
        """Indices of members not killed or stopped through this object."""
        return [i for i, p in enumerate(self.procs) if p is not None]

    def _log_tail(self, i: int, n: int = 1500) -> str:
        try:
            with open(self.log_paths[i], "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def health(self, i: int, via: Optional[Host] = None, timeout: float = 1.0) -> bool:
        """Whether member i answers /health with {"health": "true"}.

        etcd reports healthy only with a leader and a working quorum read,
        so this is also the "cluster can serve" signal.
        """
        status, body = (via or self.hosts[i]).http_get(
            f"http://{self.endpoints[i]}/health", timeout=timeout)
        if status != 200:
            return False
        try:
            return json.loads(body).get("health") == "true"
        except ValueError:
            return False

    def wait_healthy(self, timeout: float = 20.0, members: Optional[Sequence[int]] = None) -> None:
        """Waits until every live member (or the given ones) is healthy.

        Each member is probed from inside its own host, since the caller
        (root namespace) has no route to the fabric.

        Raises:
            RuntimeError: a member process exited.
            TimeoutError: not all healthy within timeout seconds.
        """
        todo = list(self.alive() if members is None else members)
        deadline = time.monotonic() + timeout
        while True:
            for i in list(todo):
                proc = self.procs[i]
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"etcd member h{i} exited with {proc.returncode}:\n"
                                       f"{self._log_tail(i)}")
                if self.health(i):
                    todo.remove(i)
            if not todo:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- h{i}:\n{self._log_tail(i)}" for i in todo)
                raise TimeoutError(f"etcd members {todo} not healthy after {timeout}s\n{tails}")
            time.sleep(0.1)

    def _call(self, path: str, payload: dict, via: Optional[Host], member: Optional[int],
              timeout: float) -> dict:
        if member is None:
            member = self.alive()[0]
        status, body = (via or self.hosts[member]).http_request(
            "POST", f"http://{self.endpoints[member]}{path}", json.dumps(payload).encode(),
            {"Content-Type": "application/json"}, timeout=timeout)
        if status != 200:
            raise RuntimeError(f"etcd {path} via h{member} failed: status {status}: {body}")
        return json.loads(body)

    def put(self, key: str, value: str, via: Optional[Host] = None,
            member: Optional[int] = None, timeout: float = 3.0) -> dict:
        """Puts key=value through the v3 JSON gateway (POST /v3/kv/put).

        Args:
            via: host to send the request from (default: the member's own).
            member: index of the member to talk to (default: first alive).
        """
        b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
        return self._call("/v3/kv/put", {"key": b64(key), "value": b64(value)}, via, member, timeout)

    def get(self, key: str, via: Optional[Host] = None, member: Optional[int] = None,
            timeout: float = 3.0) -> Optional[str]:
        """Reads key through POST /v3/kv/range; None if absent."""
        out = self._call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()},
                         via, member, timeout)
        kvs = out.get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        """Kills member i (SIGKILL by default: a crash, not a shutdown)."""
        proc = self.procs[i]
        if proc is not None:
            self.fabric.kill(proc, sig)
            self.procs[i] = None

    def stop(self) -> None:
        """Stops every member gracefully, one at a time; idempotent.

        One at a time because a leader told to stop first hands leadership
        to a live peer: with all members SIGTERMed at once it waits ~6 s for
        peers that are gone (one by one takes milliseconds). Fabric.close()
        calls this before its blanket SIGTERM. A member still running 5 s
        after SIGTERM gets SIGKILL.
        """
        for i, proc in enumerate(self.procs):
            if proc is not None:
                if self.fabric.kill(proc, signal.SIGTERM, timeout=5.0) is None:
                    self.fabric.kill(proc, signal.SIGKILL)
                self.procs[i] = None


# --- user-space delay wire (used when the kernel lacks sch_netem) -----------------

def _relay_main(port_if: str, bridge_if: str, params_json: str) -> None:
    """Forwards frames between two interfaces with netem-like delay and loss.

    Runs inside the switch namespace, bound with AF_PACKET to the host's
    switch port and to a veth whose peer is on the bridge. Sockets use
    PACKET_VNET_HDR so GSO super-frames and partial checksums from the
    veths pass through untouched (without it large TCP segments would not
    fit the MTU and offloaded checksums would arrive unfilled).

    Protocol on stdin/stdout: prints READY once bound; each stdin line is a
    new JSON {delay_ms, loss_pct, jitter_ms}, answered with OK. Exits when
    stdin closes, so it never outlives the fabric that started it.
    """
    import heapq
    import random
    import selectors
    import socket

    eth_p_all = socket.htons(0x0003)
    sol_packet, packet_vnet_hdr, packet_ignore_outgoing = 263, 15, 23
    packet_outgoing = 4
    limit = 10000  # queued frames per relay, like netem's limit

    def open_sock(ifname):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, eth_p_all)
        s.setsockopt(sol_packet, packet_vnet_hdr, 1)
        try:
            s.setsockopt(sol_packet, packet_ignore_outgoing, 1)
        except OSError:
            pass  # pre-4.20 kernels: outgoing frames are filtered below
        for opt in (33, socket.SO_RCVBUF):  # SO_RCVBUFFORCE needs root
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
                break
            except OSError:
                continue
        s.bind((ifname, 0x0003))  # Python applies htons to this one itself
        s.setblocking(False)
        return s

    params = json.loads(params_json)
    a, b = open_sock(port_if), open_sock(bridge_if)
    peer = {a: b, b: a}
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ)
    sel.register(b, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    heap: list = []
    seq = 0
    print("READY", flush=True)

    def send(sock, frame):
        try:
            sock.send(frame)
        except OSError:
            pass  # link down (cut) or similar: the frame is lost, as on a wire

    while True:
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, out, frame = heapq.heappop(heap)
            send(out, frame)
        timeout = max(0.0, heap[0][0] - now) if heap else None
        for key, _ in sel.select(timeout):
            if key.fileobj is sys.stdin:
                line = sys.stdin.readline()
                if not line:
                    return
                params = json.loads(line)
                print("OK", flush=True)
                continue
            sock = key.fileobj
            for _ in range(256):
                try:
                    frame, addr = sock.recvfrom(1 << 18)
                except BlockingIOError:
                    break
                except OSError:
                    break  # ENETDOWN after a cut; the socket recovers on link up
                if addr[2] == packet_outgoing:
                    continue
                if params["loss_pct"] and random.random() * 100 < params["loss_pct"]:
                    continue
                delay = params["delay_ms"]
                if params["jitter_ms"]:
                    delay += random.uniform(-params["jitter_ms"], params["jitter_ms"])
                if delay <= 0 and not heap:
                    send(peer[sock], frame)
                elif len(heap) < limit:
                    seq += 1
                    heapq.heappush(heap, (time.monotonic() + max(0.0, delay) / 1000.0,
                                          seq, peer[sock], frame))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--relay":
        try:
            _relay_main(sys.argv[2], sys.argv[3], sys.argv[4])
        except KeyboardInterrupt:
            pass
    else:
        print("usage: netns_hosts.py --relay PORT_IF BRIDGE_IF PARAMS_JSON (internal)", file=sys.stderr)
        sys.exit(2)
