"""DefaultPreemption: find a node where evicting lower-priority pods lets the pod fit.

Per node that failed only NodeResourcesFit: remove every lower-priority pod; if the pod
still does not fit, the node is out. Otherwise re-admit ("reprieve") the removed pods
from the most important (highest priority, then earliest started) down, keeping each
that still leaves room; the rest are the victims. Among candidate nodes pick, in
order: the lowest highest-victim priority, the smallest sum of victim priorities (each
offset by 2^31 as kube does, so more victims weigh more), the fewest victims, the
latest start among the highest-priority victims, then the first node. (kube-scheduler
also minimises PodDisruptionBudget violations first; kubenode has no PDBs.) Unlike
kube-scheduler, every candidate node is examined rather than a sampled subset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubenode.model.objects import Pod
from scheduler.cache import PodState, SchedulerCache
from scheduler.filters import Demand, FilterResult, NodeFree, Reserved, fit_error_message

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "preemption: not eligible due to preemptionPolicy=Never."
TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."
PRIORITY_OFFSET = 2**31


@dataclass(frozen=True)
class Preemption:
    node: str
    victims: tuple[PodState, ...]


def _importance(state: PodState) -> tuple[int, float]:
    """Sort key: most important (highest priority, earliest start) first."""
    return (-state.priority, state.start_time)


def _victims_on_node(
    pod: Pod, demand: Demand, cache: SchedulerCache, slot: int, held: Mapping[str, int]
) -> tuple[list[PodState] | None, list[str]]:
    """(victims, []) if preemption works on this node, else (None, reasons)."""
    node = cache.table.node(slot).name
    lower = [s for s in cache.pods_on(node) if s.priority < pod.priority]
    if not lower:
        return None, [NO_VICTIMS]
    free = NodeFree(cache.table, slot, demand, held)
    for state in lower:
        free.release(state.demand.requests)
    reasons = free.shortfalls()
    if reasons:
        return None, reasons
    victims = []
    for state in sorted(lower, key=_importance):
        free.release(state.demand.requests, -1)
        if free.shortfalls():
            free.release(state.demand.requests)
            victims.append(state)
    # All could stay: the pod fits without evicting anyone (kube reports this node as an error).
    return (victims, []) if victims else (None, [NO_VICTIMS])


def _choice_key(victims: list[PodState]) -> tuple[int, int, int, float]:
    highest = victims[0].priority
    earliest_of_highest = min(v.start_time for v in victims if v.priority == highest)
    return (
        highest,
        sum(v.priority + PRIORITY_OFFSET for v in victims),
        len(victims),
        -earliest_of_highest,
    )


def find_preemption(
    pod: Pod, demand: Demand, cache: SchedulerCache, result: FilterResult, reserved: Reserved
) -> tuple[Preemption | None, str]:
    """The node and victims, or None with the PostFilter message for the FitError."""
    if pod.preemption_policy == "Never":
        return None, NEVER
    table = cache.table
    nominated = table.slot.get(pod.nominated_node_name)
    if nominated is not None and result.codes[nominated] == 0:
        for state in cache.pods_on(pod.nominated_node_name):
            if state.priority < pod.priority and state.pod.deletion_timestamp:
                return None, TERMINATING
    counts: dict[str, int] = {}
    unresolvable = int((result.active & (result.codes != 0)).sum())
    # Nodes a later plugin (the NUMA filter) turned down: the what-if below cannot model them.
    unresolvable += sum(int(bad.sum()) for _, _, bad in result.rejections)
    if unresolvable:
        counts[NOT_HELPFUL] = unresolvable
    best: tuple[tuple[int, int, int, float], int, list[PodState]] | None = None
    for slot in result.resolvable.nonzero()[0]:
        victims, reasons = _victims_on_node(pod, demand, cache, int(slot), reserved.get(int(slot), {}))
        if victims is None:
            for reason in reasons:
                counts[reason] = counts.get(reason, 0) + 1
            continue
        key = _choice_key(victims)
        if best is None or key < best[0]:
            best = (key, int(slot), victims)
    if best is None:
        return None, "preemption: " + fit_error_message(table.node_count, counts)
    return Preemption(table.node(best[1]).name, tuple(best[2])), ""
