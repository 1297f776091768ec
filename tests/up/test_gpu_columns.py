"""The GPU columns of `kubenode up`'s table: one real HTTP scrape of dcgm-exporter's series, produced by the
GPU backend's metrics collector over the fake NVML (harness/fakegpu.py) with a pod holding a GPU through a
real PodResources socket; and no GPU columns when no GPU plugin serves them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cli.up.gpuusage import scrape
from cli.up.table import render, rows
from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.backends.nvml import GpuSample
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.gpumetrics import GpuMetricsCollector
from harness.fakegpu import TelemetryNvml, gpu_info, podresources_server
from kubenode.metricshttp import MetricsServer


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main"}]},
        "status": {"phase": "Running", "qosClass": "BestEffort"},
    }


@pytest.fixture
def gpu_metrics_url(tmp_path: Path) -> Iterator[str]:
    """/metrics of a GPU backend with two fake H100s: ml/trainer holds the busy one, the other is free."""
    gpus = [gpu_info(0, 0), gpu_info(1, 1)]
    nvml = TelemetryNvml(gpus)
    nvml.samples[gpus[0].uuid] = GpuSample(gpus[0].uuid, 87, 30000, 51559, 61, 312.25, 123456789, ())
    options = GpuOptions(pod_resources_socket=str(tmp_path / "pr.sock"), proc_root=str(tmp_path))
    backend = GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml)
    backend.start(lambda: None)
    source = backend.metrics_source()
    assert source is not None
    registry = CollectorRegistry()
    registry.register(GpuMetricsCollector([source], hostname="node-1"))
    server = MetricsServer(lambda: generate_latest(registry), "127.0.0.1", 0)
    server.start()
    try:
        with podresources_server(tmp_path / "pr.sock") as podresources:
            podresources.hold("ml", "trainer", "main", "nvidia.com/gpu", [gpus[0].uuid])
            yield f"http://127.0.0.1:{server.port}/metrics"
    finally:
        server.stop()
        backend.stop()


def test_a_pod_holding_a_gpu_shows_its_utilization_and_memory(gpu_metrics_url: str) -> None:
    usage = scrape(gpu_metrics_url)
    pods = [_pod("ml", "trainer"), _pod("default", "cpu-only")]
    lines = render(rows(pods, {}, usage), gpu_columns=True).splitlines()
    assert lines[0].split()[-2:] == ["GPU-UTIL", "GPU-MEM"]
    assert lines[1].split()[:2] == ["default", "cpu-only"]
    assert lines[1].split()[-2:] == ["-", "-"]  # holds no GPU
    assert lines[2].split()[:2] == ["ml", "trainer"]
    assert lines[2].split()[-2:] == ["87%", "30000Mi"]


def test_no_gpu_plugin_no_gpu_columns_and_a_dead_endpoint_shows_dashes() -> None:
    pods = [_pod("ml", "trainer")]
    assert "GPU-UTIL" not in render(rows(pods, {}, None))
    unanswered = scrape("http://127.0.0.1:9/metrics")  # the discard port: nothing listens
    assert unanswered == {}
    assert render(rows(pods, {}, unanswered), gpu_columns=True).splitlines()[1].split()[-2:] == ["-", "-"]
