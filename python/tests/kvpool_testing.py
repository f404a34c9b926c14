"""Helpers of the Python tests: a kvpool-master process on a free loopback
port, a condition wait, and a TCP proxy that can stop forwarding."""

import os
import socket
import subprocess
import tempfile
import threading
import time

BIN_DIR = os.environ.get(
    "KVPOOL_BIN_DIR",
    os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))


def wait_until(predicate, timeout=20.0, interval=0.01):
    """Polls predicate() until it is true; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


class MasterProcess:
    """build/bin/kvpool-master on 127.0.0.1, port chosen by the kernel;
    stopped by PID."""

    def __init__(self, *flags):
        self._dir = tempfile.TemporaryDirectory(prefix="kvpool-pytest-")
        port_file = os.path.join(self._dir.name, "port")
        self.proc = subprocess.Popen(
            [os.path.join(BIN_DIR, "kvpool-master"), "--rpc_port=0",
             "--port_file=" + port_file, *flags]
            + ([] if any(f.startswith("--metrics_port") for f in flags)
               else ["--metrics_port=-1"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ok = wait_until(lambda: os.path.exists(port_file)
                        or self.proc.poll() is not None)
        if not ok or self.proc.poll() is not None:
            raise RuntimeError("kvpool-master did not start")
        with open(port_file) as f:
            self.port = int(f.read())
        self.address = "127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._dir.cleanup()


class PausableProxy:
    """Forwards 127.0.0.1:<port> to a target; while paused, bytes are held
    back, so calls through it block until their deadline."""

    def __init__(self, target_port):
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.address = "127.0.0.1:%d" % self.port
        self._running = threading.Event()
        self._running.set()  # set = forwarding
        self._sockets = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self):
        self._running.clear()

    def resume(self):
        self._running.set()

    def _accept(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            self._sockets += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b),
                                 daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._running.wait()
                if self._closed:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self._closed = True
        self._running.set()
        self._listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
