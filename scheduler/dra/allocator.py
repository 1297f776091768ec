"""The structured allocator: devices for all of a pod's unallocated claims on one node, or no solution.

Kube's search (dynamic-resource-allocation/structured, the stable allocator): claims in order,
each claim's requests in order, each request's devices one at a time. For one device the
candidates are the node's pools in order (driver, pool name), skipping incomplete and invalid
pools, each pool's slices and devices in order; a candidate must be free (neither allocated to
a claim nor taken earlier in this search; a request with adminAccess may share), match the
class's and the request's selectors, and keep every matchAttribute constraint of the claim. The
search is depth first and backtracks; the first full solution wins. `firstAvailable` tries its
subrequests in order and takes the first that leads to a full solution. `All` takes every
matching device of the node's pools (at least one; an incomplete or invalid pool is an error
then) and fails when any of them is in use.

Errors that no other node could fix either (a missing DeviceClass, an `All` request on a pool
being updated, a constraint that `All` devices cannot meet) raise AllocationError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from kubenode.dra.types import ALL, DeviceClass, DeviceResult, ResourceClaim, Selection
from kubenode.model.objects import Node
from scheduler.dra.matcher import Matcher
from scheduler.dra.pools import Pool
from scheduler.dra.results import ClaimAllocation, allocation_config, node_selector

DeviceID = tuple[str, str, str]  # (driver, pool, device)
MAX_RESULTS = 32  # resourceapi.AllocationResultsMaxSize


class AllocationError(Exception):
    """The claims cannot be allocated on this node for a reason that is not a lack of free devices."""


@dataclass
class _Option:
    """A request, or one subrequest of a firstAvailable request, ready to search."""

    request: str  # the request's name
    sub: str  # the subrequest's name, "" for an exact request
    selection: Selection
    device_class: DeviceClass
    everything: list[tuple[Pool, int, DeviceID]] | None = None  # All: the devices, as (pool, index, id)

    @property
    def full_name(self) -> str:
        return f"{self.request}/{self.sub}" if self.sub else self.request

    @property
    def count(self) -> int:
        return len(self.everything) if self.everything is not None else self.selection.count


class _Constraint:
    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.domain, _, self.ident = attribute.rpartition("/")
        self.value: tuple[str, object] | None = None
        self.members = 0

    def applies(self, option: _Option) -> bool:
        return not self.requests or option.request in self.requests or option.full_name in self.requests


class Allocator:
    def __init__(self, classes: Mapping[str, DeviceClass], in_use: Set[DeviceID], matcher: Matcher) -> None:
        self.classes = classes
        self.in_use = in_use
        self.matcher = matcher

    def allocate(
        self, node: Node, pools: list[Pool], claims: Sequence[ResourceClaim]
    ) -> list[ClaimAllocation] | None:
        """One allocation per claim, in order; None when the node's free devices do not suffice."""
        return _Search(self, node, pools, claims).run()


