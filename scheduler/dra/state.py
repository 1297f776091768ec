"""What the DynamicResources plugin knows: classes, slices, claims, and which devices are taken.

Taken devices are rebuilt from the claims themselves (`status.allocation`), never remembered
apart from them, so a restarted scheduler, or a new leader among several replicas, starts from
what the API says: a device is taken while some claim's allocation names it (results with
adminAccess do not take it, as in kube). On top come the allocations in flight: reserved for a
pod whose claim status is not written yet. A claim this scheduler wrote is kept as written (an
assumed object, as kube's assume cache) until the informer brings a newer one, so the next pod
never sees its devices free in between.

A pod's claims are `spec.resourceClaims[]`: `resourceClaimName` directly, or the claim made
from `resourceClaimTemplateName`, named in `status.resourceClaimStatuses[]`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any

from kubenode.dra.types import DeviceClass, DeviceResult, ResourceClaim, ResourceSlice
from kubenode.model.objects import Pod
from scheduler.dra.allocator import DeviceID
from scheduler.dra.matcher import Matcher
from scheduler.dra.results import ClaimAllocation


@dataclass(frozen=True)
class PodClaims:
    """The claims of one pod, or why they cannot be used yet (kube's PreEnqueue message)."""

    keys: tuple[str, ...]
    waiting: str = ""


def _taken_by(results: Iterable[DeviceResult]) -> list[DeviceID]:
    # a list, not a generator: the results are one or a few devices, and this runs several times a pod
    return [result.device_id for result in results if not result.admin_access]


def _resource_version(claim: ResourceClaim) -> int:
    text = str(claim.raw.get("metadata", {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0


class InUse(Set[DeviceID]):
    def __init__(self, state: DraState) -> None:
        self._state = state

    def __contains__(self, device: object) -> bool:
        return isinstance(device, tuple) and self._state.is_used(device)

    def __iter__(self) -> Iterator[DeviceID]:
        yield from self._state.used_devices()

    def __len__(self) -> int:
        return len(self._state.used_devices())


class DraState:
    def __init__(self) -> None:
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.network_slices = 0  # slices with a nodeSelector or allNodes (see put_slice)
        self._by_node: dict[str, dict[str, ResourceSlice]] = {}  # node-local slices by node, then name
        self._network: dict[str, ResourceSlice] = {}
        self._claims_version = 0  # bumped by every claim change: pod_claims' answers are cached until then
        self._pod_claims: dict[str, tuple[int, Pod, PodClaims]] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.matcher = Matcher()
        self._taken: dict[DeviceID, str] = {}  # device -> the claim (key) it is allocated to
        self._in_flight: dict[str, list[ClaimAllocation]] = {}  # pod key -> allocations reserved for it
        self._in_flight_devices: dict[DeviceID, str] = {}  # device -> pod key
        # claim key -> the allocations in flight for it, first reserved first: with binding asynchronous
        # many pods are in flight, and every Filter asks about each of its claims.
        self._in_flight_claims: dict[str, list[ClaimAllocation]] = {}
        # Told of each device that becomes taken (True) or free (False): the free-device counts.
        self.listeners: list[Callable[[DeviceID, bool], None]] = []

    def used_devices(self) -> set[DeviceID]:
        return set(self._taken) | set(self._in_flight_devices)

    def is_used(self, device: DeviceID) -> bool:
        return device in self._taken or device in self._in_flight_devices

    def _tell(self, before: dict[DeviceID, bool]) -> None:
        for device, was in before.items():
            now = device in self._taken or device in self._in_flight_devices  # is_used, inlined (hot)
            if now != was:
                for listener in self.listeners:
                    listener(device, now)

    def _devices_of(self, *allocations: Iterable[DeviceResult]) -> dict[DeviceID, bool]:
        """Whether each device these results take is in use now, to tell the listeners what changed."""
        before: dict[DeviceID, bool] = {}
        for results in allocations:
            for result in results:
                if not result.admin_access:
                    device = result.device_id
                    before[device] = device in self._taken or device in self._in_flight_devices
        return before

    # --- objects -------------------------------------------------------------------------
    def put_slice(self, resource_slice: ResourceSlice) -> None:
        self.remove_slice(resource_slice.name)
        self.slices[resource_slice.name] = resource_slice
        if resource_slice.node_name:
            self._by_node.setdefault(resource_slice.node_name, {})[resource_slice.name] = resource_slice
        else:
            self._network[resource_slice.name] = resource_slice
        self.network_slices = len(self._network)

    def remove_slice(self, name: str) -> None:
        old = self.slices.pop(name, None)
        if old is not None and old.node_name:
            self._by_node.get(old.node_name, {}).pop(name, None)
        self._network.pop(name, None)
        self.network_slices = len(self._network)

    def slices_for(self, node: str) -> list[ResourceSlice]:
        """The slices that may be on this node: its own and the network-attached ones, in arrival order."""
        return [*self._by_node.get(node, {}).values(), *self._network.values()]

    def put_claim(self, claim: ResourceClaim, assumed: bool = False) -> None:
        old = self.claims.get(claim.key)
        if not assumed and old is not None and _resource_version(old) > _resource_version(claim) > 0:
            return  # older than the object this scheduler wrote: keep the assumed one
        before = self._devices_of(old.allocation or () if old else (), claim.allocation or ())
        self._store(claim)
        self._tell(before)

    def _store(self, claim: ResourceClaim) -> None:
        self._claims_version += 1
        self._forget_devices(claim.key)
        self.claims[claim.key] = claim
        for device in _taken_by(claim.allocation or ()):
            self._taken[device] = claim.key

    def commit(self, pod_key: str, written: list[ResourceClaim]) -> None:
        """PreBind wrote these claims for the pod: they are kept as written (assumed) and its
        allocations are no longer in flight, in one step (the devices stay taken throughout)."""
        allocations = self._in_flight.pop(pod_key, [])
        self._unindex(allocations)
        olds = [old.allocation or () for c in written if (old := self.claims.get(c.key)) is not None]
        before = self._devices_of(
            *(a.results for a in allocations), *olds, *(c.allocation or () for c in written)
        )
        for allocation in allocations:
            for device in _taken_by(allocation.results):
                if self._in_flight_devices.get(device) == pod_key:
                    del self._in_flight_devices[device]
        for claim in written:
            self._store(claim)
        self._tell(before)

    def remove_claim(self, key: str) -> None:
        self._claims_version += 1
        old = self.claims.get(key)
        before = self._devices_of(old.allocation or () if old else ())
        self._forget_devices(key)
        self.claims.pop(key, None)
        self._tell(before)

    def _forget_devices(self, key: str) -> None:
        old = self.claims.get(key)
        for device in _taken_by(old.allocation or ()) if old is not None else ():
            if self._taken.get(device) == key:
                del self._taken[device]

    # --- devices -------------------------------------------------------------------------
    def in_use(self) -> InUse:
        """The devices taken or in flight, as a live view (no copy per scheduling cycle)."""
        return InUse(self)

    def holder(self, device: DeviceID) -> str:
        return self._taken.get(device) or self._in_flight_devices.get(device, "")

    def reserve(self, pod_key: str, allocations: list[ClaimAllocation]) -> None:
        if pod_key in self._in_flight:
            self.unreserve(pod_key)
        before = self._devices_of(*(a.results for a in allocations))
        self._in_flight[pod_key] = allocations
        for allocation in allocations:
            self._in_flight_claims.setdefault(allocation.claim.key, []).append(allocation)
            for device in _taken_by(allocation.results):
                self._in_flight_devices[device] = pod_key
        self._tell(before)

    def unreserve(self, pod_key: str) -> list[ClaimAllocation]:
        allocations = self._in_flight.pop(pod_key, [])
        self._unindex(allocations)
        before = self._devices_of(*(a.results for a in allocations))
        for allocation in allocations:
            for device in _taken_by(allocation.results):
                if self._in_flight_devices.get(device) == pod_key:
                    del self._in_flight_devices[device]
        self._tell(before)
        return allocations

    def in_flight(self, pod_key: str) -> list[ClaimAllocation]:
        return self._in_flight.get(pod_key, [])

    def _in_flight_for(self, claim_key: str) -> ClaimAllocation | None:
        allocations = self._in_flight_claims.get(claim_key)
        return allocations[0] if allocations else None

    def _unindex(self, allocations: list[ClaimAllocation]) -> None:
        """Drop these allocations (no longer in flight) from the claim index."""
        for allocation in allocations:
            key = allocation.claim.key
            held = self._in_flight_claims.get(key, ())
            if len(held) == 1 and held[0] is allocation:  # the usual case: one pod's claim
                del self._in_flight_claims[key]
                continue
            others = [a for a in held if a is not allocation]
            if others:
                self._in_flight_claims[key] = others
            else:
                self._in_flight_claims.pop(key, None)

    def is_allocated(self, claim: ResourceClaim) -> bool:
        return claim.allocation is not None or self._in_flight_for(claim.key) is not None

    def as_allocated(self, claim: ResourceClaim) -> ResourceClaim:
        """The claim, with the allocation another pod holds in flight for it written in (if any)."""
        if claim.allocation is not None:
            return claim
        allocation = self._in_flight_for(claim.key)
        if allocation is None:
            return claim
        raw = {**claim.raw, "status": {**(claim.raw.get("status") or {}), "allocation": allocation.to_json()}}
        return claim.with_state(allocation.results, claim.reserved_for, raw)

    # --- pods ----------------------------------------------------------------------------
    def pod_claims(self, pod: Pod) -> PodClaims:
        cached = self._pod_claims.get(pod.key)
        # the same object, or the same pod bound (Pod.bound_to keeps its raw object)
        if cached is not None and cached[0] == self._claims_version and cached[1].raw is pod.raw:
            return cached[2]
        found = self._find_claims(pod)
        if len(self._pod_claims) > 4096:
            self._pod_claims.clear()
        self._pod_claims[pod.key] = (self._claims_version, pod, found)
        return found

    def _find_claims(self, pod: Pod) -> PodClaims:
        spec = pod.raw.get("spec") or {}
        entries = spec.get("resourceClaims") or []
        if not entries:
            return PodClaims(())
        statuses: Mapping[str, Any] = {
            str(s.get("name")): s.get("resourceClaimName")
            for s in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or []
            if isinstance(s, Mapping)
        }
        keys = []
        for entry in entries:
            name = entry.get("resourceClaimName")
            if not name and entry.get("resourceClaimTemplateName"):
                name = statuses.get(entry.get("name"))
                if not name:
                    return PodClaims((), f'pod "{pod.key}": ResourceClaim not created yet')
            if not name:
                continue
            key = f"{pod.namespace}/{name}"
            claim = self.claims.get(key)
            if claim is None:
                return PodClaims((), f'resourceclaim.resource.k8s.io "{name}" not found')
            if claim.deleting:
                return PodClaims((), f'resourceclaim "{name}" is being deleted')
            keys.append(key)
        return PodClaims(tuple(keys))
