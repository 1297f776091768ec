"""Builders of resource.k8s.io/v1 objects from the tests' shorthand (see allocator_cases.yaml)."""

from __future__ import annotations

from typing import Any, TypeVar

from kubenode.dra.types import PARSERS, DeviceClass, ResourceClaim, ResourceSlice

T = TypeVar("T")


def class_object(name: str, spec: Any) -> dict[str, Any]:
    driver = spec if isinstance(spec, str) else spec["driver"]
    body: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if isinstance(spec, dict) and "config" in spec:
        body["config"] = [{"opaque": opaque(driver, spec["config"])}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": body,
    }


def opaque(driver: str, attribute: str) -> dict[str, Any]:
    return {"driver": driver, "parameters": {attribute: attribute + "Value"}}


def device_object(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"name": item}
    out: dict[str, Any] = {"name": item["name"]}
    if "capacity" in item:
        out["capacity"] = {key: {"value": value} for key, value in item["capacity"].items()}
    if "attributes" in item:
        out["attributes"] = item["attributes"]
    return out


def slice_object(item: dict[str, Any]) -> dict[str, Any]:
    devices = item["devices"]
    if isinstance(devices, int):
        devices = [f"device-{i}" for i in range(devices)]
    spec: dict[str, Any] = {
        "driver": item["driver"],
        "pool": {
            "name": item["pool"],
            "generation": item.get("generation", 0),
            "resourceSliceCount": item.get("count", 1),
        },
        "devices": [device_object(d) for d in devices],
    }
    if "node" in item:
        spec["nodeName"] = item["node"]
    elif "nodeSelector" in item:
        spec["nodeSelector"] = item["nodeSelector"]
    else:
        spec["allNodes"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": item["name"]},
        "spec": spec,
    }


def _selection(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": item["class"], "allocationMode": item.get("mode", "ExactCount")}
    if out["allocationMode"] == "ExactCount":
        out["count"] = item.get("count", 1)
    if item.get("selectors"):
        out["selectors"] = [{"cel": {"expression": e}} for e in item["selectors"]]
    if item.get("admin"):
        out["adminAccess"] = True
    return out


def claim_object(item: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    requests = []
    for request in item["requests"]:
        if "firstAvailable" in request:
            subs = [{"name": sub["name"], **_selection(sub)} for sub in request["firstAvailable"]]
            requests.append({"name": request["name"], "firstAvailable": subs})
        else:
            requests.append({"name": request["name"], "exactly": _selection(request)})
    devices: dict[str, Any] = {"requests": requests}
    if "constraints" in item:
        devices["constraints"] = item["constraints"]
    if "config" in item:
        devices["config"] = [
            {
                **({"requests": c["requests"]} if "requests" in c else {}),
                "opaque": opaque(c["driver"], c["attribute"]),
            }
            for c in item["config"]
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": item["name"], "namespace": namespace, "uid": f"uid-{item['name']}"},
        "spec": {"devices": devices},
    }


def classes(table: dict[str, Any]) -> dict[str, DeviceClass]:
    return {name: _parse(class_object(name, spec), DeviceClass) for name, spec in table.items()}


def slices(items: list[dict[str, Any]]) -> list[ResourceSlice]:
    return [_parse(slice_object(item), ResourceSlice) for item in items]


def claims(items: list[dict[str, Any]]) -> list[ResourceClaim]:
    return [_parse(claim_object(item), ResourceClaim) for item in items]


def _parse(obj: dict[str, Any], kind: type[T]) -> T:
    parsed = PARSERS[kind.__name__](obj, "")
    assert isinstance(parsed, kind)
    return parsed
