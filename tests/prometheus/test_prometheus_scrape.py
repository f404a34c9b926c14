"""Debian's Prometheus server scrapes a running kvpool cluster (a master and a
node on loopback) and answers histogram quantiles of kvpool's metrics through
its HTTP API: the metrics are valid exposition text, the histograms have the
series PromQL needs, and the values are plausible.

Everything binds to 127.0.0.1; every process is stopped by PID."""

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python", "tests"))
from kvpool_testing import BIN_DIR, MasterProcess, wait_until  # noqa: E402

import kvpool  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
MiB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def cluster(tmp_path):
    master_metrics = free_port()
    master = MasterProcess("--metrics_port=%d" % master_metrics)
    node_metrics = free_port()
    node = subprocess.Popen(
        [os.path.join(BIN_DIR, "kvpool-node"),
         "--master_server_address=" + master.address,
         "--global_segment_size=64MiB", "--metrics_port=%d" % node_metrics,
         "--node_id=prom-node", "--enable_ssd_offload",
         "--ssd_offload_path=" + str(tmp_path / "ssd"),
         "--ssd_capacity_bytes=256MiB"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def node_up():
            try:
                return "prom-node" in http_get(
                    "http://127.0.0.1:%d/status" % node_metrics)
            except OSError:
                return False
        assert wait_until(node_up, timeout=30), "kvpool-node did not start"
        yield master, master_metrics, node_metrics
    finally:
        stop(node)
        master.stop()


@pytest.fixture
def prometheus(cluster):
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it)")
    _, master_metrics, node_metrics = cluster
    work = tempfile.TemporaryDirectory(prefix="kvpool-prometheus-")
    config = os.path.join(work.name, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: kvpool-master\n"
            "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
            "  - job_name: kvpool-node\n"
            "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
            % (master_metrics, node_metrics))
    port = free_port()
    proc = subprocess.Popen(
        [PROMETHEUS, "--config.file=" + config,
         "--storage.tsdb.path=" + os.path.join(work.name, "data"),
         "--web.listen-address=127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = "http://127.0.0.1:%d" % port

        def ready():
            try:
                return "Ready" in http_get(base + "/-/ready")
            except OSError:
                return proc.poll() is not None
        assert wait_until(ready, timeout=60) and proc.poll() is None, \
            "prometheus did not start"
        yield base
    finally:
        stop(proc)
        work.cleanup()


def query(base, promql):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    body = json.loads(http_get(url))
    assert body["status"] == "success", body
    return body["data"]["result"]


def scalar(result):
    """The one sample's value, or None when there is none or it is NaN."""
    if len(result) != 1:
        return None
    v = float(result[0]["value"][1])
    return None if math.isnan(v) else v


def test_prometheus_answers_histogram_quantiles(cluster, prometheus):
    master, _, _ = cluster
    # TCP, so the node's data server serves the bytes.
    with kvpool.Store(master.address, transport="tcp") as store:
        deadline = time.monotonic() + 60
        i = 0
        p50_put = p99_rpc = p50_read = None
        # Traffic until the server has scraped enough of it for a rate.
        while time.monotonic() < deadline:
            for _ in range(20):
                store.put("k%d" % (i % 200), os.urandom(64 * 1024))
                assert store.get("k%d" % (i % 200)) is not None
                store.is_exist("k%d" % i)
                i += 1
            p50_put = scalar(query(prometheus,
                'histogram_quantile(0.5, sum by (le) (rate('
                'kvpool_master_rpc_duration_seconds_bucket'
                '{method="BatchPutStart"}[10s])))'))
            p99_rpc = scalar(query(prometheus,
                'histogram_quantile(0.99, sum by (le) (rate('
                'kvpool_master_rpc_duration_seconds_bucket[10s])))'))
            p50_read = scalar(query(prometheus,
                'histogram_quantile(0.5, sum by (le) (rate('
                'kvpool_node_data_request_duration_seconds_bucket'
                '{op="read"}[10s])))'))
            if None not in (p50_put, p99_rpc, p50_read):
                break
        assert p50_put is not None, "no put quantile from prometheus"
        assert p99_rpc is not None and p50_read is not None
        # Plausible: a loopback RPC or a 64 KiB read takes more than 1 us
        # and less than the 5 s RPC timeout.
        for v in (p50_put, p99_rpc, p50_read):
            assert 1e-6 < v < 5.0, (p50_put, p99_rpc, p50_read)
        # The request-size histogram saw the 64 KiB values.
        sizes = scalar(query(prometheus,
            'histogram_quantile(0.5, sum by (le) (rate('
            'kvpool_node_data_request_bytes_bucket{op="read"}[10s])))'))
        assert sizes is not None and 32 * 1024 <= sizes <= 128 * 1024, sizes
        # The client's own histogram, by path.
        text = store.metrics_text()
        assert ('kvpool_client_op_duration_seconds_count'
                '{op="put",path="tcp"}') in text
        counts = [line for line in text.splitlines()
                  if line.startswith('kvpool_client_op_duration_seconds_count'
                                     '{op="get",path="tcp"}')]
        assert counts and float(counts[0].split()[-1]) >= i


def test_every_dashboard_query_is_valid_promql(cluster, prometheus):
    """docs/grafana/kvpool.json's queries parse and run on a live server,
    and each names only metrics that kvpool serves."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                        "grafana", "kvpool.json")
    with open(path) as f:
        dashboard = json.load(f)
    _, master_metrics, node_metrics = cluster
    served = http_get("http://127.0.0.1:%d/metrics" % master_metrics)
    served += http_get("http://127.0.0.1:%d/metrics" % node_metrics)
    # Client metrics are served by the embedding process: take them from a
    # client of this cluster.
    master = cluster[0]
    with kvpool.Store(master.address, transport="tcp") as store:
        served += store.metrics_text()
    names = {line.split()[2] for line in served.splitlines()
             if line.startswith("# TYPE ")}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    missing = []
    for expr in exprs:
        query(prometheus, expr)  # asserts status "success"
        used = {tok.split("[")[0].split("{")[0]
                for tok in expr.replace("(", " ").replace(")", " ").split()
                if tok.startswith("kvpool_")}
        for name in used:
            base = name
            for suffix in ("_bucket", "_count", "_sum"):
                if base.endswith(suffix) and base[:-len(suffix)] in names:
                    base = base[:-len(suffix)]
            if base not in names:
                missing.append((expr, name))
    assert not missing, missing
