"""Helpers for the agent-in-a-cluster tests: the real agent and device plugin as subprocesses, API reads.

`AgentProcess` runs `kubenode agent --kubeconfig <node kubeconfig> --config <yaml>` with a unique
node name, cgroup root, state, manifest and device-plugin directories, and intervals shortened
through the config file (node status and lease every second, quick retries). It can be killed
(SIGKILL) and started again on the same directories. `close()` stops it and sweeps its cgroup
root, killing whatever pods are left.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import EVENTS, PODS, KubeClient, NotFound
from tests.agent.support import wait_until as agent_wait_until

REPO = Path(__file__).resolve().parents[2]
_STATUS = re.compile(r"status (127\.0\.0\.1:\d+)")


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """The agent tests' wait_until, where an object not (or no longer) in the API counts as not yet."""

    def present() -> Any:
        try:
            return predicate()
        except NotFound:
            return None

    return agent_wait_until(present, timeout, what, poll=interval)


def joined_agent(api: ApiServerProcess, **options: Any) -> Iterator[AgentProcess]:
    """A started agent authenticated as its node (system:node:<name>), closed and swept afterwards
    (for a module-scoped fixture: `yield from joined_agent(api, ...)`)."""
    agent = AgentProcess(api.kubeconfig, **options)
    agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
    try:
        agent.start()
        yield agent
    finally:
        leftovers = agent.close()
        assert not leftovers, f"cgroups left behind: {leftovers}"


def pod_body(
    name: str,
    node: str,
    command: str = "sleep 600",
    *,
    resources: dict[str, Any] | None = None,
    restart_policy: str = "Always",
    grace: int = 30,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", command]}
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": grace,
            "containers": [container],
        },
    }


def pod_status(client: KubeClient, name: str) -> dict[str, Any]:
    status: dict[str, Any] = client.get(PODS, name, "default").get("status") or {}
    return status


def phase_is(client: KubeClient, name: str, phase: str) -> dict[str, Any] | None:
    status = pod_status(client, name)
    return status if status.get("phase") == phase else None


def events_for(
    client: KubeClient, name: str, reason: str, namespace: str = "default"
) -> list[dict[str, Any]]:
    page = client.list(EVENTS, namespace, field_selector=f"involvedObject.name={name},reason={reason}")
    return list(page.get("items") or [])


def gone(client: KubeClient, name: str) -> bool:
    try:
        client.get(PODS, name, "default")
    except NotFound:
        return True
    return False
