"""The Topology Manager's policies (the kubelet's policy_none/best_effort/restricted/single_numa_node.go).

- none: no merge, every pod admitted, no affinity;
- best-effort: merge, always admit (the merged affinity still guides allocation);
- restricted: merge, admit only a preferred result;
- single-numa-node: keep only "any" and single-node preferred hints, merge, admit only a preferred
  result; a result spanning every node is reported as "any".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.cm.topologymanager.hints import ProviderHints, TopologyHint
from agent.cm.topologymanager.merge import SINGLE_NUMA_NODE, HintMerger, filter_providers_hints
from agent.cm.topologymanager.numainfo import NUMAInfo
from agent.cm.topologymanager.options import PolicyOptions

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)


@dataclass(frozen=True)
class Policy:
    """A policy's name, the machine's NUMA nodes and the options; `merge` gives (best hint, admit)."""

    name: str
    numa_info: NUMAInfo
    options: PolicyOptions = field(default_factory=PolicyOptions)

    def can_admit(self, hint: TopologyHint) -> bool:
        return self.name in (NONE, BEST_EFFORT) or hint.preferred

    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        if self.name == NONE:
            return TopologyHint(), True
        filtered = filter_providers_hints(providers_hints)
        # Every node a hint names is a node of the machine (see DeviceManagerProvider), listed by sysfs or
        # not: "every node" (the default affinity, and "any" under single-numa-node) must count it too, or
        # a mask of the only node sysfs lists would read as "anywhere" while devices lie on another one.
        info = self.numa_info.including(hinted_nodes(filtered))
        if self.name == SINGLE_NUMA_NODE:
            filtered = filter_single_numa_hints(filtered)
        best = HintMerger(info, filtered, self.name, self.options).merge()
        spans_all = best.affinity is not None and best.affinity.is_equal(info.default_affinity())
        if self.name == SINGLE_NUMA_NODE and spans_all:
            best = TopologyHint(None, best.preferred)
        return best, self.can_admit(best)


def hinted_nodes(all_hints: Sequence[Sequence[TopologyHint]]) -> set[int]:
    return {
        node
        for hints in all_hints
        for hint in hints
        if hint.affinity is not None
        for node in hint.affinity.bits()
    }


def filter_single_numa_hints(all_hints: Sequence[Sequence[TopologyHint]]) -> list[list[TopologyHint]]:
    """Per resource, only the preferred hints that are "any" or name exactly one NUMA node."""
    return [
        [hint for hint in hints if hint.preferred and (hint.affinity is None or hint.affinity.count() == 1)]
        for hints in all_hints
    ]


def is_alignment_guaranteed(policy: Policy) -> bool:
    """Whether an admitted pod is certainly aligned (kube's IsAlignmentGuaranteed)."""
    return policy.name == SINGLE_NUMA_NODE
