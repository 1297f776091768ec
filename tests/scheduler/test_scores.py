"""Each score plugin against hand-computed kube-scheduler formulas."""

from __future__ import annotations

import dataclasses

import numpy as np

from kubenode.model.objects import NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm, Taint
from scheduler.cache import SchedulerCache
from scheduler.filters import Demand
from scheduler.profile import (
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    Profile,
    ResourceWeight,
    ScoringStrategy,
    ShapePoint,
)
from scheduler.scoring import affinity_score, balanced_score, broken_linear, fit_score, taint_score
from tests.scheduler.support import GIB, GPU, node, pod

CPU_W1_MEM_W3 = (ResourceWeight("cpu", 1), ResourceWeight("memory", 3))


def one_node_cache(alloc: dict[str, int], used: dict[str, int] | None = None) -> SchedulerCache:
    cache = SchedulerCache(lambda: 0.0)
    cache.put_node(node("n1", alloc))
    if used is not None:
        cache.add_pod(pod("existing", used, node_name="n1"))
    return cache


def fit(strategy: ScoringStrategy, cache: SchedulerCache, requests: dict[str, int]) -> int:
    return int(fit_score(cache.table, Profile(scoring=strategy), Demand.of(pod("p", requests)))[0])


# Node: 4 cpu, 10Gi; 1 cpu and 1Gi used; the pod asks 1 cpu and 2Gi.
# cpu: requested 2000 of 4000 (50%); memory: 3Gi of 10Gi (30%).
ALLOC = {"cpu": 4000, "memory": 10 * GIB}
USED = {"cpu": 1000, "memory": 1 * GIB}
ASK = {"cpu": 1000, "memory": 2 * GIB}


def test_least_allocated_weighted_mean() -> None:
    # cpu (4000-2000)*100/4000 = 50; memory 7*100/10 = 70; (50*1 + 70*3) / 4 = 65
    assert fit(ScoringStrategy(resources=CPU_W1_MEM_W3), one_node_cache(ALLOC, USED), ASK) == 65


def test_most_allocated_weighted_mean() -> None:
    # cpu 50, memory 30: (50 + 90) / 4 = 35
    assert fit(ScoringStrategy(MOST_ALLOCATED, CPU_W1_MEM_W3), one_node_cache(ALLOC, USED), ASK) == 35


def test_requested_to_capacity_ratio_rounds_half_away_from_zero() -> None:
    pack = ScoringStrategy(
        REQUESTED_TO_CAPACITY_RATIO,
        (ResourceWeight("cpu"), ResourceWeight("memory")),
        (ShapePoint(0, 0), ShapePoint(100, 10)),
    )
    # cpu 1320/4000 = 33% -> 33; memory 34Gi/100Gi = 34% -> 34; (33 + 34) / 2 = 33.5 -> 34
    cache = one_node_cache({"cpu": 4000, "memory": 100 * GIB}, {"cpu": 1000, "memory": 2 * GIB})
    assert fit(pack, cache, {"cpu": 320, "memory": 32 * GIB}) == 34


def test_requested_to_capacity_ratio_leaves_zero_scores_out() -> None:
    spread = ScoringStrategy(
        REQUESTED_TO_CAPACITY_RATIO,
        (ResourceWeight("cpu", 1), ResourceWeight("memory", 3)),
        (ShapePoint(0, 10), ShapePoint(100, 0)),
    )
    # cpu full -> 0 (left out of the mean, weight too); memory 30% -> 70: 70*3/3 = 70
    cache = one_node_cache(ALLOC, {"cpu": 3000, "memory": 1 * GIB})
    assert fit(spread, cache, ASK) == 70


def test_broken_linear_truncates_toward_zero() -> None:
    shape = broken_linear((ShapePoint(0, 10), ShapePoint(30, 7), ShapePoint(100, 0)))
    # between (0,100) and (30,70): 100 + (-30*10)/30 = 90; at 45: 70 + (-70*15)/70 = 55
    assert shape[10] == 90 and shape[45] == 55 and shape[0] == 100 and shape[100] == 0
    # (-70*1)/70 = -1 exactly; (-70*2)/70 = -2; at 31: 70 - 1 = 69
    assert shape[31] == 69


def test_unrequested_extended_resource_is_not_scored_but_non_zero_defaults_are() -> None:
    strategy = ScoringStrategy(resources=(ResourceWeight("cpu"), ResourceWeight(GPU, 5)))
    cache = one_node_cache({"cpu": 4000, "memory": 10 * GIB, GPU: 8})
    # No gpu asked: only cpu counts, and an empty request counts as 100m: 3900*100/4000 = 97
    assert fit(strategy, cache, {}) == 97
    # 2 of 8 GPUs: (6*100/8 = 75) * 5 + (3000*100/4000 = 75) = 75
    assert fit(strategy, cache, {"cpu": 1000, GPU: 2}) == 75


def test_balanced_allocation_two_and_three_resources() -> None:
    cache = one_node_cache({**ALLOC, GPU: 10}, USED)
    demand = Demand.of(pod("p", ASK))
    two = (ResourceWeight("cpu"), ResourceWeight("memory"))
    # fractions 0.5 and 0.3: std = 0.1, int((1 - 0.1) * 100) = 90
    assert int(balanced_score(cache.table, two, demand)[0]) == 90
    three = (*two, ResourceWeight(GPU))
    demand = Demand.of(pod("p", {**ASK, GPU: 1}))
    # fractions 0.5, 0.3, 0.1: population std 0.1633 -> 83
    assert int(balanced_score(cache.table, three, demand)[0]) == 83
    # A pod requesting none of them is skipped.
    assert int(balanced_score(cache.table, two, Demand.of(pod("p", {})))[0]) == 0


def test_node_affinity_and_prefer_no_schedule_are_normalised_over_feasible_nodes() -> None:
    cache = SchedulerCache(lambda: 0.0)
    soft = Taint("spot", "PreferNoSchedule")
    cache.put_node(node("a", ALLOC, labels={"disk": "ssd"}))
    cache.put_node(node("b", ALLOC, taints=(soft,), labels={"disk": "ssd", "zone": "z1"}))
    cache.put_node(node("c", ALLOC, taints=(soft, Taint("old", "PreferNoSchedule"))))
    ssd = NodeSelectorTerm((NodeSelectorRequirement("disk", "In", ("ssd",)),))
    z1 = NodeSelectorTerm((NodeSelectorRequirement("zone", "Exists"),))
    p = dataclasses.replace(
        pod("p"), preferred_node_affinity=(PreferredSchedulingTerm(30, ssd), PreferredSchedulingTerm(50, z1))
    )
    feasible = np.ones(3, bool)
    # raw 30, 80, 0 -> 100*30/80 = 37, 100, 0
    assert affinity_score(cache.table, p, feasible).tolist() == [37, 100, 0]
    # untolerated PreferNoSchedule counts 0, 1, 2 -> 100, 50, 0
    assert taint_score(cache.table, p, feasible).tolist() == [100, 50, 0]
    # Only feasible nodes set the maximum: without c, b's single taint is the worst.
    assert taint_score(cache.table, p, np.array([True, True, False])).tolist()[:2] == [100, 0]
