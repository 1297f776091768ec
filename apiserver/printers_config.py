"""Table columns of ConfigMaps, Secrets and RuntimeClasses, as kube's printers.go prints them.

Only counts and names are printed: a Secret's values never reach a Table.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.tablecells import AGE, NAME, Obj, column, since
from apiserver.tablecells import meta as _meta

CONFIGMAP_COLUMNS = [NAME, column("Data", "", kind="integer"), AGE]
SECRET_COLUMNS = [NAME, column("Type", ""), column("Data", "", kind="integer"), AGE]
RUNTIMECLASS_COLUMNS = [NAME, column("Handler", ""), AGE]


def configmap_cells(obj: Obj, now: datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [_meta(obj).get("name", ""), count, since(_meta(obj).get("creationTimestamp"), now)]


def secret_cells(obj: Obj, now: datetime) -> list[Any]:
    return [
        _meta(obj).get("name", ""),
        str(obj.get("type") or ""),
        len(obj.get("data") or {}),
        since(_meta(obj).get("creationTimestamp"), now),
    ]


def runtimeclass_cells(obj: Obj, now: datetime) -> list[Any]:
    return [
        _meta(obj).get("name", ""),
        str(obj.get("handler") or ""),
        since(_meta(obj).get("creationTimestamp"), now),
    ]


CONFIG_PRINTERS = {
    ("", "configmaps"): (CONFIGMAP_COLUMNS, configmap_cells),
    ("", "secrets"): (SECRET_COLUMNS, secret_cells),
    ("node.k8s.io", "runtimeclasses"): (RUNTIMECLASS_COLUMNS, runtimeclass_cells),
}
