"""The NodeResourceTopology object a node publishes (topology.node.k8s.io/v1alpha2).

One zone per NUMA node ("node-<id>", type Node) with its distances as `costs` and, per device
resource with topology, capacity (every device), allocatable (healthy) and available (healthy and
free). Attributes: `topologyManagerPolicy`, `topologyManagerScope` (the names NFD's topology updater
publishes), and `kubenode.io/pods`, the pods (namespace/name) whose devices the availability already
reflects, so a scheduler knows which of the pods it placed it must still count itself. The legacy
`topologyPolicies` field carries the v1alpha1 name of the policy and scope.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from agent.cm.topologymanager.devicehints import DeviceNUMA

API_VERSION = "topology.node.k8s.io/v1alpha2"
KIND = "NodeResourceTopology"
PODS_ATTRIBUTE = "kubenode.io/pods"
_LEGACY = {
    ("single-numa-node", "container"): "SingleNUMANodeContainerLevel",
    ("single-numa-node", "pod"): "SingleNUMANodePodLevel",
    ("restricted", "container"): "RestrictedContainerLevel",
    ("restricted", "pod"): "RestrictedPodLevel",
    ("best-effort", "container"): "BestEffortContainerLevel",
    ("best-effort", "pod"): "BestEffortPodLevel",
}


def zone_counts(
    devices: DeviceNUMA, healthy: Collection[str], free: Collection[str]
) -> dict[int, tuple[int, int, int]]:
    """Per NUMA node: (capacity, allocatable, available) of one resource; a device spanning several
    nodes counts on its first. Devices without a node are left out."""
    counts: dict[int, list[int]] = {}
    healthy_set, free_set = set(healthy), set(free)
    for device, numa in devices.items():
        if not numa:
            continue
        entry = counts.setdefault(min(numa), [0, 0, 0])
        entry[0] += 1
        if device in healthy_set:
            entry[1] += 1
            if device in free_set:
                entry[2] += 1
    return {node: (c[0], c[1], c[2]) for node, c in counts.items()}


def topology_object(
    node: str,
    policy: str,
    scope: str,
    numa_nodes: Iterable[int],
    resources: Mapping[str, Mapping[int, tuple[int, int, int]]],
    distances: Mapping[int, list[int]] | None = None,
    accounted_pods: Iterable[str] = (),
) -> dict[str, Any]:
    nodes = sorted(numa_nodes)
    zones = []
    for numa in nodes:
        zone: dict[str, Any] = {"name": f"node-{numa}", "type": "Node"}
        row = (distances or {}).get(numa)
        if row:
            zone["costs"] = [
                {"name": f"node-{other}", "value": row[other]} for other in nodes if other < len(row)
            ]
        zone["resources"] = [
            {"name": name, "capacity": str(c), "allocatable": str(a), "available": str(v)}
            for name, per_node in sorted(resources.items())
            for c, a, v in [per_node.get(numa, (0, 0, 0))]
            if c
        ]
        zones.append(zone)
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": node},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
            {"name": PODS_ATTRIBUTE, "value": ",".join(sorted(accounted_pods))},
        ],
        "zones": zones,
    }
    if (policy, scope) in _LEGACY or policy == "none":
        body["topologyPolicies"] = [_LEGACY.get((policy, scope), "None")]
    return body
