"""Which devices a container gets: the kubelet's NUMA-aware choice with an optional GetPreferredAllocation.

Rules followed (kubelet `devicesToAllocate`/`filterByAffinity`):
- devices are split into aligned (a NUMA node in the hint), unaligned (NUMA nodes, none in the hint) and
  no-affinity (no topology);
- if fewer are needed than there are aligned devices, the plugin's preference is asked among the aligned ones
  and the rest is filled from them;
- otherwise every aligned device is taken, the plugin is asked with those as must-include, and the rest is
  filled from unaligned, then no-affinity devices.
Answers from the plugin are only hints: IDs that are not candidates or repeat are ignored, and a short answer
is completed in advertised order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent.cm.devicemanager.records import AllocationError, Device

# (available IDs, must-include IDs, allocation size) -> the plugin's preferred IDs.
AskPreferred = Callable[[list[str], list[str], int], list[str]]


def select_devices(
    resource: str,
    free: Sequence[Device],
    count: int,
    numa_hint: frozenset[int] | None,
    ask_preferred: AskPreferred | None,
) -> list[str]:
    """Choose `count` IDs from `free` (healthy, unallocated, in advertised order)."""
    if count > len(free):
        raise AllocationError(
            f"requested number of devices unavailable for {resource}. "
            f"Requested: {count}, Available: {len(free)}"
        )
    topology_aware = any(d.numa_nodes for d in free)
    if numa_hint is None or not topology_aware:
        return _prefer_then_fill([d.id for d in free], [], count, ask_preferred)
    aligned = [d.id for d in free if d.numa_nodes & numa_hint]
    if count < len(aligned):
        return _prefer_then_fill(aligned, [], count, ask_preferred)
    unaligned = [d.id for d in free if d.numa_nodes and not d.numa_nodes & numa_hint]
    no_affinity = [d.id for d in free if not d.numa_nodes]
    chosen = aligned[:count]
    if len(chosen) == count:
        return chosen
    return _prefer_then_fill(unaligned + no_affinity, chosen, count, ask_preferred)


def _prefer_then_fill(
    candidates: list[str], chosen: list[str], count: int, ask: AskPreferred | None
) -> list[str]:
    picked = list(chosen)
    allowed = set(candidates)
    if ask is not None:
        for device_id in ask(chosen + candidates, list(chosen), count):
            if len(picked) == count:
                break
            if device_id in allowed and device_id not in picked:
                picked.append(device_id)
    for device_id in candidates:
        if len(picked) == count:
            break
        if device_id not in picked:
            picked.append(device_id)
    return picked
