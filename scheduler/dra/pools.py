"""Which devices a node can use: its ResourcePools, gathered from ResourceSlices as kube's GatherPools does.

A slice is available on a node when its `nodeName` is the node, it has `allNodes`, or its
`nodeSelector` matches the node. Slices group into pools by (driver, pool name); only the
slices of a pool's newest generation count; a pool with fewer slices at that generation than
`resourceSliceCount` is incomplete (ExactCount requests skip it, `All` requests fail on it), and
one that names a device twice is invalid. Pools come back sorted by driver then pool name: the
allocator's search order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubenode.dra.types import Device, ResourceSlice
from kubenode.model.matching import term_matches
from kubenode.model.objects import Node, NodeSelectorRequirement, NodeSelectorTerm


@dataclass
class Pool:
    driver: str
    name: str
    generation: int
    slice_count: int
    slices: list[ResourceSlice] = field(default_factory=list)
    invalid: str = ""  # why the pool cannot be used ("" when it can)
    entries: list[tuple[ResourceSlice, Device]] = field(default_factory=list)  # every device, in order

    @property
    def incomplete(self) -> bool:
        return len(self.slices) < self.slice_count


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            str(r.get("key", "")), str(r.get("operator", "")), tuple(r.get("values") or ())
        )
        for r in items or ()
        if isinstance(r, Mapping)
    )


def selector_terms(selector: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """A core/v1 NodeSelector's terms (ORed), as the scheduler's node matching reads them."""
    return tuple(
        NodeSelectorTerm(_requirements(term.get("matchExpressions")), _requirements(term.get("matchFields")))
        for term in selector.get("nodeSelectorTerms") or ()
        if isinstance(term, Mapping)
    )


def selector_matches(selector: Mapping[str, Any], node: Node) -> bool:
    return any(term_matches(term, node) for term in selector_terms(selector))


def slice_on_node(resource_slice: ResourceSlice, node: Node) -> bool:
    if resource_slice.node_name:
        return resource_slice.node_name == node.name
    if resource_slice.all_nodes:
        return True
    return resource_slice.node_selector is not None and selector_matches(resource_slice.node_selector, node)


def gather_pools(slices: Iterable[ResourceSlice], node: Node) -> list[Pool]:
    pools: dict[tuple[str, str], Pool] = {}
    for resource_slice in slices:
        if not slice_on_node(resource_slice, node):
            continue
        key = (resource_slice.driver, resource_slice.pool)
        pool = pools.get(key)
        if pool is None or resource_slice.generation > pool.generation:
            pool = pools[key] = Pool(*key, resource_slice.generation, resource_slice.slice_count)
        elif resource_slice.generation < pool.generation:
            continue  # an older generation: being replaced
        pool.slices.append(resource_slice)
    for pool in pools.values():
        pool.entries = [
            (resource_slice, device) for resource_slice in pool.slices for device in resource_slice.devices
        ]
        seen: set[str] = set()
        for _, device in pool.entries:
            if device.name in seen:
                pool.invalid = f"device {device.name} appears more than once"
                break
            seen.add(device.name)
    return [pools[key] for key in sorted(pools)]
