"""Free matching devices per node, as one array over the node table: the vectorised Filter for simple pods.

Most pods ask for N devices of one kind: every request of their claims is an ExactCount request
without adminAccess, with the same class and selectors, and the claims have no constraints. On
node-local devices the allocator's answer for such a pod is exact arithmetic: the node fits iff
its free devices matching that selection number at least the sum of the counts. So for each
selection (class selectors + request selectors) seen, an array over node slots holds that
number, built once from the node-local slices' devices (complete, valid pools only, as the
allocator takes them) and kept current as devices are taken and freed (DraState's listeners);
any slice change, or a node added or removed (the engine calls `invalidate`), rebuilds it on
next use. The Filter is then one comparison over all nodes and the allocator runs only on the
node chosen (at Reserve).

Where this does not hold (several different selections, constraints, firstAvailable, All,
adminAccess, an allocated claim, or a network-attached slice anywhere), `simple` says no and the
allocator runs on every node.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from kubenode.dra.types import EXACT_COUNT, Device, DeviceResult, ResourceClaim, ResourceSlice
from kubenode.model.objects import Node
from scheduler.dra.allocator import DeviceID
from scheduler.dra.pools import Pool
from scheduler.dra.results import ClaimAllocation, allocation_config, node_selector
from scheduler.dra.state import DraState
from scheduler.nodetable import NodeTable

IntArray = npt.NDArray[np.int64]
Selection = tuple[str, ...]  # the class's selectors, then the request's


class FreeCounts:
    def __init__(self, state: DraState, pools: Any) -> None:
        self.state = state
        self._pools = pools  # node -> list[Pool] (the plugin's cache)
        self._arrays: dict[Selection, IntArray] = {}
        # selection -> the indexed devices it matches, free or not: its verdicts, taken once for all, so
        # Reserve and each device taken or freed ask a set, not the matcher (built and dropped with the array)
        self._matching: dict[Selection, set[Device]] = {}  # devices hash by identity
        self._devices: dict[DeviceID, tuple[int, str, Device]] = {}  # device -> (slot, driver, device)
        self._slots: dict[str, int] | None = None  # the node table's slots the index was built for
        state.listeners.append(self._device_changed)

    def invalidate(self) -> None:
        self._arrays.clear()
        self._matching.clear()
        self._slots = None

    def simple(self, claims: list[ResourceClaim]) -> tuple[Selection, int] | None:
        """The pod's one selection and how many devices it needs, when the arithmetic is exact."""
        if self.state.network_slices:
            return None
        selection: Selection | None = None
        need = 0
        for claim in claims:
            if claim.constraints or self.state.is_allocated(claim):
                return None
            for request in claim.requests:
                exact = request.exactly
                if exact is None or exact.mode != EXACT_COUNT or exact.admin_access:
                    return None
                device_class = self.state.classes.get(exact.device_class)
                if device_class is None:
                    return None
                this = (*device_class.selectors, "", *exact.selectors)
                if selection is not None and this != selection:
                    return None
                selection, need = this, need + exact.count
        return (selection, need) if selection is not None else None

    def free(self, table: NodeTable, selection: Selection) -> IntArray:
        if self._slots is None or len(self._slots) != len(table.slot):
            self._rebuild(table)
        array = self._arrays.get(selection)
        if array is None:
            expressions, used, matches = (
                _expressions(selection),
                self.state.is_used,
                self.state.matcher.all_match,
            )
            matching, free_slots = set(), []
            for device_id, (slot, driver, device) in self._devices.items():
                if matches(driver, device, expressions):
                    matching.add(device)
                    if not used(device_id):
                        free_slots.append(slot)
            # counted in one step: an item increment on an array costs more than the device's verdict
            array = np.bincount(np.asarray(free_slots, np.int64), minlength=table.size).astype(np.int64)
            self._arrays[selection] = array
            self._matching[selection] = matching
        return array

    def allocate(
        self, node: Node, pools: list[Pool], claims: list[ResourceClaim], simple: tuple[Selection, int]
    ) -> list[ClaimAllocation] | None:
        """A simple pod's allocation on one node: the first free matching devices in the allocator's
        order (pools, slices, devices), given to the requests in order; the allocator's own answer for
        such a pod, without its search. None if the node has too few."""
        selection, need = simple
        expressions = _expressions(selection)
        used = self.state.is_used
        matching = self._matching.get(selection)  # None after a slice change, until the next PreFilter
        # the free matching devices, in order, as far as the pod needs them (a plain loop: this runs
        # at every Reserve, and a generator's frames cost more than the few devices it looks at)
        free: list[tuple[Pool, ResourceSlice, Device]] = []
        for pool in pools:
            if pool.incomplete or pool.invalid:
                continue
            driver, pool_name = pool.driver, pool.name
            for resource_slice, device in pool.entries:
                device_id = (driver, pool_name, device.name)
                if used(device_id):
                    continue
                if (matching is not None and device in matching) or self._matches_outside(
                    matching is not None, device_id, driver, device, expressions
                ):
                    free.append((pool, resource_slice, device))
                    if len(free) == need:
                        break
            if len(free) == need:
                break
        if len(free) < need:
            return None
        taking = iter(free)
        allocations = []
        for claim in claims:
            results, slices, chosen = [], [], []
            for request in claim.requests:
                exact = request.exactly
                assert exact is not None  # simple() took only such requests
                for _ in range(exact.count):
                    pool, resource_slice, device = next(taking)
                    results.append(DeviceResult(request.name, pool.driver, pool.name, device.name))
                    slices.append(resource_slice)
                chosen.append((request.name, self.state.classes[exact.device_class]))
            config = allocation_config(claim, chosen)
            allocations.append(ClaimAllocation(claim, tuple(results), config, node_selector(node, slices)))
        return allocations

    def _matches_outside(
        self, indexed: bool, device_id: DeviceID, driver: str, device: Device, expressions: tuple[str, ...]
    ) -> bool:
        """A device not in the selection's matching set: it does not match where the index holds it (its
        verdict was taken then), else the matcher says (no set since a slice change, or the index holds
        another node's device of the same ID)."""
        if indexed:
            known = self._devices.get(device_id)
            if known is not None and known[2] is device:
                return False
        return self.state.matcher.all_match(driver, device, expressions)

    def _rebuild(self, table: NodeTable) -> None:
        self._arrays.clear()
        self._matching.clear()
        self._devices.clear()
        self._slots = dict(table.slot)
        for slot in self._slots.values():
            pools: list[Pool] = self._pools(table.node(slot))
            for pool in pools:
                if pool.incomplete or pool.invalid:
                    continue
                for _, device in pool.entries:
                    self._devices[(pool.driver, pool.name, device.name)] = (slot, pool.driver, device)

    def _device_changed(self, device_id: DeviceID, used: bool) -> None:
        known = self._devices.get(device_id)
        if known is None:
            return
        slot, _, device = known
        for selection, array in self._arrays.items():
            if slot < len(array) and device in self._matching[selection]:
                array[slot] += -1 if used else 1


@functools.lru_cache(maxsize=256)
def _expressions(selection: Selection) -> tuple[str, ...]:
    return tuple(expression for expression in selection if expression)