class _Search:
    def __init__(
        self, owner: Allocator, node: Node, pools: list[Pool], claims: Sequence[ResourceClaim]
    ) -> None:
        self.owner = owner
        self.node = node
        self.pools = pools
        self.claims = claims
        self.taking: dict[DeviceID, set[int]] = {}  # device -> the claims (indices) this search gives it to
        self.results: list[list[tuple[DeviceResult, Pool, int]]] = [[] for _ in claims]
        self.constraints = [
            [_Constraint(c.requests, c.match_attribute) for c in claim.constraints] for claim in claims
        ]
        # (claim index, its options): a flat list of the pod's requests in search order
        self.requests = [
            (index, self._options(claim, request_index))
            for index, claim in enumerate(claims)
            for request_index in range(len(claim.requests))
        ]
        self.chosen: dict[int, _Option] = {}
        for index, claim in enumerate(claims):
            least = sum(min(o.count for o in options) for c, options in self.requests if c == index)
            if least > MAX_RESULTS:
                raise AllocationError(
                    f"claim {claim.key}: number of requested devices {least} "
                    f"exceeds the claim limit of {MAX_RESULTS}"
                )

    def _options(self, claim: ResourceClaim, request_index: int) -> list[_Option]:
        request = claim.requests[request_index]
        pairs = [("", request.exactly)] if request.exactly is not None else list(request.first_available)
        options = []
        for sub, selection in pairs:
            assert selection is not None
            device_class = self.owner.classes.get(selection.device_class)
            if device_class is None:
                raise AllocationError(
                    f"claim {claim.key}, request {request.name}: "
                    f"device class {selection.device_class} does not exist"
                )
            option = _Option(request.name, sub, selection, device_class)
            if selection.mode == ALL:
                option.everything = self._everything(claim, option)
            options.append(option)
        return options

    def _everything(self, claim: ResourceClaim, option: _Option) -> list[tuple[Pool, int, DeviceID]]:
        found = []
        for pool in self.pools:
            state = (
                "currently being updated" if pool.incomplete else "currently invalid" if pool.invalid else ""
            )
            if state:
                raise AllocationError(
                    f"claim {claim.key}, request {option.full_name}: asks for all devices, "
                    f"but resource pool {pool.driver}/{pool.name} is {state}"
                )
            for index, (_, device) in enumerate(pool.entries):
                if self._selectable(pool, index, option):
                    found.append((pool, index, (pool.driver, pool.name, device.name)))
        return found

    def _selectable(self, pool: Pool, index: int, option: _Option) -> bool:
        _, device = pool.entries[index]
        match = self.owner.matcher.all_match
        return match(pool.driver, device, option.device_class.selectors) and match(
            pool.driver, device, option.selection.selectors
        )

    def run(self) -> list[ClaimAllocation] | None:
        if not self._request(0):
            if any(pool.invalid for pool in self.pools):
                raise AllocationError("invalid resource pools were encountered")
            return None
        allocations = []
        for index, claim in enumerate(self.claims):
            chosen = [self.chosen[r] for r, (c, _) in enumerate(self.requests) if c == index]
            results = self.results[index]
            allocations.append(
                ClaimAllocation(
                    claim,
                    tuple(result for result, _, _ in results),
                    allocation_config(claim, [(o.full_name, o.device_class) for o in chosen]),
                    node_selector(self.node, [pool.entries[index][0] for _, pool, index in results]),
                )
            )
        return allocations

    def _request(self, position: int) -> bool:
        if position == len(self.requests):
            return True
        for option in self.requests[position][1]:
            if option.everything is not None and not option.everything:
                continue  # All needs at least one device
            if self._fill(position, option, 0):
                self.chosen[position] = option
                return True
        return False

    def _fill(self, position: int, option: _Option, taken: int) -> bool:
        """Devices `taken`.. of the option, then the requests after it."""
        if taken >= option.count:
            return self._request(position + 1)
        claim_index = self.requests[position][0]
        if len(self.results[claim_index]) + option.count - taken > MAX_RESULTS:
            return False
        if option.everything is not None:
            pool, index, device_id = option.everything[taken]
            if not self._take(claim_index, option, pool, index, device_id, must=True):
                return False
            if self._fill(position, option, taken + 1):
                return True
            self._give_back(claim_index, option, device_id)
            return False
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for index, (_, device) in enumerate(pool.entries):
                device_id = (pool.driver, pool.name, device.name)
                if not self._free(device_id, option, claim_index):
                    continue
                if not self._selectable(pool, index, option):
                    continue
                if not self._take(claim_index, option, pool, index, device_id):
                    continue
                if self._fill(position, option, taken + 1):
                    return True
                self._give_back(claim_index, option, device_id)
        return False

    def _free(self, device_id: DeviceID, option: _Option, claim_index: int) -> bool:
        """Admin access may share a device with other claims, never within its own claim."""
        holders = self.taking.get(device_id)
        if option.selection.admin_access:
            return not holders or claim_index not in holders
        return device_id not in self.owner.in_use and not holders

    def _take(
        self,
        claim_index: int,
        option: _Option,
        pool: Pool,
        index: int,
        device_id: DeviceID,
        must: bool = False,
    ) -> bool:
        if not self._free(device_id, option, claim_index):
            return False
        _, device = pool.entries[index]
        added: list[_Constraint] = []
        for constraint in self.constraints[claim_index]:
            if not constraint.applies(option):
                continue
            value = device.attributes.get(constraint.domain, {}).get(constraint.ident)
            ok = value is not None and (constraint.members == 0 or value == constraint.value)
            if not ok:
                for undo in added:
                    undo.members -= 1
                if must:
                    raise AllocationError(
                        f"claim {self.claims[claim_index].key}, request {option.full_name}: cannot add "
                        f"device {'/'.join(device_id)} because a claim constraint would not be satisfied"
                    )
                return False
            if constraint.members == 0:
                constraint.value = value
            constraint.members += 1
            added.append(constraint)
        self.taking.setdefault(device_id, set()).add(claim_index)
        result = DeviceResult(option.full_name, *device_id, admin_access=option.selection.admin_access)
        self.results[claim_index].append((result, pool, index))
        return True

    def _give_back(self, claim_index: int, option: _Option, device_id: DeviceID) -> None:
        self.results[claim_index].pop()
        self.taking[device_id].discard(claim_index)
        for constraint in self.constraints[claim_index]:
            if constraint.applies(option):
                constraint.members -= 1
