"""The Grafana dashboard in deploy/grafana: every query names only metrics the plugin exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.gpumetrics import GpuMetricsCollector
from harness.fakegpu import TelemetryNvml, gpu_info

DASHBOARD = Path(__file__).parent.parent.parent / "deploy/grafana/gpu-dashboard.json"
# What a query holds besides metric names: PromQL's functions, aggregations and keywords.
PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "by", "without", "rate", "increase", "label_values"}
PLUGIN_METRICS = {"kubenode_deviceplugin_devices"}  # deviceplugin.metrics, tested in test_metrics.py


def exported_names(tmp_path: Path) -> set[str]:
    nvml = TelemetryNvml([gpu_info(0, 0)])
    options = GpuOptions(pod_resources_socket=str(tmp_path / "none.sock"))
    source = GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml).metrics_source()
    assert source is not None
    registry = CollectorRegistry()
    registry.register(GpuMetricsCollector([source]))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {sample.name for family in families for sample in family.samples}


def metric_names(expr: str) -> set[str]:
    bare = re.sub(r"\{[^}]*\}|\[[^]]*\]|\"[^\"]*\"", "", expr)  # label matchers, ranges, strings
    bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)  # grouping labels
    bare = re.sub(r"label_values\(([^,]+),[^)]*\)", r"\1", bare)
    return {word for word in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare) if word not in PROMQL_WORDS}


def test_every_query_names_a_metric_we_export(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    exported = exported_names(tmp_path) | PLUGIN_METRICS
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "kubenode_gpu_xid_events_total"} <= exported
    for query in queries:
        names = metric_names(query)
        assert names, f"no metric in {query!r}"
        assert names <= exported, f"{query!r} names {sorted(names - exported)}, which we do not export"
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
