"""The DynamicResources plugin: kube-scheduler's extension points for a pod's ResourceClaims.

- PreEnqueue (`waiting`): every claim of the pod exists and is not being deleted; else the pod
  waits, rejected by this plugin, until a claim event.
- Filter (`filter`): on each node the other filters passed, a claim already allocated must be
  reachable there (its allocation's node selector: "resourceclaim not available on the node"),
  and the unallocated ones must be allocatable from the node's pools given the devices taken or
  in flight ("cannot allocate all claims"; an allocator error is reported as such).
- Reserve/Unreserve (`reserve`/`unreserve`): the chosen node's allocation becomes in flight, so
  the next pods see its devices taken; undone if binding fails.
- PreBind (`pre_bind` on a binding thread, or `pre_bind_async` chained before the Binding on the
  client's reactor, as kube's binding cycle runs beside the next scheduling cycle): each claim's
  `status.allocation` and `status.reservedFor` (the pod) are written through the ClaimWriter; a
  claim already allocated (shared by several pods) only gains the pod in `reservedFor`. A write
  conflict fails the bind and the pod retries, so two scheduler replicas never give one device to
  two claims: the API server's optimistic concurrency decides.
- Events (`put_*`/`remove_*`): a ResourceSlice, DeviceClass or ResourceClaim change requeues the
  pods this plugin rejected (`on_change`).

Only the public resource.k8s.io/v1 objects are read and written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from kubenode.dra.types import DeviceClass, DeviceResult, ResourceClaim, ResourceSlice, with_status
from kubenode.model.objects import Node, Pod
from scheduler.dra.allocator import AllocationError, Allocator
from scheduler.dra.counts import FreeCounts, Selection
from scheduler.dra.pools import Pool, gather_pools, selector_matches
from scheduler.dra.results import ClaimAllocation
from scheduler.dra.state import DraState
from scheduler.filters import FilterResult
from scheduler.nodetable import NodeTable
from scheduler.shapecache import BoolArray

PLUGIN = "DynamicResources"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"


class ClaimWriter(Protocol):
    """Writes a claim's status (`allocation`, `reservedFor`); returns the claim as written. Raises on
    a conflict or any API error: the pod's bind then fails and it is retried."""

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim: ...


# A ClaimWriter may also write without waiting: `write_status_async(claim, status, done)` calls
# `done(written, None)` or `done(None, error)` later (ApiClaimWriter, on the client's reactor).
WriteDone = Callable[[ResourceClaim | None, Exception | None], None]


def written_claim(claim: ResourceClaim, status: dict[str, Any], raw: Mapping[str, Any]) -> ResourceClaim:
    """The claim as PreBind wrote it: `raw` (the stored object) with the status PreBind made, which needs
    no parsing; a status the store changed is parsed from `raw`."""
    if raw.get("status") != status:
        return with_status(claim, raw)
    allocation = claim.allocation
    results = (status.get("allocation") or {}).get("devices", {}).get("results")
    if results is not None:
        allocation = tuple(
            DeviceResult(r["request"], r["driver"], r["pool"], r["device"], bool(r.get("adminAccess")))
            for r in results
        )
    return claim.with_state(allocation, tuple(status["reservedFor"]), raw)


class InMemoryClaims:
    """The simulator's writer: the claim's new status becomes its object at once."""

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim:
        meta = dict(claim.raw.get("metadata") or {})
        meta["resourceVersion"] = str(int(str(meta.get("resourceVersion") or "0") or 0) + 1)
        return written_claim(claim, status, {**claim.raw, "metadata": meta, "status": status})


def pod_reference(pod: Pod) -> dict[str, Any]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


