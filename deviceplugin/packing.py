"""Preferred-allocation packing: fewest NUMA nodes, then keep SMT siblings (or any group) together.

Used by GetPreferredAllocation. The kubelet passes the devices it may use, the
ones it must keep, and how many it needs; it fills any shortfall itself, so
this is a preference, never a hard rule.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol


class Device(Protocol):
    """What packing reads of a `deviceplugin.backend.Device`, named structurally: backend.py imports this
    module, so this one imports nothing back."""

    @property
    def id(self) -> str: ...
    @property
    def numa_nodes(self) -> tuple[int, ...]: ...


_DIGITS = re.compile(r"(\d+)")


def natural_key(device_id: str) -> tuple[tuple[int, int | str], ...]:
    """Sort "cpu2" before "cpu10"."""
    return tuple((1, int(p)) if p.isdigit() else (0, p) for p in _DIGITS.split(device_id) if p)


def pack(
    available: Sequence[Device],
    must_include: Sequence[str],
    size: int,
    group_of: Callable[[str], Hashable] | None = None,
) -> list[str]:
    """Choose `size` IDs: `must_include` first, then from the NUMA node(s) that fit best.

    `group_of` maps an ID to a group (e.g. its physical core) whose members should
    be taken together; groups already touched by must-include IDs are completed first.
    """
    chosen = list(dict.fromkeys(must_include))
    need = size - len(chosen)
    if need <= 0:
        return chosen
    group_of = group_of or (lambda device_id: device_id)
    by_id = {d.id: d for d in available}
    pool = sorted((d for d in available if d.id not in chosen), key=lambda d: natural_key(d.id))
    by_numa: dict[tuple[int, ...], list[Device]] = defaultdict(list)
    for device in pool:
        by_numa[device.numa_nodes].append(device)
    must_numa: dict[tuple[int, ...], int] = defaultdict(int)
    for device_id in chosen:
        if device_id in by_id:
            must_numa[by_id[device_id].numa_nodes] += 1
    touched = {group_of(i) for i in chosen}

    def numa_rank(key: tuple[int, ...]) -> tuple[int, int, int, tuple[int, ...]]:
        count = len(by_numa[key])
        fits = count >= need
        # Nodes holding must-include devices first; then a node that fits alone, the tightest fit
        # (keeps big nodes free); otherwise the biggest node first (fewest nodes overall).
        return (-must_numa[key], 0 if fits else 1, count if fits else -count, key)

    for key in sorted(by_numa, key=numa_rank):
        taken = _take_groups(by_numa[key], need, group_of, touched)
        chosen += taken
        need -= len(taken)
        if need == 0:
            break
    return chosen


def _take_groups(
    devices: Sequence[Device], need: int, group_of: Callable[[str], Hashable], touched: set[Hashable]
) -> list[str]:
    groups: dict[Hashable, list[str]] = defaultdict(list)
    for device in devices:
        groups[group_of(device.id)].append(device.id)
    taken: list[str] = []
    while need > 0 and groups:
        best = min(groups, key=lambda key: _group_rank(len(groups[key]), key in touched, need))
        members = groups.pop(best)[:need]
        touched.add(best)
        taken += members
        need -= len(members)
    return taken


def _group_rank(count: int, touched: bool, need: int) -> tuple[int, int]:
    if touched:
        return (0, 0)  # complete groups we already started (siblings of must-include IDs)
    if count <= need:
        return (1, -count)  # whole groups, largest first
    return (2, count)  # one group must be split: the smallest that covers the rest
