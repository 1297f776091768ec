"""The agent's /metrics text (agent/server/promtext.py, without prometheus_client) reads back through
prometheus_client's own parser with the kubelet's names, labels, buckets and values."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from agent.server.metrics import AgentMetrics


class Event:
    def __init__(self, kind: str, resource: str, seconds: float = 0.0) -> None:
        self.kind, self.resource, self.seconds = kind, resource, seconds


def samples(metrics: AgentMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, content_type, body = metrics.route()
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_histograms_counters_and_gauges_read_back_through_prometheus_clients_parser() -> None:
    metrics = AgentMetrics('node "a"\\b', lambda: [])
    for seconds in (0.003, 0.003, 2.0):
        metrics.pod_synced("uid", "create", seconds)
    metrics.pod_start_duration.observe(0.4)
    metrics.device_event(Event("registered", "example.com/dongle"))  # type: ignore[arg-type]
    metrics.device_event(Event("registered", "example.com/dongle"))  # type: ignore[arg-type]
    metrics.device_event(Event("allocated", "example.com/dongle", 0.0002))  # type: ignore[arg-type]
    found = samples(metrics)

    assert found[("kubelet_node_name", (("node", 'node "a"\\b'),))] == 1
    create = (("operation", "create"),)
    bucket = "kubelet_pod_worker_duration_seconds_bucket"
    assert found[(bucket, (("le", "0.005"), ("operation", "create")))] == 2
    assert found[(bucket, (("le", "1.0"), ("operation", "create")))] == 2
    assert found[(bucket, (("le", "2.5"), ("operation", "create")))] == 3
    assert found[(bucket, (("le", "+Inf"), ("operation", "create")))] == 3
    assert found[("kubelet_pod_worker_duration_seconds_count", create)] == 3
    assert abs(found[("kubelet_pod_worker_duration_seconds_sum", create)] - 2.006) < 1e-9
    assert found[("kubelet_pod_start_duration_seconds_count", ())] == 1
    dongle = (("resource_name", "example.com/dongle"),)
    assert found[("kubelet_device_plugin_registration_total", dongle)] == 2
    assert found[("kubelet_device_plugin_alloc_duration_seconds_count", dongle)] == 1
    assert found[("kubelet_running_pods", ())] == 0


def test_a_stopped_probe_drops_its_series() -> None:
    metrics = AgentMetrics("node", lambda: [])

    class Spec:
        kind: Any = type("Kind", (), {"value": "Readiness"})()
        container = "main"

    class Pod:
        name, namespace, uid = "web", "default", "u1"

    metrics.probe_counted(Spec(), Pod(), "successful")  # type: ignore[arg-type]
    metrics.probe_counted(Spec(), Pod(), "successful")  # type: ignore[arg-type]
    labels = (
        ("container", "main"),
        ("namespace", "default"),
        ("pod", "web"),
        ("pod_uid", "u1"),
        ("probe_type", "Readiness"),
        ("result", "successful"),
    )
    assert samples(metrics)[("prober_probe_total", labels)] == 2
    metrics.probe_counted(Spec(), Pod(), None)  # type: ignore[arg-type]
    assert not [key for key in samples(metrics) if key[0] == "prober_probe_total"]