class DynamicResources:
    def __init__(
        self, on_change: Callable[[], None] = lambda: None, writer: ClaimWriter | None = None
    ) -> None:
        self.state = DraState()
        self.writer: ClaimWriter = writer or InMemoryClaims()
        self._on_change = on_change
        self._lock = threading.RLock()
        self._pools: dict[str, tuple[Node, list[Pool]]] = {}  # node name -> pools, until a slice changes
        # The pod of the cycle (its raw object), its allocations by node, and its one selection if simple.
        self._cycle: tuple[Any, dict[str, list[ClaimAllocation]], tuple[Selection, int] | None] = (
            None,
            {},
            None,
        )
        self.reasons: dict[str, str] = {}  # node -> why it did not fit, for the last pod filtered
        self.counts = FreeCounts(self.state, self.pools)
        self._table: NodeTable | None = None

    # --- events --------------------------------------------------------------------------
    def put_slice(self, resource_slice: ResourceSlice) -> None:
        with self._lock:
            self.state.put_slice(resource_slice)
            self._pools.clear()
            self.counts.invalidate()
        self._on_change()

    def remove_slice(self, name: str) -> None:
        with self._lock:
            self.state.remove_slice(name)
            self._pools.clear()
            self.counts.invalidate()
        self._on_change()

    def put_class(self, device_class: DeviceClass) -> None:
        with self._lock:
            self.state.classes[device_class.name] = device_class
        self._on_change()

    def remove_class(self, name: str) -> None:
        with self._lock:
            self.state.classes.pop(name, None)
        self._on_change()

    def put_claim(self, claim: ResourceClaim) -> None:
        with self._lock:
            self.state.put_claim(claim)
        self._on_change()

    def remove_claim(self, key: str) -> None:
        with self._lock:
            self.state.remove_claim(key)
        self._on_change()

    # --- extension points ----------------------------------------------------------------
    @staticmethod
    def applies_to(pod: Pod) -> bool:
        return bool((pod.raw.get("spec") or {}).get("resourceClaims"))

    @staticmethod
    def claims_made(old: Pod, new: Pod) -> bool:
        """Whether a pod update named claims made from its templates (`status.resourceClaimStatuses`)."""

        def statuses(pod: Pod) -> Any:
            return (pod.raw.get("status") or {}).get("resourceClaimStatuses")

        return DynamicResources.applies_to(new) and statuses(old) != statuses(new)

    def waiting(self, pod: Pod) -> str:
        """PreEnqueue: "" when every claim of the pod can be used, else why the pod waits."""
        with self._lock:
            return self.state.pod_claims(pod).waiting

    def pools(self, node: Node) -> list[Pool]:
        cached = self._pools.get(node.name)
        if cached is None or cached[0] is not node:
            cached = self._pools[node.name] = (node, gather_pools(self.state.slices_for(node.name), node))
        return cached[1]

    def pre_filter(self, pod: Pod, table: NodeTable) -> tuple[str, BoolArray | None]:
        """PreEnqueue's message ("" if the pod may go on), then `rejected` (None where it cannot say)."""
        with self._lock:
            found = self.state.pod_claims(pod)
            return (found.waiting, None) if found.waiting else ("", self._rejected(pod, table, found.keys))

    def rejected(self, pod: Pod, table: NodeTable) -> BoolArray | None:
        """The nodes this plugin turns down for a simple pod (scheduler/dra/counts.py), in one vectorised
        step; None when the pod is not simple and only `filter` can say."""
        with self._lock:
            return self._rejected(pod, table, self.state.pod_claims(pod).keys)

    def _rejected(self, pod: Pod, table: NodeTable, keys: tuple[str, ...]) -> BoolArray | None:
        with self._lock:
            self._table = table
            claims = [self.state.claims[key] for key in keys]
            simple = self.counts.simple(claims)
            if simple is None:
                return None
            self._cycle = (
                pod.raw,
                {},
                simple,
            )  # the allocation itself is made at Reserve, on the node chosen
            free = self.counts.free(table, simple[0])
            rejected: BoolArray = free < simple[1]
            return rejected

    def filter(self, pod: Pod, table: NodeTable, result: FilterResult) -> None:
        """Filter on every node still feasible; rejections go into `result` under this plugin."""
        rejected = self.rejected(pod, table)
        if rejected is not None:
            self.reasons = {}
            result.reject(PLUGIN, CANNOT_ALLOCATE, rejected[: len(result.feasible)])
            return
        with self._lock:
            claims = [self.state.claims[key] for key in self.state.pod_claims(pod).keys]
            # a claim another pod's allocation holds in flight counts as allocated (kube's assume cache)
            allocated = [self.state.as_allocated(c) for c in claims if self.state.is_allocated(c)]
            pending = [c for c in claims if not self.state.is_allocated(c)]
            allocator = Allocator(self.state.classes, self.state.in_use(), self.state.matcher)
            found: dict[str, list[ClaimAllocation]] = {}
            bad: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}
            self.reasons = {}
            for slot in np.flatnonzero(result.feasible):
                node = table.node(int(slot))
                reason = self._node_reason(node, allocated, pending, allocator, found)
                if reason:
                    self.reasons[node.name] = reason
                    mask = bad.setdefault(reason, np.zeros(len(result.feasible), bool))
                    mask[slot] = True
            self._cycle = (pod.raw, found, None)
            for reason, mask in bad.items():
                result.reject(PLUGIN, reason, mask)

    def _node_reason(
        self,
        node: Node,
        allocated: list[ResourceClaim],
        pending: list[ResourceClaim],
        allocator: Allocator,
        found: dict[str, list[ClaimAllocation]],
    ) -> str:
        for claim in allocated:
            selector = _allocation_selector(claim)
            if selector is not None and not selector_matches(selector, node):
                return NOT_ON_NODE
        if not pending:
            found[node.name] = []
            return ""
        try:
            allocations = allocator.allocate(node, self.pools(node), pending)
        except AllocationError as exc:
            return str(exc)
        if allocations is None:
            return CANNOT_ALLOCATE
        found[node.name] = allocations
        return ""

    def reserve(self, pod: Pod, node: str) -> None:
        with self._lock:
            raw, found, simple = self._cycle
            self._cycle = (None, {}, None)
            allocations = found.get(node) if raw is pod.raw else None
            if allocations is None:  # a simple pod's: allocate on the chosen node now
                allocations = self._allocate_on(pod, node, simple if raw is pod.raw else None)
            self.state.reserve(pod.key, allocations)

    def _allocate_on(
        self, pod: Pod, node_name: str, simple: tuple[Selection, int] | None
    ) -> list[ClaimAllocation]:
        slot = self._table.slot.get(node_name) if self._table is not None else None
        if self._table is None or slot is None:
            return []
        node = self._table.node(slot)
        claims = [self.state.claims[key] for key in self.state.pod_claims(pod).keys]
        pending = [c for c in claims if not self.state.is_allocated(c)]
        if not pending:
            return []
        if simple is None or len(pending) != len(claims):  # the count must be of the pending claims
            simple = self.counts.simple(pending)
        if simple is not None:
            return self.counts.allocate(node, self.pools(node), pending, simple) or []
        allocator = Allocator(self.state.classes, self.state.in_use(), self.state.matcher)
        try:
            return allocator.allocate(node, self.pools(node), pending) or []
        except AllocationError:
            return []  # PreBind finds no allocation and fails the bind: the pod is retried

    def unreserve(self, pod: Pod) -> None:
        with self._lock:
            self.state.unreserve(pod.key)
        self._on_change()  # its devices are free again

    def pre_bind(self, pod: Pod, node: str) -> None:
        """Write each claim's status before the pod is bound. Raises on any failure (then Unreserve)."""
        written = [self.writer.write_status(claim, status) for claim, status in self._statuses(pod, node)]
        with self._lock:
            self.state.commit(pod.key, written)

    def pre_bind_async(self, pod: Pod, node: str, done: Callable[[Exception | None], None]) -> None:
        """`pre_bind` without waiting, where the writer can (`write_status_async`): the claims are written
        one after the other, each from the answer to the previous one, and `done(None)` follows the
        commit; `done(error)` on the first failure (nothing more is written)."""
        write_async: Callable[[ResourceClaim, dict[str, Any], WriteDone], None] | None = getattr(
            self.writer, "write_status_async", None
        )
        try:
            if write_async is None:
                self.pre_bind(pod, node)
                done(None)
                return
            writes = self._statuses(pod, node)
        except Exception as exc:
            done(exc)
            return
        written: list[ResourceClaim] = []

        def next_write(claim: ResourceClaim | None, error: Exception | None) -> None:
            if error is not None:
                done(error)
                return
            if claim is not None:
                written.append(claim)
            if len(written) == len(writes):
                with self._lock:
                    self.state.commit(pod.key, written)
                done(None)
                return
            try:
                write_async(*writes[len(written)], next_write)
            except Exception as exc:  # refused before sending (e.g. no longer leading)
                done(exc)

        next_write(None, None)

    def _statuses(self, pod: Pod, node: str) -> list[tuple[ResourceClaim, dict[str, Any]]]:
        """Each claim of the pod not yet reserved for it, with the status PreBind writes."""
        with self._lock:
            allocations = {a.claim.key: a for a in self.state.in_flight(pod.key)}
            claims = [self.state.claims[key] for key in self.state.pod_claims(pod).keys]
        writes = []
        for claim in claims:
            if _reserved_for(claim, pod):
                continue
            reserved = [dict(r) for r in claim.reserved_for]
            status = dict(claim.raw.get("status") or {})
            allocation = allocations.get(claim.key)
            if claim.allocation is None:
                if allocation is None:
                    raise RuntimeError(f"claim {claim.key} has no allocation for {pod.key} on {node}")
                status["allocation"] = allocation.to_json()
            status["reservedFor"] = [*reserved, pod_reference(pod)]
            writes.append((claim, status))
        return writes


def _reserved_for(claim: ResourceClaim, pod: Pod) -> bool:
    for reference in claim.reserved_for:  # a loop, not any(): usually empty, and this runs at every PreBind
        if reference.get("uid") == pod.uid and reference.get("name") == pod.name:
            return True
    return False


def _allocation_selector(claim: ResourceClaim) -> dict[str, Any] | None:
    allocation = (claim.raw.get("status") or {}).get("allocation") or {}
    selector = allocation.get("nodeSelector")
    return selector if isinstance(selector, dict) else None
