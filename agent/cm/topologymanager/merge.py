"""Merging the providers' hints into one (the kubelet's topologymanager/policy.go).

Flow: `filter_providers_hints` turns every provider's answer into one list of hints per resource
(no preference -> [{any, preferred}], impossible -> [{any, not preferred}]) -> `HintMerger.merge`
walks every permutation (one hint per resource), ANDs the masks (`merge_permutation`: preferred
only if every hint is preferred and every mask is the same) and keeps the best by `compare`:
preferred over not, then the narrower (or, with prefer-closest-numa-nodes, the closer) mask;
between non-preferred hints the one whose width is closest to, without passing, the widest of the
resources' narrowest hints (`best_non_preferred_affinity_count`). No mask at all: {every node, not
preferred}.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import product

from agent.cm.topologymanager.bitmask import BitMask
from agent.cm.topologymanager.hints import ProviderHints, TopologyHint
from agent.cm.topologymanager.numainfo import NUMAInfo
from agent.cm.topologymanager.options import PolicyOptions

SINGLE_NUMA_NODE = "single-numa-node"


def filter_providers_hints(providers_hints: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """One list of hints per resource, over every provider (resources sorted by name within one)."""
    all_hints: list[list[TopologyHint]] = []
    for hints in providers_hints:
        if not hints:
            all_hints.append([TopologyHint(None, True)])
            continue
        for resource in sorted(hints):
            resource_hints = hints[resource]
            if resource_hints is None:
                all_hints.append([TopologyHint(None, True)])
            elif not resource_hints:
                all_hints.append([TopologyHint(None, False)])
            else:
                all_hints.append(list(resource_hints))
    return all_hints


def narrowest_hint(hints: Sequence[TopologyHint]) -> TopologyHint | None:
    narrowest: TopologyHint | None = None
    for hint in hints:
        if hint.affinity is None:
            continue
        if narrowest is None or hint.affinity.is_narrower_than(narrowest.affinity or BitMask()):
            narrowest = hint
    return narrowest


def max_of_min_affinity_counts(filtered: Sequence[Sequence[TopologyHint]]) -> int:
    """The widest of the resources' narrowest hints: a non-preferred merge aims at this width."""
    best = 0
    for hints in filtered:
        narrowest = narrowest_hint(hints)
        if narrowest is not None and narrowest.affinity is not None:
            best = max(best, narrowest.affinity.count())
    return best


def merge_permutation(default_affinity: BitMask, permutation: Sequence[TopologyHint]) -> TopologyHint:
    preferred = True
    masks = [hint.affinity for hint in permutation if hint.affinity is not None]
    if any(not mask.is_equal(masks[0]) for mask in masks):
        preferred = False
    if any(not hint.preferred for hint in permutation):
        preferred = False
    return TopologyHint(default_affinity.and_(*masks), preferred)


def iterate_permutations(all_hints: Sequence[Sequence[TopologyHint]]) -> Iterator[tuple[TopologyHint, ...]]:
    """Every choice of one hint per resource, the first resource varying slowest (kube's order)."""
    return product(*all_hints)


Compare = Callable[[TopologyHint, TopologyHint], TopologyHint]


@dataclass
class HintMerger:
    numa_info: NUMAInfo
    hints: Sequence[Sequence[TopologyHint]]
    policy_name: str
    options: PolicyOptions = field(default_factory=PolicyOptions)
    best_non_preferred_affinity_count: int = -1

    def __post_init__(self) -> None:
        if self.best_non_preferred_affinity_count < 0:
            self.best_non_preferred_affinity_count = max_of_min_affinity_counts(self.hints)

    def compare_masks(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        """The fitter of two hints' masks: the narrower, or with prefer-closest-numa-nodes (not under
        single-numa-node) the closer; the current one on a tie."""
        assert current.affinity is not None and candidate.affinity is not None
        if candidate.affinity.is_equal(current.affinity):
            return current
        if self.policy_name != SINGLE_NUMA_NODE and self.options.prefer_closest_numa:
            best = self.numa_info.closest(current.affinity, candidate.affinity)
        else:
            best = self.numa_info.narrowest(current.affinity, candidate.affinity)
        return current if best.is_equal(current.affinity) else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        """Which of the best hint so far and a merged candidate to keep (kube's HintMerger.compare)."""
        if candidate.affinity is None or candidate.affinity.count() == 0:
            return current
        if current is None:
            return candidate
        if current.preferred != candidate.preferred:
            return candidate if candidate.preferred else current
        if current.preferred:
            return self.compare_masks(current, candidate)
        assert current.affinity is not None
        # Both non-preferred: get as close as possible to, without exceeding, the target width.
        target = self.best_non_preferred_affinity_count
        have, offered = current.affinity.count(), candidate.affinity.count()
        if have > target:
            return self.compare_masks(current, candidate)
        if have == target:
            return self.compare_masks(current, candidate) if offered == target else current
        if offered > target:
            return current
        if offered == target:
            return candidate
        if offered != have:
            return candidate if offered > have else current
        return self.compare_masks(current, candidate)

    def merge(self) -> TopologyHint:
        default_affinity = self.numa_info.default_affinity()
        best: TopologyHint | None = None
        for permutation in iterate_permutations(self.hints):
            best = self.compare(best, merge_permutation(default_affinity, permutation))
        return best if best is not None else TopologyHint(default_affinity, False)
