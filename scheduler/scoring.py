"""Score plugins over every node at once, with kube-scheduler's integer arithmetic.

Each plugin yields 0..100 per node; the total is the weighted sum. Formulas
(kube-scheduler's noderesources, nodeaffinity and tainttoleration plugins):

- NodeResourcesFit, per listed resource with allocatable a > 0 and requested r (this pod
  included; cpu/memory with the non-zero defaults; an extended resource the pod does not
  request is skipped): LeastAllocated (a-r)*100/a (0 if r > a); MostAllocated
  min(r,a)*100/a; RequestedToCapacityRatio shape(min(r*100/a, 100)) with the shape's
  scores x10, resources scoring 0 left out of the mean, rounded. Node score = weighted
  mean (integer division for the first two).
- NodeResourcesBalancedAllocation, actual requests: fractions f = min(r/a, 1); two
  resources |f1-f2|/2, more the population standard deviation; int((1-std)*100).
  Pods requesting none of its resources are skipped (score 0 everywhere).
- NodeAffinity: sum of matching preferred-term weights, normalised to 100 by the maximum.
- TaintToleration: count of untolerated PreferNoSchedule taints, normalised and reversed.

Normalisation is over the feasible nodes, as kube-scheduler does.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubenode.model.matching import preferred_affinity_weight, untolerated_taints
from kubenode.model.objects import Pod
from kubenode.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from scheduler.filters import Demand
from scheduler.nodetable import NONZERO_ROW, Int64Array, NodeColumns, NodeTable
from scheduler.profile import (
    AFFINITY,
    BALANCED,
    FIT,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    TAINTS,
    Profile,
    ResourceWeight,
    ShapePoint,
)

MAX_NODE_SCORE = 100
BoolArray = npt.NDArray[np.bool_]


def is_scalar(resource: str) -> bool:
    """Extended resources and hugepages: skipped in scores when the pod does not request them."""
    return resource not in (CPU, MEMORY, EPHEMERAL_STORAGE)


def allocatable_and_requested(
    table: NodeColumns, resource: str, pod_amount: int, nonzero: bool
) -> tuple[Int64Array, Int64Array] | None:
    """(a, r) over all slots for one scored resource, or None where kube skips it for every node."""
    if pod_amount == 0 and is_scalar(resource):
        return None
    row = table.row.get(resource)
    if row is None:
        return None
    n = table.size
    if nonzero and resource in NONZERO_ROW:
        base = table.nonzero[NONZERO_ROW[resource], :n]
    else:
        base = table.requested[row, :n]
    return table.alloc[row, :n], base + pod_amount


def broken_linear(shape: tuple[ShapePoint, ...]) -> Int64Array:
    """The shape function (scores x10) tabulated for utilisation 0..100, Go's integer arithmetic."""
    points = [(p.utilization, p.score * (MAX_NODE_SCORE // 10)) for p in shape]
    table = np.empty(MAX_NODE_SCORE + 1, np.int64)
    for p in range(MAX_NODE_SCORE + 1):
        value = points[-1][1]
        for i, (utilization, score) in enumerate(points):
            if p <= utilization:
                if i == 0:
                    value = score
                else:
                    u0, s0 = points[i - 1]
                    numerator = (score - s0) * (p - u0)
                    quotient = abs(numerator) // (utilization - u0)
                    value = s0 + (quotient if numerator >= 0 else -quotient)  # Go truncates toward zero
                break
        table[p] = value
    return table


def round_half_away(x: npt.NDArray[np.float64]) -> Int64Array:
    """Go's math.Round for non-negative values."""
    floor = np.floor(x)
    return (floor + (x - floor >= 0.5)).astype(np.int64)


def _resource_score(kind: str, a: Int64Array, r: Int64Array, shape: Int64Array | None) -> Int64Array:
    """One resource's 0..100 score per slot (meaningless where a == 0; callers mask those)."""
    safe_a = np.maximum(a, 1)
    if kind == LEAST_ALLOCATED:
        # (a-r)*100/a, or 0 when r > a: the floor of a negative numerator is negative, so clamp.
        least: Int64Array = np.maximum((a - r) * MAX_NODE_SCORE // safe_a, 0)
        return least
    if kind == MOST_ALLOCATED:
        return np.minimum(r, a) * MAX_NODE_SCORE // safe_a
    assert shape is not None
    utilisation = np.minimum(r * MAX_NODE_SCORE // safe_a, MAX_NODE_SCORE)
    scores: Int64Array = shape[utilisation]
    return scores


def fit_score(table: NodeColumns, profile: Profile, demand: Demand) -> Int64Array:
    strategy = profile.scoring
    n = table.size
    total = np.zeros(n, np.int64)
    weights: Int64Array | int = 0
    shape = broken_linear(strategy.shape) if strategy.shape else None
    for resource in strategy.resources:
        pair = allocatable_and_requested(table, resource.name, demand.nonzero.get(resource.name, 0), True)
        if pair is None:
            continue
        a, r = pair
        score = _resource_score(strategy.type, a, r, shape)
        if shape is None and table.positive_everywhere(resource.name):
            total += score * resource.weight  # the common case: no per-node masking needed
            weights = weights + resource.weight
            continue
        present = a > 0
        if shape is not None:
            present &= score > 0  # kube leaves zero scores out of the mean here
        total += np.where(present, score * resource.weight, 0)
        weights = weights + present * resource.weight
    if isinstance(weights, int):
        return total // weights if weights else total
    if shape is not None:
        return np.where(weights > 0, round_half_away(total / np.maximum(weights, 1)), 0)
    return np.where(weights > 0, total // np.maximum(weights, 1), 0)


def _standard_deviation(fractions: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64] | float:
    """kube's balancedResourceScorer spread, every node having all these resources."""
    if len(fractions) < 2:
        return 0.0
    if len(fractions) == 2:
        return np.abs((fractions[0] - fractions[1]) / 2)
    total = fractions[0]
    for fraction in fractions[1:]:  # in resource order, as kube sums
        total = total + fraction
    mean = total / len(fractions)
    squares = (fractions[0] - mean) * (fractions[0] - mean)
    for fraction in fractions[1:]:
        squares = squares + (fraction - mean) * (fraction - mean)
    return np.sqrt(squares / len(fractions))


def _masked_standard_deviation(
    fractions: list[tuple[BoolArray, npt.NDArray[np.float64]]], n: int
) -> npt.NDArray[np.float64]:
    """The same where some nodes lack some resources (those are left out per node)."""
    count = np.zeros(n, np.int64)
    total = np.zeros(n, np.float64)
    first = np.zeros(n, np.float64)
    second = np.zeros(n, np.float64)
    for present, fraction in fractions:
        first = np.where(present & (count == 0), fraction, first)
        second = np.where(present & (count == 1), fraction, second)
        total = total + fraction
        count = count + present
    mean = total / np.maximum(count, 1)
    squares = np.zeros(n, np.float64)
    for present, fraction in fractions:
        squares = squares + np.where(present, (fraction - mean) * (fraction - mean), 0.0)
    std: npt.NDArray[np.float64] = np.where(
        count == 2,
        np.abs((first - second) / 2),
        np.where(count > 2, np.sqrt(squares / np.maximum(count, 1)), 0.0),
    )
    return std


def balanced_score(table: NodeColumns, resources: tuple[ResourceWeight, ...], demand: Demand) -> Int64Array:
    n = table.size
    if all(demand.requests.get(r.name, 0) == 0 for r in resources):
        return np.zeros(n, np.int64)  # best-effort for these resources: the plugin skips the pod
    fractions: list[tuple[BoolArray, npt.NDArray[np.float64]]] = []
    everywhere = True
    for resource in resources:
        pair = allocatable_and_requested(table, resource.name, demand.requests.get(resource.name, 0), False)
        if pair is None:
            continue
        a, r = pair
        if table.positive_everywhere(resource.name):
            fractions.append((np.ones(0, bool), np.minimum(r / a, 1.0)))
        else:
            everywhere = False
            present = a > 0
            fractions.append((present, np.where(present, np.minimum(r / np.maximum(a, 1), 1.0), 0.0)))
    if everywhere:
        std = _standard_deviation([fraction for _, fraction in fractions])
    else:
        std = _masked_standard_deviation(
            [(np.ones(n, bool) if len(p) == 0 else p, f) for p, f in fractions], n
        )
    score: Int64Array = np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    if score.shape != (n,):
        score = np.full(n, score, np.int64)
    return score


def normalise(raw: Int64Array, feasible: BoolArray, reverse: bool) -> Int64Array:
    """kube's DefaultNormalizeScore over the feasible nodes."""
    # Zero everywhere (no node has the preferred label or the taint): the maximum is 0 without looking.
    highest = int(raw[feasible].max()) if raw.any() and feasible.any() else 0
    if highest == 0:
        return np.full(raw.shape, MAX_NODE_SCORE if reverse else 0, np.int64)
    scaled = MAX_NODE_SCORE * raw // highest
    return MAX_NODE_SCORE - scaled if reverse else scaled


def affinity_raw(table: NodeTable, pod: Pod) -> Int64Array:
    """The weight of the preferred terms each node matches."""
    return table.derived(
        ("preferred", pod.preferred_node_affinity), lambda node: preferred_affinity_weight(pod, node)
    )


def taint_raw(table: NodeTable, pod: Pod) -> Int64Array:
    """The count of untolerated PreferNoSchedule taints on each node."""
    return table.derived(
        ("prefer-no-schedule", pod.tolerations),
        lambda node: len(untolerated_taints(pod.tolerations, node.taints, {"PreferNoSchedule"})),
    )


def affinity_score(table: NodeTable, pod: Pod, feasible: BoolArray) -> Int64Array:
    if not pod.preferred_node_affinity:
        return np.zeros(table.size, np.int64)
    return normalise(affinity_raw(table, pod), feasible, reverse=False)


def taint_score(table: NodeTable, pod: Pod, feasible: BoolArray) -> Int64Array:
    return normalise(taint_raw(table, pod), feasible, reverse=True)


def local_scores(table: NodeColumns, profile: Profile, demand: Demand) -> Int64Array:
    """The weighted scores that depend on each node's own column only (NodeResourcesFit,
    BalancedAllocation): a slot's value is the same whichever other slots are computed with it."""
    total = np.zeros(table.size, np.int64)
    if weight := profile.weights.get(FIT):
        total += weight * fit_score(table, profile, demand)
    if weight := profile.weights.get(BALANCED):
        total += weight * balanced_score(table, profile.balanced_resources, demand)
    return total


def normalised_scores(table: NodeTable, profile: Profile, pod: Pod, feasible: BoolArray) -> Int64Array:
    """The weighted scores normalised over the feasible nodes (NodeAffinity, TaintToleration)."""
    total = np.zeros(table.size, np.int64)
    if weight := profile.weights.get(AFFINITY):
        total += weight * affinity_score(table, pod, feasible)
    if weight := profile.weights.get(TAINTS):
        total += weight * taint_score(table, pod, feasible)
    return total


def normalised_scores_vary(table: NodeTable, profile: Profile, pod: Pod) -> bool:
    """Could normalised_scores differ between nodes? Not when no node matches a preferred term
    and no node has an untolerated PreferNoSchedule taint: each plugin's maximum is then 0."""
    if profile.weights.get(AFFINITY) and pod.preferred_node_affinity and affinity_raw(table, pod).any():
        return True
    return bool(profile.weights.get(TAINTS)) and bool(taint_raw(table, pod).any())


def total_scores(
    table: NodeTable, profile: Profile, pod: Pod, demand: Demand, feasible: BoolArray
) -> Int64Array:
    total: Int64Array = local_scores(table, profile, demand) + normalised_scores(
        table, profile, pod, feasible
    )
    return total
