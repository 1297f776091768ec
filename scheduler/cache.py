"""The scheduler's cache: nodes and the pods assigned to them, including assumed ones.

`assume` counts a pod on its node at once, so the next pod sees the resources used
while binding runs; `forget` undoes it if binding fails. A bound pod reported by the
cluster (`add_pod`) confirms an assumed one. Assumed pods never expire, as in
kube-scheduler since 1.25. Pods on a node the cache does not know yet are kept and
counted once the node arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kubenode.model.objects import Node, Pod
from scheduler.filters import Demand
from scheduler.nodetable import NodeTable


class CacheError(RuntimeError):
    """An assume/forget that contradicts the cache (a scheduler bug, or a racing update)."""


@dataclass
class PodState:
    pod: Pod
    node: str
    demand: Demand
    start_time: float  # seconds since the epoch; preemption prefers victims started later
    assumed: bool = False
    binding_finished: bool = False

    @property
    def priority(self) -> int:
        return self.pod.priority


def parse_start_time(text: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class SchedulerCache:
    def __init__(self, wall_clock: Callable[[], float]) -> None:
        self.table = NodeTable()
        self.pods: dict[str, PodState] = {}
        self.by_node: dict[str, dict[str, PodState]] = {}
        self._wall_clock = wall_clock

    # --- nodes ------------------------------------------------------------------------
    def node(self, name: str) -> Node | None:
        slot = self.table.slot.get(name)
        return None if slot is None else self.table.node(slot)

    def put_node(self, node: Node) -> Node | None:
        """Add or update a node; returns the previous version, if any."""
        old = self.node(node.name)
        slot = self.table.put_node(node)
        if old is None:
            for state in self.by_node.get(node.name, {}).values():
                self.table.add_requests(slot, state.demand.requests, state.demand.nonzero, 1)
        return old

    def remove_node(self, name: str) -> None:
        self.table.remove_node(name)

    # --- pods -------------------------------------------------------------------------
    def _count(self, state: PodState, sign: int) -> None:
        slot = self.table.slot.get(state.node)
        if slot is not None:
            self.table.add_requests(slot, state.demand.requests, state.demand.nonzero, sign)

    def _insert(self, state: PodState) -> None:
        self.pods[state.pod.key] = state
        self.by_node.setdefault(state.node, {})[state.pod.key] = state
        self._count(state, 1)

    def _delete(self, key: str) -> PodState | None:
        state = self.pods.pop(key, None)
        if state is None:
            return None
        self._count(state, -1)
        on_node = self.by_node.get(state.node, {})
        on_node.pop(key, None)
        if not on_node:
            self.by_node.pop(state.node, None)
        return state

    def _state(self, pod: Pod, node: str, demand: Demand | None = None) -> PodState:
        start = parse_start_time(pod.start_time)
        demand = demand or Demand.of(pod)
        return PodState(pod, node, demand, self._wall_clock() if start is None else start)

    def assume(self, pod: Pod, node: str, demand: Demand | None = None) -> PodState:
        """Count the pod on node now; demand, if the caller has it, saves computing it again."""
        if pod.key in self.pods:
            raise CacheError(f"pod {pod.key} is already in the cache")
        state = self._state(pod, node, demand)
        state.assumed = True
        self._insert(state)
        return state

    def finish_binding(self, key: str) -> None:
        state = self.pods.get(key)
        if state is not None and state.assumed:
            state.binding_finished = True

    def forget(self, key: str, node: str) -> None:
        state = self.pods.get(key)
        if state is None or not state.assumed:
            raise CacheError(f"pod {key} is not assumed")
        if state.node != node:
            raise CacheError(f"pod {key} was assumed on node {state.node!r}, not {node!r}")
        self._delete(key)

    def is_assumed(self, key: str) -> bool:
        state = self.pods.get(key)
        return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> None:
        """A pod bound to pod.node_name, as the cluster reports it (confirms an assumed pod)."""
        state = self.pods.get(pod.key)
        if state is not None and state.node == pod.node_name:
            state.pod, state.assumed = pod, False
            if state.demand.requests != pod.requests:  # an in-place resize
                self._count(state, -1)
                state.demand = Demand.of(pod)
                self._count(state, 1)
            return
        self._delete(pod.key)
        self._insert(self._state(pod, pod.node_name))

    def remove_pod(self, key: str) -> PodState | None:
        return self._delete(key)

    def pods_on(self, node: str) -> list[PodState]:
        return list(self.by_node.get(node, {}).values())
