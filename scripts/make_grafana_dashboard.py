#!/usr/bin/env python3
"""Writes docs/grafana/kvpool.json, the Grafana dashboard on kvpool's metrics
(docs/metrics.md). Panels are listed here once; rerun after adding one."""

import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}


def q(expr, legend):
    return {"expr": expr, "legendFormat": legend, "datasource": DS}


def quantiles(metric, by="", sel="", window="1m"):
    group = "le" + ("," + by if by else "")
    out = []
    for p in ("0.5", "0.99"):
        legend = "p%s" % p[2:].ljust(2, "0") + (" {{%s}}" % by if by else "")
        out.append(q("histogram_quantile(%s, sum by (%s) (rate(%s_bucket%s[%s])))"
                     % (p, group, metric, sel, window), legend))
    return out


PANELS = [
    ("Master RPC latency by method", "s", quantiles(
        "kvpool_master_rpc_duration_seconds", by="method")),
    ("Master RPC rate by method", "reqps", [q(
        "sum by (method) (rate(kvpool_master_rpc_duration_seconds_count[1m]))",
        "{{method}}")]),
    ("Data-plane request latency (node)", "s", quantiles(
        "kvpool_node_data_request_duration_seconds", by="op")),
    ("Data-plane request size (node)", "bytes", quantiles(
        "kvpool_node_data_request_bytes", by="op")),
    ("Client call latency by path", "s", quantiles(
        "kvpool_client_op_duration_seconds", by="op,path")),
    ("Promotion latency vs prefetch window", "s",
     quantiles("kvpool_master_promotion_duration_seconds", by="source",
               window="5m")
     + quantiles("kvpool_master_prefetch_window_seconds", window="5m")),
    ("Prefetch fates", "ops", [q(
        "sum by (fate) (rate(kvpool_master_prefetch_fate_total[5m]))",
        "{{fate}}")]),
    ("Router triggers by status", "ops", [q(
        "sum by (status) (rate(kvpool_master_prefetch_trigger_total[5m]))",
        "{{status}}")]),
    ("Offload latency (queued to acknowledged)", "s", quantiles(
        "kvpool_master_offload_duration_seconds", window="5m")),
    ("SSD batch times (node)", "s",
     quantiles("kvpool_node_ssd_write_duration_seconds")
     + quantiles("kvpool_node_ssd_read_duration_seconds")),
    ("DRAM watermark", "percentunit", [q(
        "kvpool_master_watermark_ratio", "{{kind}}")]),
    ("DRAM used and capacity", "bytes", [
        q("kvpool_master_segment_used_bytes", "used {{kind}}"),
        q("kvpool_master_segment_capacity_bytes", "capacity {{kind}}")]),
    ("Keys by result", "ops", [q(
        "sum by (result) (rate(kvpool_master_gets_total[1m]))", "get {{result}}"),
        q("sum by (result) (rate(kvpool_master_puts_total[1m]))",
          "put {{result}}")]),
    ("Evicted bytes", "Bps", [q(
        "rate(kvpool_master_evicted_bytes_total[1m])", "evicted")]),
]


def dashboard():
    panels = []
    for i, (title, unit, targets) in enumerate(PANELS):
        panels.append({
            "id": i + 1,
            "type": "timeseries",
            "title": title,
            "datasource": DS,
            "gridPos": {"x": (i % 2) * 12, "y": (i // 2) * 8, "w": 12, "h": 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [dict(t, refId=chr(ord("A") + k))
                        for k, t in enumerate(targets)],
        })
    return {
        "title": "kvpool",
        "uid": "kvpool",
        "schemaVersion": 37,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "templating": {"list": [{
            "name": "datasource", "type": "datasource", "query": "prometheus",
            "label": "Prometheus"}]},
        "panels": panels,
    }


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "grafana",
                        "kvpool.json")
    with open(path, "w") as f:
        json.dump(dashboard(), f, indent=1)
        f.write("\n")
