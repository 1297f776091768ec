"""Why a pod's claims fit a node or not, from the API's objects: what `kubenode trace pod` shows.

Given the pod, the nodes and the resource.k8s.io/v1 objects as listed, each claim of the pod is
reported with the devices its allocation names, and each node with the allocator's verdict for
the pod's claims there: the devices of other claims count as taken, the pod's own allocations are
set aside (so a bound pod shows why the other nodes were not chosen, or that they would have fit
too and scoring chose), and for every request the number of devices of the node that match its
class and selectors, and how many of those are free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from kubenode.dra.types import DeviceClass, ResourceClaim, ResourceSlice
from kubenode.model.objects import Node, Pod
from scheduler.dra.allocator import AllocationError, Allocator
from scheduler.dra.plugin import CANNOT_ALLOCATE
from scheduler.dra.pools import gather_pools
from scheduler.dra.state import DraState


def explain(
    pod: Pod,
    nodes: Iterable[Node],
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim],
) -> dict[str, Any]:
    state = DraState()
    for device_class in classes:
        state.classes[device_class.name] = device_class
    for resource_slice in slices:
        state.put_slice(resource_slice)
    for claim in claims:
        state.put_claim(claim)
    found = state.pod_claims(pod)
    if found.waiting:
        return {"claims": [], "waiting": found.waiting, "nodes": []}
    own = [state.claims[key] for key in found.keys]
    report = [_claim_entry(claim) for claim in own]
    for claim in own:  # set the pod's own allocations aside
        state.put_claim(replace(claim, allocation=None))
    pending = [state.claims[key] for key in found.keys]
    allocator = Allocator(state.classes, state.in_use(), state.matcher)
    verdicts = []
    for node in sorted(nodes, key=lambda n: n.name):
        pools = gather_pools(state.slices_for(node.name), node)
        try:
            fits = allocator.allocate(node, pools, pending) is not None
            reason = "" if fits else CANNOT_ALLOCATE
        except AllocationError as exc:
            fits, reason = False, str(exc)
        entry: dict[str, Any] = {"node": node.name, "fits": fits, "requests": _counts(state, pools, pending)}
        if reason:
            entry["reason"] = reason
        verdicts.append(entry)
    return {"claims": report, "nodes": verdicts}


def _claim_entry(claim: ResourceClaim) -> dict[str, Any]:
    allocation: Mapping[str, Any] = (claim.raw.get("status") or {}).get("allocation") or {}
    return {
        "claim": claim.key,
        "allocated": claim.allocation is not None,
        "devices": [
            {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            for r in claim.allocation or ()
        ],
        "nodeSelector": allocation.get("nodeSelector"),
        "reservedFor": [r.get("name") for r in claim.reserved_for],
    }


def _counts(state: DraState, pools: list[Any], claims: list[ResourceClaim]) -> list[dict[str, Any]]:
    """Per request (or subrequest): devices of the node matching it, and how many of those are free."""
    out = []
    for claim in claims:
        for request in claim.requests:
            options = [("", request.exactly)] if request.exactly else list(request.first_available)
            for sub, selection in options:
                assert selection is not None
                device_class = state.classes.get(selection.device_class)
                expressions = (*(device_class.selectors if device_class else ()), *selection.selectors)
                matching = free = 0
                for pool in pools:
                    for _, device in pool.entries:
                        if device_class and state.matcher.all_match(pool.driver, device, expressions):
                            matching += 1
                            free += not state.is_used((pool.driver, pool.name, device.name))
                name = f"{request.name}/{sub}" if sub else request.name
                out.append(
                    {
                        "claim": claim.key,
                        "request": name,
                        "wants": selection.count,
                        "matching": matching,
                        "free": free,
                    }
                )
    return out
