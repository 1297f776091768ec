"""The vectorised engine against the per-node reference (tests/scheduler/reference.py) on
random clusters: same verdicts with the same reasons on every node, same total score on
every feasible node, for every scoring strategy."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kubenode.model.objects import (
    Container,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)
from scheduler.cache import SchedulerCache
from scheduler.filters import STATIC_REASONS, Demand, run_filters
from scheduler.profile import (
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    Profile,
    ResourceWeight,
    ScoringStrategy,
    ShapePoint,
)
from scheduler.scoring import total_scores
from tests.scheduler import reference

GPU = "kubenode.io/gpu"
GIB = 2**30
PROFILES = {
    "least": Profile(),
    "most-gpu": Profile(
        scoring=ScoringStrategy(MOST_ALLOCATED, (ResourceWeight("cpu", 1), ResourceWeight(GPU, 3))),
        balanced_resources=(ResourceWeight("cpu"), ResourceWeight("memory"), ResourceWeight(GPU)),
    ),
    "rtcr-spread": Profile(
        scoring=ScoringStrategy(
            REQUESTED_TO_CAPACITY_RATIO,
            (ResourceWeight("cpu", 2), ResourceWeight("memory", 1), ResourceWeight(GPU, 5)),
            (ShapePoint(0, 10), ShapePoint(30, 7), ShapePoint(100, 0)),
        ),
        weights={
            "NodeResourcesFit": 3,
            "NodeResourcesBalancedAllocation": 1,
            "NodeAffinity": 2,
            "TaintToleration": 3,
        },
    ),
    "rtcr-pack": Profile(
        scoring=ScoringStrategy(
            REQUESTED_TO_CAPACITY_RATIO,
            (ResourceWeight("cpu", 1), ResourceWeight("ephemeral-storage", 1), ResourceWeight(GPU, 2)),
            (ShapePoint(10, 0), ShapePoint(60, 3), ShapePoint(100, 10)),
        ),
    ),
}


def random_node(rng: random.Random, i: int, sparse: bool) -> Node:
    """sparse: some nodes lack memory, GPUs or storage (per-node masking in the scores);
    otherwise every node has every resource (the engine's unmasked fast path)."""
    allocatable = {"cpu": rng.choice((2000, 4000, 8000, 8500)), "pods": rng.choice((3, 10, 110))}
    if not sparse or rng.random() < 0.9:
        allocatable["memory"] = rng.choice((4, 8, 16, 24)) * GIB + rng.randrange(1000)
    if not sparse or rng.random() < 0.5:
        allocatable[GPU] = rng.choice((1, 2, 4, 8))
    if not sparse or rng.random() < 0.3:
        allocatable["ephemeral-storage"] = rng.choice((10, 50)) * GIB
    taints = []
    if rng.random() < 0.2:
        taints.append(Taint("dedicated", rng.choice(("NoSchedule", "NoExecute")), "gpu"))
    for _ in range(rng.randrange(3)):
        taints.append(Taint(rng.choice(("spot", "slow", "old")), "PreferNoSchedule"))
    labels = {"zone": rng.choice("abc"), "disk": rng.choice(("ssd", "hdd"))}
    return Node(
        f"n{i}",
        labels=labels,
        taints=tuple(taints),
        unschedulable=rng.random() < 0.05,
        allocatable=allocatable,
    )


def random_pod(rng: random.Random, i: int) -> Pod:
    def requests() -> dict[str, int]:
        out: dict[str, int] = {}
        if rng.random() < 0.8:
            out["cpu"] = rng.choice((100, 250, 500, 1000, 1500))
        if rng.random() < 0.8:
            out["memory"] = rng.choice((128, 512, 2048)) * 2**20
        if rng.random() < 0.3:
            out[GPU] = rng.randint(1, 3)
        if rng.random() < 0.1:
            out["ephemeral-storage"] = GIB
        return out

    inits = (Container("init", requests=requests()),) if rng.random() < 0.2 else ()
    tolerations = []
    if rng.random() < 0.3:
        tolerations.append(Toleration("dedicated", "Equal", "gpu"))
    if rng.random() < 0.3:
        tolerations.append(Toleration("spot", "Exists", effect="PreferNoSchedule"))
    preferred: tuple[PreferredSchedulingTerm, ...] = ()
    if rng.random() < 0.4:
        preferred = (
            PreferredSchedulingTerm(
                rng.randint(1, 100), NodeSelectorTerm((NodeSelectorRequirement("disk", "In", ("ssd",)),))
            ),
            PreferredSchedulingTerm(
                rng.randint(1, 100), NodeSelectorTerm((NodeSelectorRequirement("zone", "NotIn", ("a",)),))
            ),
        )
    return Pod(
        f"p{i}",
        containers=(Container("main", requests=requests()),),
        init_containers=inits,
        overhead={"cpu": 50} if rng.random() < 0.1 else {},
        node_selector={"zone": rng.choice("abc")} if rng.random() < 0.15 else {},
        tolerations=tuple(tolerations),
        preferred_node_affinity=preferred,
    )


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("sparse", [True, False])
def test_vectorised_engine_matches_reference(profile_name: str, seed: int, sparse: bool) -> None:
    profile = PROFILES[profile_name]
    rng = random.Random(seed)
    cache = SchedulerCache(lambda: 0.0)
    refs: dict[str, reference.RefNode] = {}
    nodes = [random_node(rng, i, sparse) for i in range(40)]
    for node in nodes:
        cache.put_node(node)
        refs[node.name] = reference.RefNode(node)
    if sparse:
        cache.remove_node("n7")  # a free slot must not change anything
        del refs["n7"]
    checked = 0
    for i in range(120):
        pod = random_pod(rng, i)
        demand = Demand.of(pod, profile)
        result = run_filters(cache.table, pod, demand, {})
        expected_feasible = []
        for name, ref in refs.items():
            slot = cache.table.slot[name]
            want = reference.reasons(pod, ref, profile)
            code = int(result.codes[slot])
            got = (
                [STATIC_REASONS[code][1]]
                if code
                else [reason for reason, bad in result.failures if bad[slot]]
            )
            assert sorted(got) == sorted(want), f"{pod.name} on {name}"
            assert bool(result.feasible[slot]) == (not want)
            if not want:
                expected_feasible.append(ref)
        if not expected_feasible:
            continue
        totals = total_scores(cache.table, profile, pod, demand, result.feasible)
        want_totals = reference.total_scores(pod, expected_feasible, profile)
        got_totals = {name: int(totals[cache.table.slot[name]]) for name in want_totals}
        assert got_totals == want_totals, pod.name
        checked += len(want_totals)
        # Place it on a random feasible node in both, so later pods see fuller nodes.
        chosen = rng.choice(expected_feasible)
        bound = dataclasses.replace(pod, node_name=chosen.node.name)
        cache.assume(bound, chosen.node.name)
        chosen.add(pod)
    assert checked > 500, "too few feasible nodes to compare"
