"""Every node as a column of numpy matrices, so filters and scores run over all nodes at once.

Rows of `alloc` and `requested` are resources (`pods`, `cpu`, `memory`,
`ephemeral-storage`, then extended resources as they appear); columns are node slots.
`nonzero` holds the cpu and memory requested with kube-scheduler's non-zero defaults
(100m / 200Mi for a container that requests none), which the resource scores use.
The pod count lives in the `pods` row: each pod requests one.

Slots of deleted nodes are reused. Per-pod-signature arrays derived from node labels
and taints (filter codes, preferred-affinity weights, PreferNoSchedule counts) are
cached and patched slot by slot when a node changes, so a new pod with a known
signature costs no per-node Python work.

Every change to a slot (node put or removed, a pod's requests added or taken off) stamps
it with a rising version, so a cache of per-slot results (scheduler/shapecache.py) can
recompute only the slots changed since it last looked.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kubenode.model.objects import Node
from kubenode.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

Int64Array = npt.NDArray[np.int64]
BASE_RESOURCES = (PODS, CPU, MEMORY, EPHEMERAL_STORAGE)
NONZERO_ROW = {CPU: 0, MEMORY: 1}

# Cached per-signature arrays kept at most (each costs 8 bytes per node slot).
MAX_DERIVED = 4096
# A per-node function of a node (labels, taints, ...) evaluated for one pod signature.
NodeFunction = Callable[[Node], int]


class NodeColumns(Protocol):
    """What filters and scores read of node slots: the whole NodeTable, or some of its
    columns (scheduler/shapecache.py). Every per-slot result depends on its own column only."""

    @property
    def size(self) -> int: ...

    @property
    def row(self) -> Mapping[str, int]: ...

    @property
    def alloc(self) -> Int64Array: ...

    @property
    def requested(self) -> Int64Array: ...

    @property
    def nonzero(self) -> Int64Array: ...

    @property
    def active(self) -> npt.NDArray[np.bool_]: ...

    def positive_everywhere(self, resource: str) -> bool: ...

    def derived(self, signature: Hashable, function: NodeFunction) -> Int64Array: ...


class NodeTable:
    def __init__(self, capacity: int = 64) -> None:
        self.resources: list[str] = list(BASE_RESOURCES)
        self.row: dict[str, int] = {name: i for i, name in enumerate(self.resources)}
        self.capacity = capacity
        self.alloc: Int64Array = np.zeros((len(self.resources), capacity), np.int64)
        self.requested: Int64Array = np.zeros((len(self.resources), capacity), np.int64)
        self.nonzero: Int64Array = np.zeros((2, capacity), np.int64)
        self.active = np.zeros(capacity, bool)
        self.nodes: list[Node | None] = []
        self.slot: dict[str, int] = {}
        self._free: list[int] = []
        # signature -> (function, array over slots)
        self._derived: dict[Hashable, tuple[NodeFunction, Int64Array]] = {}
        self._generation = 0  # bumps when allocatable or the slot set changes
        self._positive: dict[str, tuple[int, bool]] = {}
        self.version = 0  # bumps on every change to any slot
        self.stamp: Int64Array = np.zeros(capacity, np.int64)  # the version of each slot's last change

    # --- size -------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Slots in use (active or free); arrays are sliced to this."""
        return len(self.nodes)

    @property
    def node_count(self) -> int:
        return len(self.slot)

    def _grow(self) -> None:
        extra = self.capacity
        self.capacity *= 2

        def widen(array: Int64Array) -> Int64Array:
            return np.concatenate([array, np.zeros((array.shape[0], extra), np.int64)], axis=1)

        self.alloc, self.requested, self.nonzero = (
            widen(self.alloc),
            widen(self.requested),
            widen(self.nonzero),
        )
        self.active = np.concatenate([self.active, np.zeros(extra, bool)])
        self.stamp = np.concatenate([self.stamp, np.zeros(extra, np.int64)])
        for signature, (function, values) in self._derived.items():
            self._derived[signature] = (function, np.concatenate([values, np.zeros(extra, np.int64)]))

    def resource_row(self, name: str) -> int:
        """The row of a resource, added (zero everywhere) the first time it is seen."""
        row = self.row.get(name)
        if row is None:
            row = len(self.resources)
            self.resources.append(name)
            self.row[name] = row
            zeros = np.zeros((1, self.capacity), np.int64)
            self.alloc = np.concatenate([self.alloc, zeros])
            self.requested = np.concatenate([self.requested, zeros])
        return row

    # --- nodes ------------------------------------------------------------------------
    def put_node(self, node: Node) -> int:
        """Add or replace a node; returns its slot. Requested amounts stay as they were."""
        slot = self.slot.get(node.name)
        if slot is None:
            if self._free:
                slot = self._free.pop()
            else:
                if self.size == self.capacity:
                    self._grow()
                slot = self.size
                self.nodes.append(None)
            self.slot[node.name] = slot
        self._generation += 1
        self._touch(slot)
        self.nodes[slot] = node
        self.active[slot] = True
        self.alloc[:, slot] = 0
        for name, amount in node.allocatable.items():
            row = self.resource_row(name)  # may replace self.alloc: look it up first
            self.alloc[row, slot] = amount
        for function, values in self._derived.values():
            values[slot] = function(node)
        return slot

    def remove_node(self, name: str) -> int | None:
        slot = self.slot.pop(name, None)
        if slot is None:
            return None
        self._generation += 1
        self._touch(slot)
        self.nodes[slot] = None
        self.active[slot] = False
        self.alloc[:, slot] = 0
        self.requested[:, slot] = 0
        self.nonzero[:, slot] = 0
        self._free.append(slot)
        return slot

    def node(self, slot: int) -> Node:
        node = self.nodes[slot]
        if node is None:
            raise KeyError(f"slot {slot} holds no node")
        return node

    @property
    def generation(self) -> int:
        """Bumps when allocatable, labels, taints or the slot set change (not on pods' requests)."""
        return self._generation

    def positive_everywhere(self, resource: str) -> bool:
        """Every slot has allocatable > 0 of it (no free slots, no node lacking it): scores
        can then skip per-node masking."""
        cached = self._positive.get(resource)
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        row = self.row.get(resource)
        value = row is not None and bool((self.alloc[row, : self.size] > 0).all())
        self._positive[resource] = (self._generation, value)
        return value

    def _touch(self, slot: int) -> None:
        self.version += 1
        self.stamp[slot] = self.version

    def changed_since(self, version: int) -> npt.NDArray[np.intp]:
        """Slots (below size) changed after that version."""
        changed: npt.NDArray[np.intp] = np.flatnonzero(self.stamp[: self.size] > version)
        return changed

    # --- requested --------------------------------------------------------------------
    def add_requests(
        self, slot: int, requests: Mapping[str, int], nonzero: Mapping[str, int], sign: int
    ) -> None:
        """Add (sign 1) or remove (sign -1) one pod's requests on a node slot."""
        self._touch(slot)
        self.requested[self.row[PODS], slot] += sign
        for name, amount in requests.items():
            row = self.resource_row(name)  # may replace self.requested: look it up first
            self.requested[row, slot] += sign * amount
        for name, row in NONZERO_ROW.items():
            self.nonzero[row, slot] += sign * nonzero.get(name, 0)

    # --- derived per-signature arrays ---------------------------------------------------
    def derived(self, signature: Hashable, function: NodeFunction) -> Int64Array:
        """function(node) for every slot (0 for free slots), cached by signature."""
        entry = self._derived.get(signature)
        if entry is None:
            if len(self._derived) >= MAX_DERIVED:
                self._derived.clear()  # bound memory when pod shapes churn
            values = np.zeros(self.capacity, np.int64)
            for slot, node in enumerate(self.nodes):
                if node is not None:
                    values[slot] = function(node)
            entry = (function, values)
            self._derived[signature] = entry
        return entry[1][: self.size]

    def forget_derived(self) -> None:
        self._derived.clear()
