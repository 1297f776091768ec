"""A pod's resource claims as its spec and status name them (pod.raw), and which containers use which.

`spec.resourceClaims[i]` is a claim named directly (`resourceClaimName`) or made from a template, whose
generated name is in `status.resourceClaimStatuses` (the claim controller writes it; until then the pod
cannot start). A container uses a pod claim through `resources.claims[j].name`, optionally narrowed
to one `request` (a subrequest `req/sub` counts as its request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class PodClaimError(Exception):
    """The pod's claims cannot be resolved yet; the message says which and why."""


@dataclass(frozen=True)
class PodClaim:
    pod_name: str  # the name inside the pod (spec.resourceClaims[].name)
    claim_name: str  # the ResourceClaim's name


def pod_claims(raw: Mapping[str, Any]) -> list[PodClaim]:
    spec = raw.get("spec") or {}
    generated = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in (raw.get("status") or {}).get("resourceClaimStatuses") or []
    }
    result = []
    for entry in spec.get("resourceClaims") or []:
        name = str(entry.get("name") or "")
        if entry.get("resourceClaimName"):
            result.append(PodClaim(name, str(entry["resourceClaimName"])))
        elif entry.get("resourceClaimTemplateName"):
            made = generated.get(name)
            if not made:
                raise PodClaimError(f"claim {name!r}: no ResourceClaim made from its template yet")
            result.append(PodClaim(name, str(made)))
    return result


def container_claims(raw: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Container name -> [(pod claim name, request or "")], for every container and init container."""
    spec = raw.get("spec") or {}
    result: dict[str, list[tuple[str, str]]] = {}
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            refs = ((c.get("resources") or {}).get("claims")) or []
            result[str(c.get("name"))] = [(str(r.get("name")), str(r.get("request") or "")) for r in refs]
    return result


def device_serves(device_requests: tuple[str, ...], request: str) -> bool:
    """Whether a prepared device belongs to the container's reference (no request: the whole claim)."""
    if not request or not device_requests:
        return True
    return any(r == request or r.split("/", 1)[0] == request for r in device_requests)
