"""The merge's integer hot loop against a plain transcription of kube's HintMerger (hint objects,
itertools.product, compare as policy.go writes it), on random hints over 2 to 4 NUMA nodes."""

from __future__ import annotations

import random
from itertools import product

import pytest

from agent.cm.topologymanager.bitmask import BitMask
from agent.cm.topologymanager.hints import TopologyHint
from agent.cm.topologymanager.merge import HintMerger, max_of_min_affinity_counts, merge_permutation
from agent.cm.topologymanager.numainfo import NUMAInfo
from agent.cm.topologymanager.options import PolicyOptions


def reference_merge(info: NUMAInfo, hints: list[list[TopologyHint]], closest: bool) -> TopologyHint:
    target = max_of_min_affinity_counts(hints)

    def fitter(current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        assert current.affinity is not None and candidate.affinity is not None
        if candidate.affinity.is_equal(current.affinity):
            return current
        pick = info.closest if closest else info.narrowest
        return current if pick(current.affinity, candidate.affinity).is_equal(current.affinity) else candidate

    best: TopologyHint | None = None
    for permutation in product(*hints):
        candidate = merge_permutation(info.default_affinity(), permutation)
        assert candidate.affinity is not None
        if candidate.affinity.count() == 0:
            continue
        if best is None:
            best = candidate
            continue
        assert best.affinity is not None
        have, offered = best.affinity.count(), candidate.affinity.count()
        if best.preferred != candidate.preferred:
            best = candidate if candidate.preferred else best
        elif best.preferred or have > target or (have == target and offered == target):
            best = fitter(best, candidate)
        elif have == target or offered > target:
            pass
        elif offered == target or offered > have:
            best = candidate
        elif offered == have:
            best = fitter(best, candidate)
    return best if best is not None else TopologyHint(info.default_affinity(), False)


def random_hints(rng: random.Random, nodes: int) -> list[list[TopologyHint]]:
    resources = []
    for _ in range(rng.randint(1, 3)):
        hints = []
        for _ in range(rng.randint(1, 5)):
            bits = [n for n in range(nodes) if rng.random() < 0.5]
            affinity = None if rng.random() < 0.1 else BitMask.of(*bits)
            hints.append(TopologyHint(affinity, rng.random() < 0.5))
        resources.append(hints)
    return resources


@pytest.mark.parametrize("seed", range(20))
def test_merge_matches_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        nodes = rng.randint(2, 4)
        distances = {a: [10 if a == b else rng.randint(11, 30) for b in range(nodes)] for a in range(nodes)}
        info = NUMAInfo(tuple(range(nodes)), distances)
        hints = random_hints(rng, nodes)
        closest = rng.random() < 0.5
        merger = HintMerger(info, hints, "best-effort", PolicyOptions(prefer_closest_numa=closest))
        assert merger.merge() == reference_merge(info, hints, closest), hints
