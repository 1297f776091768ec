"""Filter plugins over every node at once, and kube-scheduler's failure messages.

Plugins run in kube-scheduler's order and a node reports the first plugin that rejects
it: NodeUnschedulable, NodeName, TaintToleration (NoSchedule/NoExecute), NodeAffinity
(nodeSelector and required affinity), then NodeResourcesFit, which lists every
insufficient resource ("Too many pods", "Insufficient cpu", "Insufficient
kubenode.io/gpu", ...). The first four depend only on node labels and taints, so their
verdicts are cached per pod signature in the NodeTable; the fit check is a handful of
vectorised comparisons per requested resource.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubenode.model.matching import matches_node_selector_and_affinity, untolerated_taints
from kubenode.model.objects import Node, Pod, Taint
from kubenode.model.requests import pod_requests
from kubenode.model.resources import PODS
from scheduler.nodetable import NodeColumns
from scheduler.profile import Profile

BoolArray = npt.NDArray[np.bool_]

OK, UNSCHEDULABLE, NODE_NAME, TAINTED, AFFINITY = 0, 1, 2, 3, 4
# code -> (plugin, reason); these verdicts are UnschedulableAndUnresolvable (preemption cannot help).
STATIC_REASONS: Mapping[int, tuple[str, str]] = {
    UNSCHEDULABLE: ("NodeUnschedulable", "node(s) were unschedulable"),
    NODE_NAME: ("NodeName", "node(s) didn't match the requested node name"),
    TAINTED: ("TaintToleration", "node(s) had untolerated taint(s)"),
    AFFINITY: ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector"),
}
FIT_PLUGIN = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "NoSchedule")
FILTER_EFFECTS = {"NoSchedule", "NoExecute"}

# Amounts held on a node slot for pods nominated there (resource -> amount, "pods" counted).
Reserved = Mapping[int, Mapping[str, int]]


@dataclass(frozen=True)
class Demand:
    """What one pod asks of a node, computed once per pod."""

    requests: Mapping[str, int]  # kube's PodRequests: the filter, BalancedAllocation, accounting
    nonzero: Mapping[str, int]  # with 100m/200Mi defaults: NodeResourcesFit scores
    checked: tuple[tuple[str, int], ...]  # (resource, amount > 0) the fit filter checks

    @staticmethod
    def of(pod: Pod, profile: Profile | None = None) -> Demand:
        requests = pod.requests
        checked = tuple(
            (name, amount)
            for name, amount in requests.items()
            if amount > 0 and name != PODS and not (profile and profile.ignores(name))
        )
        return Demand(requests, pod_requests(pod, non_zero=True), checked)


def static_signature(pod: Pod) -> Hashable:
    return (
        "filter",
        pod.node_name,
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_affinity,
        pod.tolerations,
    )


def static_code(pod: Pod, node: Node) -> int:
    """The first of the label/taint filters that rejects the node, or OK."""
    if node.unschedulable and untolerated_taints(pod.tolerations, (UNSCHEDULABLE_TAINT,), FILTER_EFFECTS):
        return UNSCHEDULABLE
    if pod.node_name and pod.node_name != node.name:
        return NODE_NAME
    if untolerated_taints(pod.tolerations, node.taints, FILTER_EFFECTS):
        return TAINTED
    if not matches_node_selector_and_affinity(pod, node):
        return AFFINITY
    return OK


def static_codes(table: NodeColumns, pod: Pod) -> npt.NDArray[np.int64]:
    return table.derived(static_signature(pod), lambda node: static_code(pod, node))


def fit_failures(table: NodeColumns, demand: Demand, reserved: Reserved) -> list[tuple[str, BoolArray]]:
    """(reason, nodes failing it) for the pod count and each resource the pod requests."""
    n = table.size
    failures = []
    for name, amount in ((PODS, 1), *demand.checked):
        row = table.row.get(name)
        reason = TOO_MANY_PODS if name == PODS else f"Insufficient {name}"
        if row is None:  # no node has any: allocatable 0 everywhere
            failures.append((reason, np.ones(n, bool)))
            continue
        free = table.alloc[row, :n] - table.requested[row, :n]
        for slot, held in reserved.items():
            free[slot] -= held.get(name, 0)
        failures.append((reason, free < amount))
    return failures


class NodeFree:
    """Free amounts, on one node, of what the pod needs, as pods are taken off and put back
    (preemption's what-if, and queueing hints' "would the pod fit this node now")."""

    def __init__(self, table: NodeColumns, slot: int, demand: Demand, held: Mapping[str, int]) -> None:
        self.need = {PODS: 1, **dict(demand.checked)}
        self.free = {}
        for name in self.need:
            row = table.row.get(name)
            have = 0 if row is None else int(table.alloc[row, slot] - table.requested[row, slot])
            self.free[name] = have - held.get(name, 0)

    def release(self, requests: Mapping[str, int], sign: int = 1) -> None:
        """A pod with these requests leaves the node (sign 1) or comes back (sign -1)."""
        self.free[PODS] += sign
        for name in self.need:
            if name != PODS:
                self.free[name] += sign * requests.get(name, 0)

    def shortfalls(self) -> list[str]:
        return [
            TOO_MANY_PODS if name == PODS else f"Insufficient {name}"
            for name, amount in self.need.items()
            if amount > self.free[name]
        ]


@dataclass
class FilterResult:
    feasible: BoolArray
    codes: npt.NDArray[np.int64]  # static verdict per slot
    failures: list[tuple[str, BoolArray]]  # fit reasons per slot (meaningful where codes == OK)
    active: BoolArray
    # Later plugins' (plugin, reason, nodes) on nodes every filter above passed; preemption cannot help there.
    rejections: list[tuple[str, str, BoolArray]] = field(default_factory=list)

    def reject(self, plugin: str, reason: str, bad: BoolArray) -> None:
        """A plugin after NodeResourcesFit turns down some of the feasible nodes."""
        bad = bad & self.feasible
        if bad.any():
            self.rejections.append((plugin, reason, bad))
            self.feasible = self.feasible & ~bad

    @property
    def resolvable(self) -> BoolArray:
        """Nodes where only NodeResourcesFit failed: preemption might help there."""
        resolvable: BoolArray = self.active & (self.codes == OK) & ~self.feasible
        for _, _, bad in self.rejections:
            resolvable &= ~bad
        return resolvable

    def histogram(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for code, (_, reason) in STATIC_REASONS.items():
            count = int(np.count_nonzero(self.active & (self.codes == code)))
            if count:
                counts[reason] = count
        ok = self.active & (self.codes == OK)
        for reason, bad in self.failures:
            count = int(np.count_nonzero(ok & bad))
            if count:
                counts[reason] = counts.get(reason, 0) + count
        for _, reason, bad in self.rejections:
            counts[reason] = counts.get(reason, 0) + int(np.count_nonzero(bad))
        return counts

    def rejected_by(self) -> frozenset[str]:
        plugins = set()
        for code, (plugin, _) in STATIC_REASONS.items():
            if np.any(self.active & (self.codes == code)):
                plugins.add(plugin)
        ok = self.active & (self.codes == OK)
        if any(np.any(ok & bad) for _, bad in self.failures):
            plugins.add(FIT_PLUGIN)
        plugins.update(plugin for plugin, _, _ in self.rejections)
        return frozenset(plugins)


def run_filters(table: NodeColumns, pod: Pod, demand: Demand, reserved: Reserved) -> FilterResult:
    n = table.size
    codes = static_codes(table, pod)
    active = table.active[:n]
    feasible = active & (codes == OK)
    failures = fit_failures(table, demand, reserved)
    for _, bad in failures:
        feasible &= ~bad
    return FilterResult(feasible, codes, failures, active)


def histogram_text(counts: Mapping[str, int]) -> str:
    """kube's reason histogram: "count reason" entries sorted as strings, joined by ", "."""
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def fit_error_message(node_count: int, counts: Mapping[str, int], post_filter: str = "") -> str:
    """FitError.Error(): "0/N nodes are available: <histogram>." plus the PostFilter message."""
    message = f"0/{node_count} nodes are available"
    message += f": {histogram_text(counts)}." if counts else ":"
    if post_filter:
        message += f" {post_filter}"
    return message
