"""Which node a pod goes to, once the filters and scores are known (kube-scheduler's selectHost).

The nominated node if it passes; else the only feasible node; else the best total, ties broken
at random from the engine's seeded source. `pick_by_shape` does the same over the shape cache's
local scores (scheduler/shapecache.py), with the nodes another plugin turned down masked out
(on a copy: the cache's arrays stay as they are).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from scheduler.nodetable import Int64Array
from scheduler.shapecache import INFEASIBLE, BoolArray


def pick(
    feasible: BoolArray, totals: Callable[[], Int64Array], nominated: int | None, rng: random.Random
) -> int | None:
    if nominated is not None and feasible[nominated]:
        return nominated
    slots = np.flatnonzero(feasible)
    if len(slots) <= 1:
        return int(slots[0]) if len(slots) else None
    scores = totals()[slots]
    best = slots[scores == scores.max()]
    return int(best[rng.randrange(len(best))] if len(best) > 1 else best[0])


def pick_by_shape(
    scores: Int64Array,
    vary: bool,
    excluded: BoolArray | None,
    normalised: Callable[[BoolArray], Int64Array],
    nominated: int | None,
    rng: random.Random,
) -> int | None:
    """`vary`: whether the normalised scores differ between nodes (then they are added to the local ones)."""
    if excluded is not None and excluded.any():
        scores = np.where(excluded[: len(scores)], INFEASIBLE, scores)
    if vary:
        feasible = scores > INFEASIBLE
        return pick(feasible, lambda: scores + normalised(feasible), nominated, rng)
    # The normalised scores are the same on every node: the best local score decides, as in pick.
    if nominated is not None and scores[nominated] > INFEASIBLE:
        return nominated
    top = scores.max() if len(scores) else INFEASIBLE
    if top == INFEASIBLE:
        return None
    best = np.flatnonzero(scores == top)
    return int(best[rng.randrange(len(best))] if len(best) > 1 else best[0])
