"""The machine's NUMA nodes and their distances (the kubelet's topologymanager/numa_info.go).

Nodes come from sysfs (`<root>/devices/system/node/node<N>`), or from a list for tests and fake
topologies; each node's distance row is `node<N>/distance` ("10 21"), indexed by node id. The
distances are needed only by the prefer-closest-numa-nodes option: without it a missing file is
no error. `closest` compares masks of equal width by their average pairwise distance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.cm.topologymanager.bitmask import BitMask

NODE_DIR = "devices/system/node"
_NODE_NAME = re.compile(r"^node(\d+)$")


class NUMAInfoError(ValueError):
    pass


@dataclass(frozen=True)
class NUMAInfo:
    nodes: tuple[int, ...]
    distances: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def including(self, nodes: Iterable[int]) -> NUMAInfo:
        """This machine with `nodes` added: nodes that devices report though sysfs does not list them (a
        fake topology's static devices, on a machine with fewer nodes). Their distances are unknown, so
        `distance` gives them the kernel's defaults."""
        extra = set(nodes) - set(self.nodes)
        if not extra:
            return self
        return NUMAInfo(tuple(sorted({*self.nodes, *extra})), self.distances)

    def default_affinity(self) -> BitMask:
        """Every NUMA node of the machine."""
        return BitMask.of(*self.nodes)

    def narrowest(self, first: BitMask, second: BitMask) -> BitMask:
        return first if first.is_narrower_than(second) else second

    def closest(self, first: BitMask, second: BitMask) -> BitMask:
        """The narrower mask; between masks as wide, the one with the shorter average distance,
        then the one with more lower-numbered nodes."""
        if first.count() != second.count():
            return self.narrowest(first, second)
        first_distance = average_distance(self.distances, first)
        second_distance = average_distance(self.distances, second)
        if first_distance == second_distance:
            return first if first.is_less_than(second) else second
        return first if first_distance < second_distance else second


LOCAL_DISTANCE, REMOTE_DISTANCE = 10, 20  # the kernel's defaults (include/linux/topology.h)


def distance(distances: Mapping[int, Sequence[int]], a: int, b: int) -> int:
    """The sysfs distance from node a to node b; the kernel's default where sysfs has no value for the pair
    (a node only devices report)."""
    row = distances.get(a)
    if row is not None and b < len(row):
        return row[b]
    return LOCAL_DISTANCE if a == b else REMOTE_DISTANCE


def average_distance(distances: Mapping[int, Sequence[int]], mask: BitMask) -> float:
    """Mean of the distances between every ordered pair of the mask's nodes (a node to itself included)."""
    bits = mask.bits()
    if not bits:
        return 0.0
    total = sum(distance(distances, a, b) for a in bits for b in bits)
    return total / (len(bits) * len(bits))


def split_distances(text: str) -> list[int]:
    """A sysfs distance row, "10 21", as integers; NUMAInfoError names a value that is not one."""
    values = []
    for word in text.split():
        if not word.isdigit():
            raise NUMAInfoError(f"cannot convert {word!r} to uint64")
        values.append(int(word))
    return values


def sysfs_nodes(sysfs_root: str | Path) -> list[int]:
    """The NUMA node ids under sysfs, sorted; [0] for a machine without a node directory."""
    base = Path(sysfs_root, NODE_DIR)
    try:
        ids = sorted(int(m.group(1)) for p in base.iterdir() if (m := _NODE_NAME.match(p.name)))
    except OSError:
        return [0]
    return ids or [0]


def read_distances(sysfs_root: str | Path, node: int) -> list[int]:
    path = Path(sysfs_root, NODE_DIR, f"node{node}", "distance")
    try:
        return split_distances(path.read_text())
    except OSError as err:
        raise NUMAInfoError(f"cannot read {path}: {err.strerror or err}") from None


def numa_info(nodes: Sequence[int], sysfs_root: str | Path, *, need_distances: bool) -> NUMAInfo:
    """NUMAInfo of these nodes with their distances from sysfs; missing distances are an error only
    when `need_distances` (the prefer-closest-numa-nodes option)."""
    distances: dict[int, list[int]] = {}
    for node in nodes:
        try:
            distances[node] = read_distances(sysfs_root, node)
        except NUMAInfoError:
            if need_distances:
                raise
    return NUMAInfo(tuple(sorted(nodes)), distances)
