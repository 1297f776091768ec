"""Prometheus metrics for `kubenode deviceplugin --metrics-bind-address`, with /healthz, on one listener.

Flow: the manager and each resource's gRPC service report events to a `PluginRecorder`
(registrations, Allocate calls); without the flag that is `NO_METRICS`, whose methods do
nothing, and prometheus_client is never imported (the plugin's RSS stays low:
tests/deviceplugin/test_import_footprint.py). With the flag, `serve_metrics` builds a
`PrometheusRecorder` (counters and a histogram, updated as events happen) plus a collector
that reads the device state and open ListAndWatch streams when scraped, so gauges are
never stale. Names follow the kubelet's device-plugin metrics
(kubelet_device_plugin_registration_total, kubelet_device_plugin_alloc_duration_seconds)
and NVIDIA's device plugin (per resource, per health), under the `kubenode_deviceplugin_`
prefix:

- kubenode_deviceplugin_devices{resource,health}            gauge (health: Healthy, Unhealthy)
- kubenode_deviceplugin_allocations_total{resource,result}  counter (result: success, error)
- kubenode_deviceplugin_allocation_duration_seconds{resource} histogram of Allocate calls
- kubenode_deviceplugin_listandwatch_streams{resource}      gauge (open streams)
- kubenode_deviceplugin_registrations_total{resource,result} counter (result: success, error)

With gpu resources whose NVML gives telemetry, deviceplugin.gpumetrics adds dcgm-exporter's
per-pod GPU metrics (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) to the same registry.

Served by `kubenode.metricshttp`: /healthz (and /livez) answer 200 "ok" while the manager's loop
runs; /readyz also needs every resource registered with the kubelet (500 naming what is not).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from deviceplugin.gpumetrics import GpuSource
    from deviceplugin.manager import PluginManager
    from kubenode.metricshttp import MetricsServer

# Allocate is a lookup plus a few env strings: sub-millisecond usually; the kubelet's buckets.
ALLOC_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)


class PluginRecorder:
    """Where the plugin reports events; this base records nothing (no --metrics-bind-address)."""

    def registration(self, resource: str, ok: bool) -> None:
        pass

    def allocation(self, resource: str, ok: bool, seconds: float) -> None:
        pass


NO_METRICS = PluginRecorder()


class PrometheusRecorder(PluginRecorder):
    def __init__(self, manager: PluginManager) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self._registrations = Counter(
            "kubenode_deviceplugin_registrations",
            "Cumulative number of Register calls to the kubelet, by result",
            ["resource", "result"],
            registry=self.registry,
        )
        self._allocations = Counter(
            "kubenode_deviceplugin_allocations",
            "Cumulative number of Allocate calls served, by result",
            ["resource", "result"],
            registry=self.registry,
        )
        self._allocation_duration = Histogram(
            "kubenode_deviceplugin_allocation_duration_seconds",
            "Duration in seconds to serve an Allocate request",
            ["resource"],
            buckets=ALLOC_BUCKETS,
            registry=self.registry,
        )
        for resource in manager.resources:  # every series exists from the start, at 0
            name = resource.config.name
            self._allocation_duration.labels(name)
            for result in ("success", "error"):
                self._registrations.labels(name, result)
                self._allocations.labels(name, result)
        self.registry.register(_StateCollector(manager))
        gpu_sources = _gpu_sources(manager)
        if gpu_sources:
            from deviceplugin.gpumetrics import GpuMetricsCollector

            self.registry.register(GpuMetricsCollector(gpu_sources))

    def registration(self, resource: str, ok: bool) -> None:
        self._registrations.labels(resource, "success" if ok else "error").inc()

    def allocation(self, resource: str, ok: bool, seconds: float) -> None:
        self._allocations.labels(resource, "success" if ok else "error").inc()
        self._allocation_duration.labels(resource).observe(seconds)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


class _StateCollector:
    """Device counts and open streams, read from the manager at scrape time."""

    def __init__(self, manager: PluginManager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        devices = GaugeMetricFamily(
            "kubenode_deviceplugin_devices",
            "Number of devices advertised to the kubelet, by health",
            labels=["resource", "health"],
        )
        streams = GaugeMetricFamily(
            "kubenode_deviceplugin_listandwatch_streams",
            "Number of ListAndWatch streams open",
            labels=["resource"],
        )
        for resource in self._manager.resources:
            _, listed = resource.state.snapshot()
            healthy = sum(1 for d in listed if d.healthy)
            devices.add_metric([resource.config.name, "Healthy"], healthy)
            devices.add_metric([resource.config.name, "Unhealthy"], len(listed) - healthy)
            streams.add_metric([resource.config.name], resource.endpoint.open_streams())
        yield devices
        yield streams


def _gpu_sources(manager: PluginManager) -> list[GpuSource]:
    from deviceplugin.backends.gpu import GpuBackend
    from deviceplugin.replicas import ReplicatedBackend

    sources = []
    for resource in manager.resources:
        backend = resource.backend
        if isinstance(backend, ReplicatedBackend):
            backend = backend.inner
        source = backend.metrics_source() if isinstance(backend, GpuBackend) else None
        if source is not None:
            sources.append(source)
    return sources


def serve_metrics(manager: PluginManager, address: str) -> MetricsServer:
    """Attach a Prometheus recorder to `manager` and start serving; raises ValueError/OSError."""
    # Imported here: without the flag the plugin loads neither http.server nor prometheus_client.
    from kubenode.metricshttp import MetricsServer, parse_bind_address

    host, port = parse_bind_address(address)
    recorder = PrometheusRecorder(manager)
    manager.set_recorder(recorder)

    def registered() -> str | None:
        missing = manager.unregistered()
        return f"not registered with the kubelet: {', '.join(missing)}" if missing else None

    server = MetricsServer(recorder.exposition, host, port)
    server.checks["loop"] = manager.loop_problem
    server.ready_checks["registration"] = registered
    server.start()
    return server
