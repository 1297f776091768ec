"""Probes through the real API server and agent: `kubectl wait --for=condition=Ready` returns only once the
readiness probe (an exec in the pod's cgroup with the container's env) passes; a liveness probe that starts
failing restarts the container with the kubelet's Unhealthy and Killing events; a probe naming a port the
container does not declare is an errored probe, and the agent goes on serving; prober_probe_total counts."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.support import events_for, joined_agent, phase_is, pod_body, pod_status, wait_until

KUBECTL = Path(__file__).resolve().parents[2] / ".venv/bin/kubectl"


@pytest.fixture(scope="module")
def node(api: ApiServerProcess) -> Iterator[AgentProcess]:
    yield from joined_agent(api)


def kubectl(node: AgentProcess, *args: str) -> list[str]:
    return [str(KUBECTL), "--kubeconfig", str(node.kubeconfig.parent / "admin.kubeconfig"), *args]


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kubectl_wait_returns_once_the_readiness_probe_passes(
    node: AgentProcess, admin: KubeClient, tmp_path: Path
) -> None:
    marker = tmp_path / "ready"
    body = pod_body("gated", node.node)
    container = body["spec"]["containers"][0]
    container["env"] = [{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
    # Passes only with the marker, and only when run in the pod's cgroup with the container's env.
    check = f'test -f {marker} && grep -q "pod$POD_UID" /proc/self/cgroup'
    container["readinessProbe"] = {"exec": {"command": ["sh", "-c", check]}, "periodSeconds": 1}
    admin.create(PODS, body, "default")
    wait_until(lambda: phase_is(admin, "gated", "Running"), 20, "gated Running")
    waiter = subprocess.Popen(
        kubectl(node, "wait", "--for=condition=Ready", "pod/gated", "--timeout=60s"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(events_for(admin, "gated", "Unhealthy")) >= 1, 20, "a failed readiness probe")
        status = pod_status(admin, "gated")
        assert condition(status, "Ready")["status"] == "False"
        assert condition(status, "ContainersReady")["message"] == "containers with unready status: [main]"
        assert status["containerStatuses"][0]["started"] is True
        assert status["containerStatuses"][0]["ready"] is False
        assert waiter.poll() is None, waiter.communicate()
        marker.touch()
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert out.strip() == "pod/gated condition met"
    status = pod_status(admin, "gated")
    assert status["containerStatuses"][0]["ready"] is True
    assert condition(status, "ContainersReady")["status"] == "True"
    assert 'probe_type="Readiness",result="successful"' in node.metrics()
    admin.delete(PODS, "gated", "default", grace_period_seconds=0)


def test_a_failing_liveness_probe_restarts_the_container_with_events(
    node: AgentProcess, admin: KubeClient, tmp_path: Path
) -> None:
    port = free_port()
    (tmp_path / "alive").write_text("yes")
    body = pod_body("lively", node.node, f"exec python3 -m http.server {port} --bind 127.0.0.1")
    container = body["spec"]["containers"][0]
    container["workingDir"] = str(tmp_path)
    container["ports"] = [{"name": "http", "containerPort": port}]
    container["livenessProbe"] = {
        "httpGet": {"path": "/alive", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 2,
        "terminationGracePeriodSeconds": 1,  # the pod's 30 s would slow the kill
    }
    admin.create(PODS, body, "default")
    wait_until(lambda: phase_is(admin, "lively", "Running"), 20, "lively Running")
    wait_until(lambda: 'probe_type="Liveness",result="successful"' in node.metrics(), 20, "a passing probe")
    assert pod_status(admin, "lively")["containerStatuses"][0]["restartCount"] == 0
    (tmp_path / "alive").unlink()
    wait_until(
        lambda: pod_status(admin, "lively")["containerStatuses"][0]["restartCount"] >= 1, 30, "a restart"
    )
    killing = wait_until(lambda: events_for(admin, "lively", "Killing"), 10, "the Killing event")
    assert killing[0]["message"] == "Container main failed liveness probe, will be restarted"
    assert killing[0]["involvedObject"]["fieldPath"] == "spec.containers{main}"
    unhealthy = {e["message"]: e["type"] for e in events_for(admin, "lively", "Unhealthy")}
    assert unhealthy["Liveness probe failed: HTTP probe failed with statuscode: 404"] == "Warning"
    (tmp_path / "alive").write_text("yes")
    wait_until(lambda: phase_is(admin, "lively", "Running"), 20, "lively Running again")
    admin.delete(PODS, "lively", "default", grace_period_seconds=0)


def test_a_probe_on_an_undeclared_port_name_errors_and_the_agent_serves_on(
    node: AgentProcess, admin: KubeClient
) -> None:
    body = pod_body("noport", node.node)
    body["spec"]["containers"][0]["readinessProbe"] = {"tcpSocket": {"port": "metrics"}, "periodSeconds": 1}
    admin.create(PODS, body, "default")
    errored = wait_until(lambda: events_for(admin, "noport", "Unhealthy"), 20, "the errored probe's event")
    assert errored[0]["message"] == (
        "Readiness probe errored: port 'metrics' not found in the ports of container main"
    )
    assert condition(pod_status(admin, "noport"), "Ready")["status"] == "False"
    admin.create(PODS, pod_body("neighbour", node.node), "default")
    wait_until(lambda: phase_is(admin, "neighbour", "Running"), 20, "the next pod Running")
    assert condition(pod_status(admin, "neighbour"), "Ready")["status"] == "True"
    for name in ("noport", "neighbour"):
        admin.delete(PODS, name, "default", grace_period_seconds=0)


def test_an_agent_restart_probes_adopted_containers_again_and_a_deleted_pod_is_not_probed(
    node: AgentProcess, admin: KubeClient
) -> None:
    body = pod_body("adopted", node.node)
    body["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    admin.create(PODS, body, "default")
    wait_until(lambda: condition(pod_status(admin, "adopted"), "Ready").get("status") == "True", 20, "Ready")
    node.kill()
    node.start()
    series = 'pod="adopted"'
    wait_until(lambda: series in node.metrics(), 20, "the adopted container probed by the new agent")
    status = pod_status(admin, "adopted")
    assert status["containerStatuses"][0]["restartCount"] == 0  # adopted, not restarted
    wait_until(lambda: condition(pod_status(admin, "adopted"), "Ready").get("status") == "True", 20, "Ready")
    admin.delete(PODS, "adopted", "default")
    wait_until(lambda: series not in node.metrics(), 30, "the deleted pod's probe series gone")
