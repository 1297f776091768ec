"""The shape cache's refresh of a few changed slots in a handful of array operations.

`filters.run_filters` and `scoring.local_scores` are general (masks for nodes lacking a
resource, RequestedToCapacityRatio shapes, any number of balanced resources), and on the
~100 slots that change between two pods of one shape their cost is the count of numpy
calls, not the slots. A `Kernel` is built once per shape where the plain case holds:
LeastAllocated or MostAllocated, every checked resource known to the table, at most two
balanced resources, the fit's base row of one kind. It gathers the changed columns once
and evaluates every resource at a time, with the very formulas and operation order of
the general code (so the integers and floats are the same), and it declines (returns
None) where a changed slot lacks a scored resource: the general code masks those, and
the cache falls back to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubenode.model.resources import PODS
from scheduler.filters import OK, Demand
from scheduler.nodetable import NONZERO_ROW, Int64Array, NodeTable
from scheduler.profile import BALANCED, FIT, LEAST_ALLOCATED, MOST_ALLOCATED, Profile
from scheduler.scoring import MAX_NODE_SCORE, is_scalar

BoolArray = npt.NDArray[np.bool_]
IndexArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Kernel:
    check_rows: IndexArray  # the pod count and every checked resource
    check_amounts: Int64Array  # (rows, 1)
    fit_weight: int  # the profile's NodeResourcesFit weight (0: off)
    least: bool  # LeastAllocated, else MostAllocated
    fit_rows: IndexArray  # allocatable rows of the scored resources
    fit_base_rows: IndexArray  # their requested rows, in `nonzero` or in `requested`
    fit_base_nonzero: bool
    fit_amounts: Int64Array  # (rows, 1) the pod's non-zero requests
    fit_weights: Int64Array  # (rows, 1)
    fit_weight_sum: int
    balanced_weight: int  # 0: off
    balanced_rows: IndexArray
    balanced_amounts: Int64Array  # (rows, 1) the pod's actual requests
    balanced_skip: bool  # the pod requests none of the balanced resources: 0 everywhere
    scored_rows: IndexArray  # fit_rows and balanced_rows: allocatable must be positive there
    scored_names: tuple[str, ...]
    # The table generation at which every scored resource was positive on every slot (-1: not seen).
    _positive_at: list[int] = field(default_factory=lambda: [-1])

    def _positive_everywhere(self, table: NodeTable) -> bool:
        if self._positive_at[0] == table.generation:
            return True
        if all(table.positive_everywhere(name) for name in self.scored_names):
            self._positive_at[0] = table.generation
            return True
        return False

    def refresh(
        self, table: NodeTable, codes: Int64Array, slots: IndexArray
    ) -> tuple[BoolArray, Int64Array] | None:
        """(feasible, local scores) on these slots, given the static filter codes of every slot,
        or None where a slot lacks a scored resource. Row indexes are columns ((k, 1)), so one
        fancy index gathers k rows of the changed slots."""
        alloc, requested = table.alloc, table.requested
        if not self._positive_everywhere(table) and not (alloc[self.scored_rows, slots] > 0).all():
            return None
        free = alloc[self.check_rows, slots] - requested[self.check_rows, slots]
        feasible: BoolArray = np.all(free >= self.check_amounts, axis=0)
        feasible &= table.active[slots]
        feasible &= codes[slots] == OK
        local: Int64Array | int = 0
        if self.fit_weight and len(self.fit_rows):
            a = alloc[self.fit_rows, slots]
            base = table.nonzero if self.fit_base_nonzero else requested
            r = base[self.fit_base_rows, slots] + self.fit_amounts
            if self.least:
                score = np.maximum((a - r) * MAX_NODE_SCORE // a, 0)
            else:
                score = np.minimum(r, a) * MAX_NODE_SCORE // a
            fit = (score * self.fit_weights).sum(axis=0)
            local = self.fit_weight * (fit // self.fit_weight_sum if self.fit_weight_sum else fit)
        if self.balanced_weight and not self.balanced_skip:
            if len(self.balanced_rows) < 2:
                local = local + self.balanced_weight * MAX_NODE_SCORE  # trunc((1 - 0.0) * 100)
            else:
                a = alloc[self.balanced_rows, slots]
                fractions = np.minimum(
                    (requested[self.balanced_rows, slots] + self.balanced_amounts) / a, 1.0
                )
                std = np.abs((fractions[0] - fractions[1]) / 2)
                # (1 - std) * 100 is >= 50 here, so the cast truncates as np.trunc does.
                local = local + self.balanced_weight * ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        if isinstance(local, int):
            return feasible, np.full(len(slots), local, np.int64)
        return feasible, local


def _column(values: list[int]) -> Int64Array:
    return np.array(values, np.int64).reshape(-1, 1)


def _rows(rows: list[int]) -> IndexArray:
    """Row indexes as a column, to broadcast against the slots gathered."""
    return np.array(rows, np.intp).reshape(-1, 1)


def build_kernel(table: NodeTable, profile: Profile, demand: Demand) -> Kernel | None:
    """The kernel for pods of this demand under this profile, or None outside the plain case."""
    strategy = profile.scoring
    if strategy.type not in (LEAST_ALLOCATED, MOST_ALLOCATED) or strategy.shape:
        return None
    check = ((PODS, 1), *demand.checked)
    if any(name not in table.row for name, _ in check):
        return None
    fit_weight = profile.weights.get(FIT, 0)
    fit = []  # (name, amount, weight), skipped as scoring.allocatable_and_requested skips
    for resource in strategy.resources if fit_weight else ():
        amount = demand.nonzero.get(resource.name, 0)
        if (amount == 0 and is_scalar(resource.name)) or resource.name not in table.row:
            continue
        fit.append((resource.name, amount, resource.weight))
    in_nonzero = {name in NONZERO_ROW for name, _, _ in fit}
    if len(in_nonzero) > 1:
        return None
    balanced_weight = profile.weights.get(BALANCED, 0)
    resources = profile.balanced_resources if balanced_weight else ()
    balanced = [
        (r.name, demand.requests.get(r.name, 0))
        for r in resources
        if r.name in table.row and not (demand.requests.get(r.name, 0) == 0 and is_scalar(r.name))
    ]
    if len(balanced) > 2:
        return None
    nonzero_base = in_nonzero == {True}
    scored = [name for name, _, _ in fit] + [name for name, _ in balanced]
    return Kernel(
        check_rows=_rows([table.row[name] for name, _ in check]),
        check_amounts=_column([amount for _, amount in check]),
        fit_weight=fit_weight,
        least=strategy.type == LEAST_ALLOCATED,
        fit_rows=_rows([table.row[name] for name, _, _ in fit]),
        fit_base_rows=_rows([NONZERO_ROW[name] if nonzero_base else table.row[name] for name, _, _ in fit]),
        fit_base_nonzero=nonzero_base,
        fit_amounts=_column([amount for _, amount, _ in fit]),
        fit_weights=_column([weight for _, _, weight in fit]),
        fit_weight_sum=sum(weight for _, _, weight in fit),
        balanced_weight=balanced_weight,
        balanced_rows=_rows([table.row[name] for name, _ in balanced]),
        balanced_amounts=_column([amount for _, amount in balanced]),
        balanced_skip=all(demand.requests.get(r.name, 0) == 0 for r in resources),
        scored_rows=_rows([table.row[name] for name in scored]),
        scored_names=tuple(scored),
    )
