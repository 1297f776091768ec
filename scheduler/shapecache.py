"""Filter verdicts and local scores of pods of an equal shape, kept up to date slot by slot.

Pods of one shape (same profile, requests, node name, selector, required affinity and
tolerations) get the same filter verdict and the same NodeResourcesFit and
BalancedAllocation scores on a node as long as that node's column has not changed. The
engine asks `ShapeCache.evaluate` for them: the first pod of a shape computes every slot;
the next recomputes only the slots the NodeTable stamped since (the nodes that got or lost
a pod, or changed), with the very same functions over just those columns (or their
few-operations form in scheduler/shapekernel.py), so the result is identical to
computing every slot again. Feasibility and scores are held in one array (INFEASIBLE
where a node fails), so the engine picks the best node with a max and a compare. Scores
normalised over the feasible nodes (NodeAffinity, TaintToleration) are never cached: the
engine adds them per pod where they differ between nodes.

The engine bypasses the cache where a result depends on more than the node's column:
nominated pods holding resources (reserved), NUMA placements, extenders.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubenode.model.objects import Pod
from scheduler.filters import Demand, run_filters, static_code, static_signature
from scheduler.nodetable import Int64Array, NodeFunction, NodeTable
from scheduler.profile import Profile
from scheduler.scoring import local_scores, normalised_scores_vary
from scheduler.shapekernel import Kernel, build_kernel

BoolArray = npt.NDArray[np.bool_]
# Shapes kept at most (each holds 9 bytes per node slot); the oldest goes first.
MAX_SHAPES = 512
# Past this share of slots changed, computing every slot is as cheap as picking columns.
FULL_RECOMPUTE_SHARE = 0.25
# Below every score (scores are 0 or more): marks an infeasible slot.
INFEASIBLE = -1


class Columns:
    """Some slots of a NodeTable, read as a NodeTable of just those columns (a NodeColumns)."""

    def __init__(self, table: NodeTable, slots: npt.NDArray[np.intp]) -> None:
        self._table = table
        self._slots = slots
        self.row = table.row
        self.alloc: Int64Array = table.alloc[:, slots]
        self.requested: Int64Array = table.requested[:, slots]
        self.nonzero: Int64Array = table.nonzero[:, slots]
        self.active: BoolArray = table.active[slots]

    @property
    def size(self) -> int:
        return len(self._slots)

    def positive_everywhere(self, resource: str) -> bool:
        row = self.row.get(resource)
        return row is not None and bool((self.alloc[row] > 0).all())

    def derived(self, signature: Hashable, function: NodeFunction) -> Int64Array:
        values: Int64Array = self._table.derived(signature, function)[self._slots]
        return values


@dataclass
class ShapeEntry:
    profile: Profile
    kernel: Kernel | None  # the few-operations refresh, where the plain case holds
    version: int  # the table's version these arrays reflect
    resources: int  # the table's resource rows then (a new row drops the entry)
    scores: Int64Array  # local scores where feasible, INFEASIBLE elsewhere
    # scoring.normalised_scores_vary for this shape, as of a table generation (labels and taints).
    vary: tuple[int, bool] = (-1, True)


def shape_key(profile: Profile, pod: Pod, signature: Hashable, demand: Demand) -> Hashable:
    return (
        id(profile),
        signature,
        pod.preferred_node_affinity,
        tuple(demand.requests.items()),
        tuple(demand.nonzero.items()),
    )


class ShapeCache:
    def __init__(self) -> None:
        self._entries: dict[Hashable, ShapeEntry] = {}

    def evaluate(
        self, table: NodeTable, profile: Profile, pod: Pod, demand: Demand
    ) -> tuple[Int64Array, bool]:
        """Local scores (scoring.local_scores) on the nodes run_filters finds feasible with
        nothing reserved, INFEASIBLE (below any score) on the others, over every slot, now;
        and whether the normalised scores may differ between nodes (scoring.normalised_scores_vary).
        The caller must not change the array."""
        entry = self._scores(table, profile, pod, demand)
        if entry.vary[0] != table.generation:
            entry.vary = (table.generation, normalised_scores_vary(table, profile, pod))
        return entry.scores, entry.vary[1]

    def _scores(self, table: NodeTable, profile: Profile, pod: Pod, demand: Demand) -> ShapeEntry:
        signature = static_signature(pod)
        key = shape_key(profile, pod, signature, demand)
        entry = self._entries.get(key)
        n = table.size
        if entry is None or entry.profile is not profile or entry.resources != len(table.resources):
            entry = self._compute(table, profile, pod, demand)
            self._entries.pop(key, None)
            if len(self._entries) >= MAX_SHAPES:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = entry
            return entry
        changed = table.changed_since(entry.version)
        if len(changed) > FULL_RECOMPUTE_SHARE * n:
            self._entries[key] = entry = self._compute(table, profile, pod, demand)
            return entry
        if len(entry.scores) < n:  # new slots: their stamps are newer, so they are in `changed`
            entry.scores = np.concatenate(
                [entry.scores, np.full(n - len(entry.scores), INFEASIBLE, np.int64)]
            )
        if len(changed):
            fresh = None
            if entry.kernel is not None:
                codes = table.derived(signature, lambda node: static_code(pod, node))
                fresh = entry.kernel.refresh(table, codes, changed)
            if fresh is None:
                columns = Columns(table, changed)
                fresh = run_filters(columns, pod, demand, {}).feasible, local_scores(columns, profile, demand)
            feasible, local = fresh
            entry.scores[changed] = np.where(feasible, local, INFEASIBLE)
        entry.version = table.version
        return entry

    @staticmethod
    def _compute(table: NodeTable, profile: Profile, pod: Pod, demand: Demand) -> ShapeEntry:
        feasible = run_filters(table, pod, demand, {}).feasible
        scores = np.where(feasible, local_scores(table, profile, demand), INFEASIBLE)
        kernel = build_kernel(table, profile, demand)
        return ShapeEntry(profile, kernel, table.version, len(table.resources), scores)
