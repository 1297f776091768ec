"""Strategic merge patch, as apimachinery's strategicpatch applies one to the built-in kinds.

Lists with a patch merge key merge element by element (containers by `name`, conditions by
`type`); primitive lists with strategy `merge` (finalizers, podCIDRs) merge as sets; every other
list is replaced whole (tolerations, taints, containerStatuses). Directives: `$patch`
(replace | delete | merge) in maps and list elements, `$retainKeys`, `$setElementOrder/<list>`
and `$deleteFromPrimitiveList/<list>`. The keys come from the Go struct tags of
k8s.io/api core/v1 and meta/v1 (the client's models do not carry them).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from apiserver.status import bad_request

PRIMITIVE = ""  # merge strategy for lists of scalars: set union

_CONTAINER_LISTS = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_COMMON = {"metadata.ownerReferences": "uid", "metadata.finalizers": PRIMITIVE}
_POD: dict[str, str] = {
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "spec.topologySpreadConstraints": "topologyKey",
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.resourceClaimStatuses": "name",
}
for _list in ("containers", "initContainers", "ephemeralContainers"):
    _POD[f"spec.{_list}"] = "name"
    for _field, _key in _CONTAINER_LISTS.items():
        _POD[f"spec.{_list}.{_field}"] = _key
_TEMPLATE = {f"spec.template.{path}": key for path, key in _POD.items() if path.startswith("spec.")}
_WORKLOAD = {**_COMMON, **_TEMPLATE, "status.conditions": "type"}
MERGE_KEYS: dict[str, dict[str, str]] = {
    "Pod": {**_COMMON, **_POD},
    "Node": {**_COMMON, "spec.podCIDRs": PRIMITIVE, "status.conditions": "type", "status.addresses": "type"},
    "Namespace": {**_COMMON, "status.conditions": "type"},
    "Event": dict(_COMMON),
    "Lease": dict(_COMMON),
    "Service": {**_COMMON, "spec.ports": "port"},
    "ServiceAccount": {**_COMMON, "secrets": "name"},
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "Job": {**_COMMON, **_TEMPLATE},
    "DeviceClass": dict(_COMMON),
    "ResourceClaim": {**_COMMON, "status.reservedFor": "uid"},
    "ResourceClaimTemplate": dict(_COMMON),
    "ResourceSlice": dict(_COMMON),  # JobStatus conditions have no merge key: replaced whole
}
# Lists with patchStrategy "merge,retainKeys" honour $retainKeys inside their elements as well.
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge(original: Mapping[str, Any], patch: Mapping[str, Any], kind: str) -> Any:
    keys = MERGE_KEYS.get(kind, _COMMON)
    result = _merge_map(copy.deepcopy(dict(original)), patch, "", keys)
    return {} if result is None else result


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _merge_map(original: dict[str, Any], patch: Mapping[str, Any], path: str, keys: dict[str, str]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive!r} in map at {path or '<root>'}")
    result = original
    for key, value in patch.items():
        if key == "$patch" or key == "$retainKeys" or key.startswith(_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if key.startswith("$"):
            raise bad_request(f"unknown directive {key!r} at {path or '<root>'}")
        child_path = _join(path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value, child_path, keys)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child_path, keys)
        else:
            result[key] = value
    for key, order in patch.items():
        if key.startswith(_ORDER) and isinstance(order, list):
            field = key[len(_ORDER) :]
            if isinstance(result.get(field), list):
                result[field] = _reorder(result[field], order, keys.get(_join(path, field)))
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(original: Any, patch: list[Any], path: str, keys: dict[str, str]) -> list[Any]:
    strategy = keys.get(path)
    if strategy is None or not isinstance(original, list):
        # Replace (no merge key), but a list being created still drops directive elements.
        return [
            copy.deepcopy(v) for v in patch if not (isinstance(v, Mapping) and "$patch" in v and len(v) == 1)
        ]
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(v) for v in patch if not (isinstance(v, Mapping) and "$patch" in v)]
    if strategy == PRIMITIVE:
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    result = list(original)
    for item in patch:
        if not isinstance(item, Mapping):
            raise bad_request(f"merging list {path}: element {item!r} is not an object")
        if strategy not in item:
            raise bad_request(f"map: {dict(item)} does not contain declared merge key: {strategy}")
        match = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, Mapping) and existing.get(strategy) == item[strategy]
            ),
            None,
        )
        directive = item.get("$patch")
        if directive == "delete":
            if match is not None:
                result.pop(match)
            continue
        if match is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            merged = _merge_map(dict(result[match]), item, path, keys)
            if merged is None:
                result.pop(match)
            else:
                result[match] = merged
    return result


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """$setElementOrder: listed elements first, in the given order; the rest keep their relative order."""

    def identity(item: Any) -> Any:
        if merge_key and isinstance(item, Mapping):
            return item.get(merge_key)
        return item

    wanted = [identity(o) for o in order]
    positions = {repr(w): i for i, w in enumerate(wanted)}
    listed = sorted(
        (i for i in items if repr(identity(i)) in positions), key=lambda i: positions[repr(identity(i))]
    )
    rest = [i for i in items if repr(identity(i)) not in positions]
    return listed + rest
