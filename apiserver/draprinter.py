"""Table columns of the resource.k8s.io/v1 kinds, as kube's printers.go prints them for `kubectl get`.

DeviceClasses and ResourceClaimTemplates show a name and an age; a ResourceClaim adds its State
(kube's resourceClaimState: deleted, pending or allocated, then reserved or deallocating); a
ResourceSlice its node, driver and pool.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.tablecells import AGE, NAME, NONE, Obj, column, since
from apiserver.tablecells import meta as _meta
from apiserver.tablecells import spec as _spec
from apiserver.tablecells import status as _status

NAME_AGE = [NAME, AGE]
CLAIM_COLUMNS = [
    NAME,
    column("State", "A summary of the current state (allocated, pending, reserved, etc.)."),
    AGE,
]
SLICE_COLUMNS = [
    NAME,
    column("Node", "The node providing the devices of this slice."),
    column("Driver", "The driver providing the devices of this slice."),
    column("Pool", "The pool containing the devices of this slice."),
    AGE,
]


def name_age_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), since(_meta(obj).get("creationTimestamp"), now)]


def claim_state(obj: Obj) -> str:
    """kube's resourceClaimState."""
    deleted = bool(_meta(obj).get("deletionTimestamp"))
    status = _status(obj)
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


def claim_cells(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [meta.get("name", ""), claim_state(obj), since(meta.get("creationTimestamp"), now)]


def slice_cells(obj: Obj, now: datetime) -> list[Any]:
    spec = _spec(obj)
    return [
        _meta(obj).get("name", ""),
        spec.get("nodeName") or NONE,
        spec.get("driver", ""),
        (spec.get("pool") or {}).get("name", ""),
        since(_meta(obj).get("creationTimestamp"), now),
    ]


DRA_PRINTERS = {
    ("resource.k8s.io", "deviceclasses"): (NAME_AGE, name_age_cells),
    ("resource.k8s.io", "resourceclaims"): (CLAIM_COLUMNS, claim_cells),
    ("resource.k8s.io", "resourceclaimtemplates"): (NAME_AGE, name_age_cells),
    ("resource.k8s.io", "resourceslices"): (SLICE_COLUMNS, slice_cells),
}
