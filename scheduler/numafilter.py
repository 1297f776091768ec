"""The NUMA plugin's state and its two steps in a scheduling cycle (see scheduler/numa.py for the model).

`TopologyStore` holds each node's published NodeResourceTopology and, per node, its effective
topology (the pods the scheduler placed there but the node does not account for yet, replayed on
top), recomputed only when the topology or the node's pods change. `filter_numa` turns down the
feasible nodes whose Topology Manager would refuse the pod and returns where it would go on the
others; `numa_scores` turns those placements into LeastNUMANodes scores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from kubenode.model.objects import Pod
from scheduler.filters import FilterResult
from scheduler.nodetable import NodeTable
from scheduler.numa import PLUGIN, NodeTopology, Placement, effective, least_numa_score, place, requests_zoned

Int64Array = npt.NDArray[np.int64]


class TopologyStore:
    def __init__(self) -> None:
        self.topologies: dict[str, NodeTopology] = {}
        # node -> (the published topology, the pods replayed on it, the result): reused while both hold
        self._effective: dict[str, tuple[NodeTopology, frozenset[str], NodeTopology]] = {}
        self.resources: frozenset[str] = frozenset()

    def put(self, topology: NodeTopology) -> NodeTopology | None:
        old = self.topologies.get(topology.node)
        self.topologies[topology.node] = topology
        self._changed()
        return old

    def remove(self, node: str) -> None:
        self._effective.pop(node, None)
        if self.topologies.pop(node, None) is not None:
            self._changed()

    def _changed(self) -> None:
        self.resources = frozenset(r for t in self.topologies.values() for r in t.resources)

    def applies_to(self, pod: Pod) -> bool:
        return bool(self.topologies) and requests_zoned(pod, self.resources)

    def admits(self, pod: Pod, node: str, pods_on: Callable[[], Iterable[Pod]]) -> bool:
        """Whether the node's Topology Manager would take the pod now (True without a topology)."""
        if not self.applies_to(pod):
            return True
        topology = self.effective_for(node, pods_on())
        return topology is None or place(topology, pod).topology is not None

    def effective_for(self, node: str, pods: Iterable[Pod]) -> NodeTopology | None:
        topology = self.topologies.get(node)
        if topology is None:
            return None
        pending = [
            p for p in pods if p.key not in topology.accounted and requests_zoned(p, topology.resources)
        ]
        keys = frozenset(p.key for p in pending)
        cached = self._effective.get(node)
        if cached is not None and cached[0] is topology and cached[1] == keys:
            return cached[2]
        result = effective(topology, pending)
        self._effective[node] = (topology, keys, result)
        return result


def filter_numa(
    store: TopologyStore,
    table: NodeTable,
    pod: Pod,
    result: FilterResult,
    pods_on: Callable[[str], Iterable[Pod]],
) -> dict[int, Placement]:
    """Turn down the feasible nodes that would refuse the pod; the placements on those that keep it."""
    placements: dict[int, Placement] = {}
    if not store.applies_to(pod):
        return placements
    refused: dict[str, npt.NDArray[np.bool_]] = {}
    for slot in np.flatnonzero(result.feasible):
        name = table.node(int(slot)).name
        topology = store.effective_for(name, pods_on(name))
        if topology is None:
            continue
        placement = place(topology, pod)
        if placement.topology is None:
            refused.setdefault(placement.reason, np.zeros(len(result.feasible), bool))[slot] = True
        else:
            placements[int(slot)] = placement
    for reason, bad in refused.items():
        result.reject(PLUGIN, reason, bad)
    return placements


def numa_scores(placements: dict[int, Placement], size: int) -> Int64Array:
    """LeastNUMANodes per slot; 0 for a node without a published topology."""
    scores = np.zeros(size, np.int64)
    for slot, placement in placements.items():
        scores[slot] = least_numa_score(placement)
    return scores
