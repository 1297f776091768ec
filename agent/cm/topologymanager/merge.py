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

from collections.abc import Iterator, Sequence
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


# A hint in the merge's hot loop: (mask as an integer, or None for "any"; preferred). Merging is
# exponential in the NUMA node count, so the loop works on integers, not on hint objects.
Flat = tuple[int | None, bool]


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
        self._closest = self.policy_name != SINGLE_NUMA_NODE and self.options.prefer_closest_numa

    def _fitter_is_candidate(self, current: int, candidate: int) -> bool:
        """The fitter of two masks: the narrower, or with prefer-closest-numa-nodes (not under
        single-numa-node) the closer; the current one on a tie."""
        if candidate == current:
            return False
        if self._closest:
            return self.numa_info.closest(BitMask(current), BitMask(candidate)).value == candidate
        have, offered = current.bit_count(), candidate.bit_count()
        return offered < have or (offered == have and candidate < current)

    def _candidate_wins(self, current: tuple[int, bool] | None, candidate: tuple[int, bool]) -> bool:
        """Whether a merged candidate replaces the best hint so far (kube's HintMerger.compare)."""
        mask, preferred = candidate
        if mask == 0:
            return False
        if current is None:
            return True
        best, best_preferred = current
        if best_preferred != preferred:
            return preferred
        if best_preferred:
            return self._fitter_is_candidate(best, mask)
        # Both non-preferred: get as close as possible to, without exceeding, the target width.
        target = self.best_non_preferred_affinity_count
        have, offered = best.bit_count(), mask.bit_count()
        if have > target:
            return self._fitter_is_candidate(best, mask)
        if have == target:
            return offered == target and self._fitter_is_candidate(best, mask)
        if offered > target:
            return False
        if offered == target:
            return True
        if offered != have:
            return offered > have
        return self._fitter_is_candidate(best, mask)

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        """Which of the best hint so far and a merged candidate to keep (kube's HintMerger.compare)."""
        if candidate.affinity is None:
            return current
        flat = (
            None
            if current is None or current.affinity is None
            else (current.affinity.value, current.preferred)
        )
        return (
            candidate
            if self._candidate_wins(flat, (candidate.affinity.value, candidate.preferred))
            else current
        )

    def merge(self) -> TopologyHint:
        """The best of every permutation's merge (merge_permutation), kube's iteration order kept."""
        default = self.numa_info.default_affinity().value
        flat: list[list[Flat]] = [
            [(None if h.affinity is None else h.affinity.value, h.preferred) for h in hints]
            for hints in self.hints
        ]
        best: tuple[int, bool] | None = None

        def walk(index: int, value: int, preferred: bool, first: int | None) -> None:
            nonlocal best
            if index == len(flat):
                if self._candidate_wins(best, (value, preferred)):
                    best = (value, preferred)
                return
            for mask, hint_preferred in flat[index]:
                if mask is None:
                    walk(index + 1, value, preferred and hint_preferred, first)
                else:
                    same = first is None or mask == first
                    walk(
                        index + 1,
                        value & mask,
                        preferred and hint_preferred and same,
                        mask if first is None else first,
                    )

        walk(0, default, True, None)
        if best is None:
            return TopologyHint(BitMask(default), False)
        return TopologyHint(BitMask(best[0]), best[1])
