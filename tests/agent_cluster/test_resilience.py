"""The API server killed for a while and brought back, and the agent SIGKILLed and restarted: pods keep
running, nothing is started twice, deletions made meanwhile are carried out, queued status arrives.

The outage lasts KUBENODE_TEST_API_OUTAGE_S seconds (default 20, as the issue asks; set it lower for a
quick run)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import LEASES, NODES, PODS, KubeClient
from kubenode.kubeclient.timefmt import parse_time
from tests.agent_cluster.support import events_for, gone, phase_is, pod_body, pod_status, wait_until

OUTAGE_S = float(os.environ.get("KUBENODE_TEST_API_OUTAGE_S", "20"))


def _agent_pids(agent: AgentProcess) -> dict[str, int]:
    """Pod name -> pid of its container, from the agent's own /pods endpoint."""
    with urllib.request.urlopen(f"http://{agent.status_address}/pods", timeout=5) as response:
        document = json.load(response)
    pids = {}
    for item in document["items"]:
        for c in item["status"]["containerStatuses"]:
            if c.get("pid"):
                pids[item["metadata"]["name"]] = int(c["pid"])
    return pids


def _pids_of(agent: AgentProcess, *names: str) -> dict[str, int] | None:
    pids = _agent_pids(agent)
    return pids if set(names) <= set(pids) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _running(admin: KubeClient, names: list[str]) -> Callable[[], bool]:
    return lambda: all(phase_is(admin, n, "Running") for n in names)


def test_api_server_outage_loses_and_doubles_nothing(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent().start()
    for name in ("keep", "drop"):
        admin.create(PODS, pod_body(f"{name}-{agent.node}", agent.node), "default")
    finisher = f"finish-{agent.node}"
    admin.create(
        PODS, pod_body(finisher, agent.node, f"sleep {OUTAGE_S / 2}", restart_policy="Never"), "default"
    )
    keep, drop = f"keep-{agent.node}", f"drop-{agent.node}"
    wait_until(_running(admin, [keep, drop, finisher]), 20, "three pods Running")
    pids = wait_until(lambda: _pids_of(agent, keep, drop), 5, "the pods' pids")

    api.kill()
    killed_at = time.time()
    time.sleep(OUTAGE_S)
    assert all(_alive(pids[n]) for n in (keep, drop)), "a pod died while the API server was away"
    api.restart()

    # The status written while the server was away (the finisher completed) arrives.
    wait_until(lambda: phase_is(admin, finisher, "Succeeded"), 20, "the finisher's Succeeded status")
    # The watch is back: a deletion and a new pod are carried out.
    admin.delete(PODS, drop, "default", grace_period_seconds=1)
    new = f"new-{agent.node}"
    admin.create(PODS, pod_body(new, agent.node), "default")
    wait_until(lambda: gone(admin, drop), 20, "the deleted pod gone")
    wait_until(lambda: not _alive(pids[drop]), 5, "the deleted pod's process stopped")
    wait_until(lambda: phase_is(admin, new, "Running"), 20, "the new pod Running")
    # Nothing was started twice.
    status = pod_status(admin, keep)
    assert status["phase"] == "Running" and status["containerStatuses"][0]["restartCount"] == 0
    assert _agent_pids(agent)[keep] == pids[keep]
    # The heartbeat resumed.
    wait_until(
        lambda: parse_time(admin.get(LEASES, agent.node, "kube-node-lease")["spec"]["renewTime"]) > killed_at,
        10,
        "a Lease renewal after the outage",
    )


def test_agent_sigkill_and_restart_adopts_running_pods(
    admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent().start()
    keep, drop, later = (f"{n}-{agent.node}" for n in ("keep", "drop", "later"))
    for name in (keep, drop):
        admin.create(PODS, pod_body(name, agent.node), "default")
    wait_until(_running(admin, [keep, drop]), 20, "two pods Running")
    pids = wait_until(lambda: _pids_of(agent, keep, drop), 5, "the pods' pids")
    uid_before = admin.get(PODS, keep, "default")["metadata"]["uid"]

    agent.kill()
    # While the agent is down: one pod is deleted (it waits for the node), another is bound to the node.
    deleting: dict[str, Any] = admin.delete(PODS, drop, "default", grace_period_seconds=5)
    assert deleting["metadata"].get("deletionTimestamp"), "the pod should wait for its node to stop it"
    admin.create(PODS, pod_body(later, agent.node), "default")
    assert _alive(pids[keep]) and _alive(pids[drop])

    agent.start()
    wait_until(lambda: gone(admin, drop), 20, "the pod deleted meanwhile gone")
    wait_until(lambda: not _alive(pids[drop]), 5, "its process stopped")
    wait_until(lambda: phase_is(admin, later, "Running"), 20, "the pod bound meanwhile Running")
    assert _agent_pids(agent)[keep] == pids[keep], "the running pod was restarted instead of adopted"
    status = pod_status(admin, keep)
    assert status["phase"] == "Running" and status["containerStatuses"][0]["restartCount"] == 0
    assert admin.get(PODS, keep, "default")["metadata"]["uid"] == uid_before
    started = [e for e in events_for(admin, keep, "Started")]
    assert len(started) == 1 and started[0]["count"] == 1, (
        "an adopted container was reported as started again"
    )


def test_existing_node_is_taken_over_not_duplicated(
    admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent()
    stale = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting",
    }
    admin.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": agent.node, "labels": {"keep": "me"}},
            "status": {"conditions": [stale], "capacity": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
        },
    )
    uid = admin.get(NODES, agent.node)["metadata"]["uid"]
    agent.start()

    def ready() -> dict[str, Any] | None:
        node = admin.get(NODES, agent.node)
        conditions = {c["type"]: c for c in node["status"].get("conditions") or []}
        return node if conditions.get("Ready", {}).get("status") == "True" else None

    node = wait_until(ready, 20, "the existing Node taken over and Ready")
    assert node["metadata"]["uid"] == uid
    assert node["metadata"]["labels"]["keep"] == "me"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == agent.node
    assert node["status"]["capacity"]["pods"] == "110"
