"""resource.k8s.io/v1 strategies (kube's pkg/registry/resource): DeviceClass, ResourceClaim (with status),
ResourceClaimTemplate and ResourceSlice.

The body is decoded against the official client's models (unknown fields dropped or 400 under strict
validation), then `kubenode.dra.validate` parses it and compiles every CEL selector with kube's device
environment at create and at update; the first bad field comes back as a 422 cause in kube's words
(`spec.selectors[0].cel.expression: Invalid value: "…": compilation failed: …`). A claim's and a
template's spec are immutable, as kube's ValidateResourceClaimUpdate keeps them; a claim's status is
written only through `/status`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import LABEL_MESSAGE, SUBDOMAIN_MESSAGE, Cause, Strategy, value_repr
from kubenode.dra.validate import validate as validate_dra
from kubenode.model.errors import ValidationError
from kubenode.model.resources import is_dns1123_label, is_dns1123_subdomain

IMMUTABLE = "field is immutable"
# kube's limits (k8s.io/api/resource/v1 types.go)
MAX_REQUESTS = 32  # DeviceRequestsMaxSize, also selectors and configs
MAX_DEVICES = 128  # ResourceSliceMaxDevices


_PATH_PART = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def _value_at(obj: Mapping[str, Any], path: str) -> object:
    """The value a field path such as `spec.selectors[0].cel.expression` or
    `spec.devices[0].attributes[gpu.example.com/model]` names (None where absent)."""
    value: object = obj
    for plain, bracketed in _PATH_PART.findall(path):
        part = plain or bracketed
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def dra_causes(kind: str, obj: Mapping[str, Any]) -> list[Cause]:
    """kube's validation of a DRA object's spec as one cause, or none."""
    try:
        validate_dra(kind, obj)
    except ValidationError as exc:
        value = _value_at(obj, exc.field)
        if value is None or value == "":
            return [(exc.field, "FieldValueRequired", f"Required value: {exc.message}")]
        if isinstance(value, str | int | float | bool):
            return [(exc.field, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: {exc.message}")]
        return [(exc.field, "FieldValueInvalid", f"Invalid value: {exc.message}")]
    return []


def _too_many(path: str, items: object, limit: int) -> list[Cause]:
    if isinstance(items, list) and len(items) > limit:
        return [(path, "FieldValueTooMany", f"Too many: {len(items)}: must have at most {limit} items")]
    return []


def _names(path: str, items: object, key: str = "name") -> list[Cause]:
    """Names that must be DNS labels and unique within their list (requests, devices)."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, item in enumerate(items if isinstance(items, list) else []):
        name = item.get(key) if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            continue  # the parse names a missing one
        where = f"{path}[{i}].{key}"
        if not is_dns1123_label(name):
            causes.append((where, "FieldValueInvalid", f"Invalid value: {value_repr(name)}: {LABEL_MESSAGE}"))
        elif name in seen:
            causes.append((where, "FieldValueDuplicate", f"Duplicate value: {value_repr(name)}"))
        seen.add(name)
    return causes


