"""The live scheduler reading NodeResourceTopology objects from a real `kubenode apiserver`: a pod is
bound only to a node whose Topology Manager can align it; one no node can align waits with the
plugin's reason and is bound once a node publishes room for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubenode.kubeclient import NODE_RESOURCE_TOPOLOGIES, PODS, KubeClient, load_kubeconfig
from scheduler.profile import Configuration
from scheduler.runner import LiveScheduler, RunOptions
from tests.scheduler_live.support import client_for, create_all, node, pod, wait_for

CPU, GPU = "kubenode.io/cpu", "kubenode.io/gpu"


def nrt(
    name: str, zones: list[dict[str, int]], available: list[dict[str, int]] | None = None
) -> dict[str, Any]:
    free = available or zones
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
        ],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {
                        "name": r,
                        "capacity": str(n),
                        "allocatable": str(n),
                        "available": str(free[i].get(r, 0)),
                    }
                    for r, n in zone.items()
                ],
            }
            for i, zone in enumerate(zones)
        ],
    }


@pytest.fixture
def scheduler(apiserver: Any) -> Iterator[LiveScheduler]:
    live = LiveScheduler(load_kubeconfig(apiserver.kubeconfig), RunOptions(config=Configuration()))
    live.start()
    try:
        yield live
    finally:
        live.stop()


def node_of(client: KubeClient, name: str) -> str:
    return str(client.get(PODS, name, "default")["spec"].get("nodeName") or "")


def test_pods_land_only_where_they_align(apiserver: Any, admin: KubeClient, scheduler: LiveScheduler) -> None:
    extra = {CPU: "16", GPU: "2"}
    create_all(admin, [node("split", cpu="16", **extra), node("together", cpu="16", **extra)])
    admin.create(NODE_RESOURCE_TOPOLOGIES, nrt("split", [{CPU: 12}, {CPU: 4, GPU: 2}]))
    admin.create(NODE_RESOURCE_TOPOLOGIES, nrt("together", [{CPU: 8, GPU: 1}, {CPU: 8, GPU: 1}]))
    wait_for(lambda: len(scheduler.engine.topologies.topologies) == 2, 10, "both topologies in the scheduler")
    admin.create(PODS, pod("aligned", cpu="1", extra={CPU: "8", GPU: "1"}), "default")
    assert wait_for(lambda: node_of(admin, "aligned"), 20, "aligned bound") == "together"
    admin.create(PODS, pod("wide", cpu="1", extra={CPU: "9", GPU: "1"}), "default")

    def wide_condition() -> str:
        conditions = admin.get(PODS, "wide", "default").get("status", {}).get("conditions") or []
        return next((str(c.get("message")) for c in conditions if c.get("type") == "PodScheduled"), "")

    message = wait_for(wide_condition, 20, "wide's PodScheduled condition")
    assert "1 cannot align container" in message and node_of(admin, "wide") == ""
    # "split" gets its CPUs next to the GPUs: the waiting pod is retried on the update and bound there.
    current = admin.get(NODE_RESOURCE_TOPOLOGIES, "split")
    current.update(nrt("split", [{CPU: 4}, {CPU: 12, GPU: 2}]))
    admin.update(NODE_RESOURCE_TOPOLOGIES, current)
    assert wait_for(lambda: node_of(admin, "wide"), 20, "wide bound after the update") == "split"


@pytest.fixture
def admin(apiserver: Any) -> Iterator[KubeClient]:
    client = client_for(apiserver.kubeconfig)
    yield client
    client.close()
