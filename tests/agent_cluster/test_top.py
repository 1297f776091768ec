"""`kubectl top` end to end: the agent's /stats/summary and /metrics/resource from its cgroups, and the API
server's metrics.k8s.io computed from them, read by the real kubectl (top node, top pod, get --raw), with the
agent listening on the host's address as `kubenode up` runs it."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.hostnet import host_ip
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.support import joined_agent, phase_is, pod_body, wait_until

KUBECTL = Path(__file__).resolve().parents[2] / ".venv/bin/kubectl"
BURN = "while true; do :; done"


@pytest.fixture(scope="module")
def node(api: ApiServerProcess) -> Iterator[AgentProcess]:
    # The API server reaches the agent at the Node's InternalIP (the host's address), as under `kubenode up`.
    yield from joined_agent(api, settings={"listen": f"{host_ip()}:0"})


def kubectl(node: AgentProcess, *args: str) -> subprocess.CompletedProcess[str]:
    admin = str(node.kubeconfig.parent / "admin.kubeconfig")
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", admin, *args], capture_output=True, text=True, timeout=60
    )


def agent_get(node: AgentProcess, path: str) -> bytes:
    with urllib.request.urlopen(f"http://{node.status_address}{path}", timeout=10) as response:
        return bytes(response.read())


@pytest.fixture(scope="module")
def burner(node: AgentProcess, admin: KubeClient) -> Iterator[str]:
    # A quarter of a core at most: enough to see, little to take from a shared machine.
    body = pod_body("burner", node.node, BURN, resources={"limits": {"cpu": "250m", "memory": "64Mi"}})
    body["metadata"]["labels"] = {"app": "burner"}
    admin.create(PODS, body, "default")
    wait_until(lambda: phase_is(admin, "burner", "Running"), 20, "burner Running")
    yield "burner"
    admin.delete(PODS, "burner", "default", grace_period_seconds=0)


def test_the_agent_serves_the_summary_and_resource_metrics(node: AgentProcess, burner: str) -> None:
    summary = json.loads(agent_get(node, "/stats/summary"))
    assert summary["node"]["nodeName"] == node.node
    assert summary["node"]["memory"]["workingSetBytes"] > 0
    assert summary["node"]["rlimit"]["curproc"] > 0
    pod = next(p for p in summary["pods"] if p["podRef"]["name"] == burner)
    assert pod["process_stats"]["process_count"] >= 1
    assert pod["containers"][0]["name"] == "main"

    def burning() -> bool:
        # usageNanoCores is a rate from the previous scrape on; the burner must have run in between.
        again = json.loads(agent_get(node, "/stats/summary"))
        pod = next(p for p in again["pods"] if p["podRef"]["name"] == burner)
        return bool(pod["cpu"]["usageCoreNanoSeconds"] > 0 and pod["cpu"].get("usageNanoCores", 0) > 0)

    wait_until(burning, 20, "the burner's CPU rate in the summary")
    text = agent_get(node, "/metrics/resource").decode()
    for name in (
        "node_cpu_usage_seconds_total",
        "node_memory_working_set_bytes",
        'pod_cpu_usage_seconds_total{namespace="default",pod="burner"}',
        'pod_memory_working_set_bytes{namespace="default",pod="burner"}',
        'container_cpu_usage_seconds_total{container="main",namespace="default",pod="burner"}',
        'container_memory_working_set_bytes{container="main",namespace="default",pod="burner"}',
        "resource_scrape_error 0",
        "scrape_error 0",
    ):
        assert f"\n{name}" in text, name


def test_kubectl_top_node_and_pod(node: AgentProcess, burner: str) -> None:
    top_node = kubectl(node, "top", "node", node.node)
    assert top_node.returncode == 0, top_node.stderr
    header, row = top_node.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    assert row.split()[0] == node.node

    def burner_row() -> list[str] | None:
        # On a loaded machine the burner may have had no CPU in a window: wait for one where it had.
        top_pod = kubectl(node, "top", "pod", "-l", "app=burner", "--containers")
        assert top_pod.returncode == 0, top_pod.stderr
        header, row = top_pod.stdout.splitlines()[:2]
        assert header.split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
        return row.split() if int(row.split()[2].rstrip("m")) > 0 else None

    pod, container, cpu, _memory = wait_until(burner_row, 30, "the burner using CPU in kubectl top pod")
    assert (pod, container) == ("burner", "main")
    assert int(cpu.rstrip("m")) <= 300  # under its 250m limit, allowing for the window's edges
    raw = json.loads(
        kubectl(node, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burner").stdout
    )
    assert raw["kind"] == "PodMetrics" and raw["containers"][0]["usage"]["cpu"].endswith("n")
    table = kubectl(node, "get", "podmetrics.metrics.k8s.io", "burner")
    assert table.returncode == 0, table.stderr
    assert table.stdout.split()[:5] == ["NAME", "CPU", "MEMORY", "WINDOW", "burner"]
    missing = kubectl(node, "top", "pod", "no-such-pod")
    assert missing.returncode != 0
    assert 'podmetrics.metrics.k8s.io "default/no-such-pod" not found' in missing.stderr
