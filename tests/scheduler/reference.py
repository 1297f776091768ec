"""A straightforward per-node implementation of kube-scheduler's filters and scores, written
from the formulas alone, to check the vectorised engine against."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubenode.model.matching import (
    matches_node_selector_and_affinity,
    preferred_affinity_weight,
    untolerated_taints,
)
from kubenode.model.objects import Node, Pod, Taint
from kubenode.model.requests import pod_requests
from scheduler.profile import LEAST_ALLOCATED, MOST_ALLOCATED, Profile


@dataclass
class RefNode:
    node: Node
    requested: dict[str, int] = field(default_factory=dict)
    nonzero: dict[str, int] = field(default_factory=dict)
    pods: int = 0

    def add(self, pod: Pod) -> None:
        for name, amount in pod_requests(pod).items():
            self.requested[name] = self.requested.get(name, 0) + amount
        for name, amount in pod_requests(pod, non_zero=True).items():
            self.nonzero[name] = self.nonzero.get(name, 0) + amount
        self.pods += 1


def reasons(pod: Pod, ref: RefNode, profile: Profile) -> list[str]:
    node = ref.node
    if node.unschedulable and untolerated_taints(
        pod.tolerations, [Taint("node.kubernetes.io/unschedulable", "NoSchedule")], {"NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    if untolerated_taints(pod.tolerations, node.taints, {"NoSchedule", "NoExecute"}):
        return ["node(s) had untolerated taint(s)"]
    if not matches_node_selector_and_affinity(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    out = []
    if ref.pods + 1 > node.allocatable.get("pods", 0):
        out.append("Too many pods")
    for name, amount in pod_requests(pod).items():
        free = node.allocatable.get(name, 0) - ref.requested.get(name, 0)
        if amount > 0 and not profile.ignores(name) and amount > free:
            out.append(f"Insufficient {name}")
    return out


def _scalar(name: str) -> bool:
    return name not in ("cpu", "memory", "ephemeral-storage")


def _alloc_req(ref: RefNode, name: str, pod_amount: int, use_requested: bool) -> tuple[int, int]:
    if pod_amount == 0 and _scalar(name):
        return 0, 0
    base = ref.requested if use_requested or name not in ("cpu", "memory") else ref.nonzero
    return ref.node.allocatable.get(name, 0), base.get(name, 0) + pod_amount


def _shape_value(profile: Profile, p: int) -> int:
    shape = [(s.utilization, s.score * 10) for s in profile.scoring.shape]
    for i, (u, sc) in enumerate(shape):
        if p <= u:
            if i == 0:
                return sc
            u0, s0 = shape[i - 1]
            return s0 + int((sc - s0) * (p - u0) / (u - u0))  # Go: truncation toward zero
    return shape[-1][1]


def fit_score(pod: Pod, ref: RefNode, profile: Profile) -> int:
    nonzero = pod_requests(pod, non_zero=True)
    kind = profile.scoring.type
    total = weights = 0
    for res in profile.scoring.resources:
        a, r = _alloc_req(ref, res.name, nonzero.get(res.name, 0), False)
        if a == 0:
            continue
        if kind == LEAST_ALLOCATED:
            s = 0 if r > a else (a - r) * 100 // a
        elif kind == MOST_ALLOCATED:
            s = min(r, a) * 100 // a
        else:
            s = _shape_value(profile, 100 if r > a else r * 100 // a)
            if s <= 0:
                continue
        total += s * res.weight
        weights += res.weight
    if weights == 0:
        return 0
    if kind in (LEAST_ALLOCATED, MOST_ALLOCATED):
        return total // weights
    x = total / weights
    return math.floor(x + 0.5) if x - math.floor(x) != 0.5 else math.floor(x) + 1


def balanced_score(pod: Pod, ref: RefNode, profile: Profile) -> int:
    requests = pod_requests(pod)
    if all(requests.get(r.name, 0) == 0 for r in profile.balanced_resources):
        return 0
    fractions = []
    for res in profile.balanced_resources:
        a, r = _alloc_req(ref, res.name, requests.get(res.name, 0), True)
        if a == 0:
            continue
        fractions.append(min(r / a, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / len(fractions)
        squares = 0.0
        for f in fractions:
            squares += (f - mean) * (f - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * 100)


def _normalise(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    highest = max(raw.values(), default=0)
    if highest == 0:
        return {k: 100 if reverse else 0 for k in raw}
    return {k: (100 - 100 * v // highest) if reverse else 100 * v // highest for k, v in raw.items()}


def total_scores(pod: Pod, feasible: list[RefNode], profile: Profile) -> dict[str, int]:
    w = profile.weights
    affinity = _normalise({r.node.name: preferred_affinity_weight(pod, r.node) for r in feasible}, False)
    prefer = {
        r.node.name: len(untolerated_taints(pod.tolerations, r.node.taints, {"PreferNoSchedule"}))
        for r in feasible
    }
    taints = _normalise(prefer, True)
    totals = {}
    for ref in feasible:
        name = ref.node.name
        totals[name] = (
            w.get("NodeResourcesFit", 0) * fit_score(pod, ref, profile)
            + w.get("NodeResourcesBalancedAllocation", 0) * balanced_score(pod, ref, profile)
            + w.get("NodeAffinity", 0) * (affinity[name] if pod.preferred_node_affinity else 0)
            + w.get("TaintToleration", 0) * taints[name]
        )
    return totals