def _subdomain(path: str, value: object) -> list[Cause]:
    if isinstance(value, str) and value and not is_dns1123_subdomain(value):
        return [(path, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: {SUBDOMAIN_MESSAGE}")]
    return []


def _immutable(path: str, new: object, old: object) -> list[Cause]:
    if new == old:
        return []
    return [(path, "FieldValueInvalid", f"Invalid value: {value_repr(new or '')}: {IMMUTABLE}")]


def claim_spec_causes(spec: Mapping[str, Any], path: str) -> list[Cause]:
    """kube's limits and names of a claim's (or a template's) device requests."""
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    causes = _too_many(f"{path}.devices.requests", requests, MAX_REQUESTS)
    causes += _names(f"{path}.devices.requests", requests)
    for i, request in enumerate(requests if isinstance(requests, list) else []):
        exactly = request.get("exactly") if isinstance(request, Mapping) else None
        if isinstance(exactly, Mapping):
            where = f"{path}.devices.requests[{i}].exactly"
            causes += _subdomain(f"{where}.deviceClassName", exactly.get("deviceClassName"))
            causes += _too_many(f"{where}.selectors", exactly.get("selectors"), MAX_REQUESTS)
    return causes


def _default_request(request: dict[str, Any]) -> None:
    """kube's SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest: allocationMode ExactCount, and
    count 1 in that mode; a toleration's operator Equal."""
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in request.get("tolerations") or ():
        if isinstance(toleration, dict) and not toleration.get("operator"):
            toleration["operator"] = "Equal"


def default_claim_spec(spec: object) -> None:
    """kube's SetObjectDefaults_ResourceClaim on a claim's (or a template's) spec, in place. The real
    kube-scheduler reads an unset allocationMode as an error ("unsupported count mode")."""
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for request in (devices.get("requests") if isinstance(devices, dict) else None) or ():
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in request.get("firstAvailable") or ():
            if isinstance(sub, dict):
                _default_request(sub)


class _DraStrategy(Strategy):
    immutable_spec = False
    returns_deleted_object = True  # each of kube's pkg/registry/resource/*/storage sets it

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        meta = obj.get("metadata") or {}
        causes = self.check_name(str(meta.get("name") or "")) + self.check_metadata(meta)
        if old is not None and self.immutable_spec and obj.get("spec") != old.get("spec"):
            return [*causes, ("spec", "FieldValueInvalid", f"Invalid value: {IMMUTABLE}")]
        if old is not None and obj.get("spec") == old.get("spec"):
            return causes  # a status or metadata write: the spec passed when it was written
        causes += self.spec_causes(obj.get("spec") or {}, None if old is None else old.get("spec") or {})
        return causes or dra_causes(self.info.kind, obj)

    def spec_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        return []


class DeviceClassStrategy(_DraStrategy):
    model = "V1DeviceClass"

    def spec_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        selectors = _too_many("spec.selectors", spec.get("selectors"), MAX_REQUESTS)
        return selectors + _too_many("spec.config", spec.get("config"), MAX_REQUESTS)


class ResourceClaimTemplateStrategy(_DraStrategy):
    model = "V1ResourceClaimTemplate"
    immutable_spec = True

    def prepare_create(self, obj: dict[str, Any]) -> None:
        default_claim_spec((obj.get("spec") or {}).get("spec"))

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        default_claim_spec((new.get("spec") or {}).get("spec"))

    def spec_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        inner = spec.get("spec")
        return claim_spec_causes(inner, "spec.spec") if isinstance(inner, Mapping) else []


class ResourceClaimStrategy(_DraStrategy):
    model = "ResourceV1ResourceClaim"
    has_status = True
    immutable_spec = True

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj.pop("status", None)  # kube's PrepareForCreate: status is the scheduler's, via /status
        default_claim_spec(obj.get("spec"))

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        default_claim_spec(new.get("spec"))  # kube defaults every body it decodes

    def spec_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        return claim_spec_causes(spec, "spec")


class ResourceSliceStrategy(_DraStrategy):
    model = "V1ResourceSlice"
    field_labels = ("spec.nodeName", "spec.driver")  # kube's resourceslice field selectors

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        spec = obj.get("spec") or {}
        return {
            "spec.nodeName": str(spec.get("nodeName") or ""),
            "spec.driver": str(spec.get("driver") or ""),
        }

    def spec_causes(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes = _subdomain("spec.driver", spec.get("driver"))
        causes += _too_many("spec.devices", spec.get("devices"), MAX_DEVICES)
        causes += _names("spec.devices", spec.get("devices"))
        causes += _device_attribute_causes(spec.get("devices"))
        if old is not None:  # kube: a slice stays with its node and its driver
            causes += _immutable("spec.nodeName", spec.get("nodeName"), old.get("nodeName"))
            causes += _immutable("spec.driver", spec.get("driver"), old.get("driver"))
        return causes


MAX_ATTRIBUTES_AND_CAPACITIES = 32  # kube's ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_ATTRIBUTE_STRING = 64  # kube's DeviceAttributeMaxValueLength


def _device_attribute_causes(devices: object) -> list[Cause]:
    """kube's validateDevice: at most 32 attributes and capacities together per device; a string or
    version attribute of at most 64 bytes."""
    causes: list[Cause] = []
    for i, device in enumerate(devices if isinstance(devices, list) else ()):
        if not isinstance(device, Mapping):
            continue
        found, held = device.get("attributes"), device.get("capacity")
        attributes: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        capacity: Mapping[str, Any] = held if isinstance(held, Mapping) else {}
        for name, value in sorted(attributes.items()):
            for kind in ("string", "version"):
                text = value.get(kind) if isinstance(value, Mapping) else None
                if isinstance(text, str) and len(text.encode()) > MAX_ATTRIBUTE_STRING:
                    field = f"spec.devices[{i}].attributes[{name}].{kind}"
                    why = f"Too long: may not be more than {MAX_ATTRIBUTE_STRING} bytes"
                    causes.append((field, "FieldValueTooLong", why))
        total = len(attributes) + len(capacity)
        if total > MAX_ATTRIBUTES_AND_CAPACITIES:
            why = (
                f"Invalid value: {total}: the total number of attributes and capacities must not exceed "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES}"
            )
            causes.append((f"spec.devices[{i}]", "FieldValueInvalid", why))
    return causes
