"""`/metrics` for the agent, with the kubelet's metric names (pkg/kubelet/metrics), in Prometheus text.

kubelet_node_name{node}=1, kubelet_running_pods, kubelet_running_containers{container_state}
(counted from the agent's records when scraped), kubelet_pod_start_duration_seconds (first seen
to Running), kubelet_pod_worker_duration_seconds{operation} (one sync: create, update, sync,
kill, terminated), kubelet_device_plugin_registration_total{resource_name} and
kubelet_device_plugin_alloc_duration_seconds{resource_name}, and the prober's
prober_probe_total{probe_type,result,container,pod,namespace,pod_uid} (result: successful, failed,
unknown; a probe's series are dropped when it stops, as the kubelet's). A registry of its own, so
several agents in one process (tests) do not collide.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceEvent
    from agent.container.podview import PodView
    from agent.prober.spec import ProbeSpec
    from kubenode.model import Pod

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The kubelet's buckets for pod start and worker durations (seconds).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120, 300, 600)
ALLOC_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)


class _RunningCollector(Collector):
    def __init__(self, views: Callable[[], Sequence[PodView]]) -> None:
        self._views = views

    def collect(self) -> Iterator[Metric]:
        pods = 0
        states = {"running": 0, "exited": 0, "created": 0, "unknown": 0}
        for view in self._views():
            containers = list(view.record.containers.values())
            if any(c.state == "running" for c in containers):
                pods += 1
            for c in containers:
                if c.state == "running":
                    states["running"] += 1
                elif c.state == "terminated":
                    states["exited"] += 1
                elif c.pid is None and c.restart_count == 0:
                    states["created"] += 1
                else:
                    states["unknown"] += 1
        running_pods = GaugeMetricFamily(
            "kubelet_running_pods", "Number of pods that have a running pod sandbox"
        )
        running_pods.add_metric([], pods)
        yield running_pods
        containers_family = GaugeMetricFamily(
            "kubelet_running_containers", "Number of containers currently running", labels=["container_state"]
        )
        for state, count in states.items():
            containers_family.add_metric([state], count)
        yield containers_family


class AgentMetrics:
    def __init__(self, node_name: str, views: Callable[[], Sequence[PodView]]) -> None:
        self.registry = CollectorRegistry()
        node = Gauge(
            "kubelet_node_name", "The node's name. The count is always 1.", ["node"], registry=self.registry
        )
        node.labels(node_name).set(1)
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.pod_worker_duration = Histogram(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: create, update, "
            "or sync",
            ["operation"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registrations = Counter(
            "kubelet_device_plugin_registration",
            "Cumulative number of device plugin registrations. Broken down by resource name.",
            ["resource_name"],
            registry=self.registry,
        )
        self.alloc_duration = Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
            ["resource_name"],
            buckets=ALLOC_BUCKETS,
            registry=self.registry,
        )
        self.probes = Counter(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            ["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            registry=self.registry,
        )
        self.registry.register(_RunningCollector(views))

    def probe_counted(self, spec: ProbeSpec, pod: Pod, result: str | None) -> None:
        """One probe's result (successful, failed, unknown); None: the probe stopped, drop its series."""
        labels = (spec.kind.value, spec.container, pod.name, pod.namespace, pod.uid)
        if result is not None:
            self.probes.labels(labels[0], result, *labels[1:]).inc()
            return
        for outcome in ("successful", "failed", "unknown"):
            with contextlib.suppress(KeyError):
                self.probes.remove(labels[0], outcome, *labels[1:])

    def pod_synced(self, uid: str, operation: str, seconds: float | None) -> None:
        del uid
        if seconds is not None:
            self.pod_worker_duration.labels(operation).observe(seconds)

    def device_event(self, event: DeviceEvent) -> None:
        if event.kind == "registered":
            self.registrations.labels(event.resource).inc()
        elif event.kind == "allocated":
            self.alloc_duration.labels(event.resource).observe(event.seconds)

    def route(self) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE, generate_latest(self.registry)
